// Command corpusvariants writes the devcontainer.json variants of the
// shared corpus that the ingester accepts (bench/run.sh's manifest
// comparison): each corpus file as it is when envmanifest.Ingest accepts
// it, else with the members at the pointers of its executes-or-widens,
// changes-what-runs and unknown-property refusals removed (every
// occurrence of a duplicated name) and, where build or dockerFile went, the
// table's image put in — the stripped variants of envmanifest/corpus_test.go,
// built the same way from envmanifest/testdata/corpus-expected.json. A
// variant is written only when Ingest accepts it, and only with the
// canonical bytes and address pinned for it in
// envmanifest/testdata/corpus-canonical.json (a variant that moved, or is
// not pinned, is an error: the benchmark measures the pinned documents).
//
//	go run ./bench/corpusvariants CORPUS_DIR OUT_DIR
//
// It prints one line per corpus file (written or skipped, and why) and
// exits 1 when nothing was written or a variant is not as pinned.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

type refusal struct {
	Pointer string            `json:"pointer"`
	Class   envmanifest.Class `json:"class"`
}

type entry struct {
	Image    string `json:"image,omitempty"`
	Original struct {
		Refusals []refusal `json:"refusals,omitempty"`
	} `json:"original"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: corpusvariants CORPUS_DIR OUT_DIR")
		os.Exit(64)
	}
	corpus, out := os.Args[1], os.Args[2]
	data, err := os.ReadFile("envmanifest/testdata/corpus-expected.json")
	if err != nil {
		fail(err)
	}
	var table struct {
		Files map[string]entry `json:"files"`
	}
	if err := json.Unmarshal(data, &table); err != nil {
		fail(fmt.Errorf("envmanifest/testdata/corpus-expected.json: %w", err))
	}
	pinned, err := os.ReadFile("envmanifest/testdata/corpus-canonical.json")
	if err != nil {
		fail(err)
	}
	var pins struct {
		Files map[string]struct {
			Address   string `json:"address"`
			Canonical string `json:"canonical"`
		} `json:"files"`
	}
	if err := json.Unmarshal(pinned, &pins); err != nil {
		fail(fmt.Errorf("envmanifest/testdata/corpus-canonical.json: %w", err))
	}
	files, err := filepath.Glob(filepath.Join(corpus, "*.json"))
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		fail(err)
	}
	written := 0
	for _, f := range files {
		name := filepath.Base(f)
		doc, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		variant, how := doc, "as is"
		if _, err := envmanifest.Ingest(doc, envmanifest.Options{}); err != nil {
			e, ok := table.Files[name]
			if !ok {
				fmt.Printf("skip %s: refused and not in corpus-expected.json\n", name)
				continue
			}
			if variant, err = strip(doc, e); err != nil {
				fmt.Printf("skip %s: %v\n", name, err)
				continue
			}
			how = "refused members removed"
		}
		m, err := envmanifest.Ingest(variant, envmanifest.Options{})
		if err != nil {
			fmt.Printf("skip %s: refused after removal: %v\n", name, firstLine(err))
			continue
		}
		if pin, ok := pins.Files[name]; !ok || pin.Address != m.Address || pin.Canonical != string(m.Canonical) {
			fail(fmt.Errorf("%s: address %s is not the one pinned in envmanifest/testdata/corpus-canonical.json (%q); run go test ./envmanifest -run TestCorpus", name, m.Address, pin.Address))
		}
		if err := os.WriteFile(filepath.Join(out, name), variant, 0o644); err != nil {
			fail(err)
		}
		written++
		fmt.Printf("wrote %s (%s, %d bytes)\n", name, how, len(variant))
	}
	if written == 0 {
		fail(fmt.Errorf("no accepted variant in %s", corpus))
	}
}

// strip removes the members at the pointers of e's removable refusals and
// adds e.Image where build or dockerFile went (corpus_test.go's rule).
func strip(doc []byte, e entry) ([]byte, error) {
	v, err := hujson.Parse(doc)
	if err != nil {
		return nil, err
	}
	needImage := false
	for _, r := range e.Original.Refusals {
		switch r.Class {
		case envmanifest.ClassExecutesOrWidens, envmanifest.ClassChangesWhatRuns, envmanifest.ClassUnknownProperty:
			remove(&v, r.Pointer)
			if r.Pointer == "/build" || r.Pointer == "/dockerFile" {
				needImage = true
			}
		}
	}
	if needImage && e.Image != "" {
		obj := v.Value.(*hujson.Object)
		obj.Members = append(obj.Members, hujson.ObjectMember{
			Name:  hujson.Value{BeforeExtra: hujson.Extra("\n"), Value: hujson.String("image")},
			Value: hujson.Value{BeforeExtra: hujson.Extra(" "), Value: hujson.String(e.Image)},
		})
	}
	return v.Pack(), nil
}

func memberName(m hujson.ObjectMember) string {
	lit, _ := m.Name.Value.(hujson.Literal)
	return lit.String()
}

// remove deletes every member at the RFC 6901 pointer ptr.
func remove(v *hujson.Value, ptr string) {
	toks := strings.Split(ptr, "/")[1:]
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	cur := v
	for i, tok := range toks {
		tok = unescape.Replace(tok)
		obj, ok := cur.Value.(*hujson.Object)
		if !ok {
			return
		}
		if i == len(toks)-1 {
			obj.Members = slices.DeleteFunc(obj.Members, func(m hujson.ObjectMember) bool { return memberName(m) == tok })
			return
		}
		var next *hujson.Value
		for j := range obj.Members {
			if memberName(obj.Members[j]) == tok {
				next = &obj.Members[j].Value
				break
			}
		}
		if next == nil {
			return
		}
		cur = next
	}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "corpusvariants:", err)
	os.Exit(1)
}
