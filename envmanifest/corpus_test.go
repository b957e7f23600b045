package envmanifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tailscale/hujson"
)

// corpusOutcome is one hand-written expectation of testdata/corpus-expected.json.
type corpusOutcome struct {
	Accepted    bool        `json:"accepted,omitempty"`
	Excluded    []string    `json:"excluded,omitempty"`
	Pinned      bool        `json:"pinned,omitempty"`
	ImagePinned bool        `json:"imagePinned,omitempty"`
	Refusals    []c7Refusal `json:"refusals,omitempty"`
}

type corpusEntry struct {
	Image    string        `json:"image,omitempty"`
	Original corpusOutcome `json:"original"`
	Stripped corpusOutcome `json:"stripped"`
}

func loadCorpusTable(t *testing.T) map[string]corpusEntry {
	t.Helper()
	data, err := os.ReadFile("testdata/corpus-expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Comment []string               `json:"_comment"`
		Files   map[string]corpusEntry `json:"files"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("testdata/corpus-expected.json: %v", err)
	}
	return doc.Files
}

// corpusTally counts outcomes: accepted documents and refusals per class.
type corpusTally struct {
	accepted, refused int
	classes           map[Class]int
}

func (tl *corpusTally) add(t *testing.T, name string, m *Manifest, err error) []Refusal {
	t.Helper()
	if err == nil {
		tl.accepted++
		return nil
	}
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Errorf("%s: not a refusal: %v", name, err)
		return nil
	}
	tl.refused++
	whole := false
	for _, r := range re.Refusals {
		tl.classes[r.Class]++
		if r.Pointer == "" {
			switch r.Class {
			case ClassSyntax, ClassEncoding, ClassLimit, ClassLockfile:
				whole = true
			default:
				t.Errorf("%s: refusal without a pointer: %s", name, r)
			}
		}
		if r.Pointer != "" && !strings.HasPrefix(r.Pointer, "/") {
			t.Errorf("%s: refusal pointer is not an RFC 6901 pointer: %s", name, r)
		}
		if strings.TrimSpace(r.Message) == "" {
			t.Errorf("%s: refusal without a message: %s", name, r)
		}
	}
	if whole && len(re.Refusals) != 1 {
		t.Errorf("%s: a whole-document refusal comes alone, got %d", name, len(re.Refusals))
	}
	return re.Refusals
}

func (tl *corpusTally) String() string {
	var cls []string
	for c := range tl.classes {
		cls = append(cls, string(c))
	}
	sort.Strings(cls)
	var b strings.Builder
	fmt.Fprintf(&b, "accepted %d, refused %d", tl.accepted, tl.refused)
	for _, c := range cls {
		fmt.Fprintf(&b, "; %s %d", c, tl.classes[Class(c)])
	}
	return b.String()
}

// corpusCompare checks an ingestion outcome against a hand-written one.
func corpusCompare(t *testing.T, what string, want corpusOutcome, m *Manifest, refusals []Refusal, err error) {
	t.Helper()
	if want.Accepted {
		if err != nil {
			t.Errorf("%s: want accepted, got %v", what, err)
			return
		}
		if !slices.Equal(append([]string{}, m.Excluded...), want.Excluded) && !(len(m.Excluded) == 0 && len(want.Excluded) == 0) {
			t.Errorf("%s: excluded %q, want %q", what, m.Excluded, want.Excluded)
		}
		if m.IsPinned() != want.Pinned || m.ImagePinned() != want.ImagePinned {
			t.Errorf("%s: pinned %v imagePinned %v, want %v %v", what, m.IsPinned(), m.ImagePinned(), want.Pinned, want.ImagePinned)
		}
		return
	}
	if err == nil {
		t.Errorf("%s: want refusals %v, got accepted %s", what, want.Refusals, m.Canonical)
		return
	}
	got := vecRefusalKeys(refusals)
	key := func(r c7Refusal) string { return fmt.Sprintf("%q %s", r.Pointer, r.Class) }
	var g, w []string
	for _, r := range got {
		g = append(g, key(r))
	}
	for _, r := range want.Refusals {
		w = append(w, key(r))
	}
	sort.Strings(g)
	sort.Strings(w)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		var msgs []string
		for _, r := range refusals {
			msgs = append(msgs, r.String())
		}
		t.Errorf("%s: refusals\n got  %s\n want %s\n messages:\n  %s", what, strings.Join(g, ", "), strings.Join(w, ", "), strings.Join(msgs, "\n  "))
	}
}

// corpusMemberName returns an object member's name (unescaped).
func corpusMemberName(m hujson.ObjectMember) string {
	lit, _ := m.Name.Value.(hujson.Literal)
	return lit.String()
}

// corpusRemove deletes every member (duplicates too) at an RFC 6901 pointer
// from the hujson tree; it reports whether anything was removed.
func corpusRemove(v *hujson.Value, ptr string) bool {
	toks := strings.Split(ptr, "/")[1:]
	for i, tok := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
	}
	cur := v
	for i, tok := range toks {
		obj, ok := cur.Value.(*hujson.Object)
		if !ok {
			return false
		}
		if i == len(toks)-1 {
			n := len(obj.Members)
			obj.Members = slices.DeleteFunc(obj.Members, func(m hujson.ObjectMember) bool { return corpusMemberName(m) == tok })
			return len(obj.Members) != n
		}
		next := (*hujson.Value)(nil)
		for j := range obj.Members {
			if corpusMemberName(obj.Members[j]) == tok {
				next = &obj.Members[j].Value
				break
			}
		}
		if next == nil {
			return false
		}
		cur = next
	}
	return false
}

// corpusReorder reverses the member order of every object and the element
// order of the top-level "mounts" array: the address must not change.
func corpusReorder(v *hujson.Value, top bool) {
	switch x := v.Value.(type) {
	case *hujson.Object:
		slices.Reverse(x.Members)
		for i := range x.Members {
			if top && corpusMemberName(x.Members[i]) == "mounts" {
				if arr, ok := x.Members[i].Value.Value.(*hujson.Array); ok {
					slices.Reverse(arr.Elements)
				}
			}
			corpusReorder(&x.Members[i].Value, false)
		}
	case *hujson.Array:
		for i := range x.Elements {
			corpusReorder(&x.Elements[i], false)
		}
	}
}

// TestCorpus ingests every file of shared/corpus/devcontainer and compares
// the outcome with the hand-written table; then the same file with its
// refused members removed (and an image put in where build or dockerFile
// went) against the table's second outcome; accepted variants must keep
// their address when re-serialized with reversed key order, minimized and
// re-indented. It logs a tally of outcomes and refusal classes.
func TestCorpus(t *testing.T) {
	dir := filepath.Join(vecShared(t), "corpus", "devcontainer")
	table := loadCorpusTable(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no corpus files in %s", dir)
	}
	seen := map[string]bool{}
	orig := &corpusTally{classes: map[Class]int{}}
	strip := &corpusTally{classes: map[Class]int{}}
	for _, f := range files {
		name := filepath.Base(f)
		seen[name] = true
		want, ok := table[name]
		if !ok {
			t.Errorf("%s: no entry in testdata/corpus-expected.json", name)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Ingest(data, Options{})
		refusals := orig.add(t, name, m, err)
		corpusCompare(t, name+" (original)", want.Original, m, refusals, err)

		// The stripped variant is built from the hand-written refusals, so
		// it does not depend on what the ingester said above.
		v, perr := hujson.Parse(data)
		if perr != nil {
			t.Errorf("%s: hujson: %v", name, perr)
			continue
		}
		needImage := false
		for _, r := range want.Original.Refusals {
			switch r.Class {
			case ClassExecutesOrWidens, ClassChangesWhatRuns, ClassUnknownProperty:
				if !corpusRemove(&v, r.Pointer) {
					t.Errorf("%s: nothing to remove at %q", name, r.Pointer)
				}
				if r.Pointer == "/build" || r.Pointer == "/dockerFile" {
					needImage = true
				}
			}
		}
		if needImage != (want.Image != "") {
			t.Errorf("%s: the table gives an image exactly when build or dockerFile is removed", name)
		}
		if needImage {
			obj := v.Value.(*hujson.Object)
			obj.Members = append(obj.Members, hujson.ObjectMember{
				Name:  hujson.Value{BeforeExtra: hujson.Extra("\n"), Value: hujson.String("image")},
				Value: hujson.Value{BeforeExtra: hujson.Extra(" "), Value: hujson.String(want.Image)},
			})
		}
		stripped := v.Pack()
		sm, serr := Ingest(stripped, Options{})
		srefusals := strip.add(t, name+" (stripped)", sm, serr)
		corpusCompare(t, name+" (stripped)", want.Stripped, sm, srefusals, serr)
		if serr != nil {
			continue
		}

		// Determinism: the same declaration re-serialized.
		for _, variant := range []struct {
			how  string
			edit func(*hujson.Value)
		}{
			{"standardized and minimized", func(v *hujson.Value) { v.Standardize(); v.Minimize() }},
			{"keys reversed, minimized", func(v *hujson.Value) { v.Standardize(); corpusReorder(v, true); v.Minimize() }},
			{"keys reversed, formatted", func(v *hujson.Value) { corpusReorder(v, true); v.Format() }},
		} {
			w := v.Clone()
			variant.edit(&w)
			again := w.Pack()
			if bytes.Equal(again, stripped) {
				t.Errorf("%s: %s variant did not change the bytes", name, variant.how)
			}
			m2, err := Ingest(again, Options{})
			if err != nil {
				t.Errorf("%s: %s variant refused: %v", name, variant.how, err)
				continue
			}
			if m2.Address != sm.Address || !bytes.Equal(m2.Canonical, sm.Canonical) {
				t.Errorf("%s: %s variant changed the address %s → %s\n %s\n %s", name, variant.how, sm.Address, m2.Address, sm.Canonical, m2.Canonical)
			}
		}
	}
	for name := range table {
		if !seen[name] {
			t.Errorf("testdata/corpus-expected.json names %s, which is not in the corpus", name)
		}
	}
	t.Logf("corpus as is (%d files): %s", len(files), orig)
	t.Logf("corpus with refused members removed: %s", strip)
}
