package envmanifest

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// maxFuzzSeed is the largest C7 input used as a FuzzIngest seed.
const maxFuzzSeed = 16 << 10

// knownClasses is every refusal class docs/design.md "Refusal classes" defines.
var knownClasses = map[Class]bool{
	ClassSyntax: true, ClassEncoding: true, ClassLimit: true, ClassNumber: true,
	ClassDuplicateKey: true, ClassExecutesOrWidens: true, ClassChangesWhatRuns: true,
	ClassUnknownProperty: true, ClassInvalidValue: true, ClassMissing: true,
	ClassConflict: true, ClassLockfile: true, ClassReservedEnv: true,
}

// c7Inputs returns the raw devcontainer.json input of every C7 vector in
// testdata/c7, in file order (the fuzz seeds).
func c7Inputs(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(c7Dir, "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no C7 vectors in %s (%v)", c7Dir, err)
	}
	sort.Strings(files)
	var out [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		c := &c7Case{file: f}
		if err := json.Unmarshal(data, c); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		in, err := c.input()
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, in)
	}
	return out
}

// checkRefusals fails t unless rs is non-empty, sorted by pointer (UTF-8
// byte order) and every refusal has a known class and a message.
func checkRefusals(t *testing.T, rs []Refusal) {
	t.Helper()
	if len(rs) == 0 {
		t.Fatal("a refusal error without refusals")
	}
	for i, r := range rs {
		if !knownClasses[r.Class] {
			t.Fatalf("refusal %d has class %q: %v", i, r.Class, r)
		}
		if r.Message == "" {
			t.Fatalf("refusal %d has no message: %v", i, r)
		}
		if r.Pointer != "" && r.Pointer[0] != '/' {
			t.Fatalf("refusal %d pointer %q is not a JSON Pointer", i, r.Pointer)
		}
		if i > 0 && rs[i-1].Pointer > r.Pointer {
			t.Fatalf("refusals not sorted: %q before %q", rs[i-1].Pointer, r.Pointer)
		}
	}
}

// reemit writes the decoded tree n as JSON with every object's members in
// reverse order, through a jsontext.Encoder with the given indentation
// ("" for the compact form). Scalars are copied as their source text.
func reemit(n *strictjson.Node, indent string) ([]byte, error) {
	var buf bytes.Buffer
	opts := []jsontext.Options{jsontext.Multiline(indent != "")}
	if indent != "" {
		opts = append(opts, jsontext.WithIndent(indent))
	}
	enc := jsontext.NewEncoder(&buf, opts...)
	var emit func(n *strictjson.Node) error
	emit = func(n *strictjson.Node) error {
		switch n.Kind {
		case strictjson.KindObject:
			if err := enc.WriteToken(jsontext.BeginObject); err != nil {
				return err
			}
			for _, m := range slices.Backward(n.Members) {
				if err := enc.WriteToken(jsontext.String(m.Name)); err != nil {
					return err
				}
				if err := emit(m.Value); err != nil {
					return err
				}
			}
			return enc.WriteToken(jsontext.EndObject)
		case strictjson.KindArray:
			if err := enc.WriteToken(jsontext.BeginArray); err != nil {
				return err
			}
			for _, e := range n.Elems {
				if err := emit(e); err != nil {
					return err
				}
			}
			return enc.WriteToken(jsontext.EndArray)
		}
		return enc.WriteValue(jsontext.Value(n.Raw))
	}
	if err := emit(n); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// FuzzIngest: Ingest never panics; a refusal is a *RefusedError whose
// refusals are sorted by pointer and each carry a known class; an accepted
// document re-serialized with its object members reversed and other
// whitespace (Decode, then a jsontext.Encoder) ingests to the same
// canonical bytes, address and excluded list.
func FuzzIngest(f *testing.F) {
	for _, in := range c7Inputs(f) {
		// The limit vectors (up to 1 MiB) are left out: the fuzzer would
		// spend its time minimizing them; TestC7 covers them.
		if len(in) <= maxFuzzSeed {
			f.Add(in)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Ingest(data, Options{})
		if err != nil {
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("Ingest error is not a *RefusedError: %v", err)
			}
			checkRefusals(t, re.Refusals)
			return
		}
		if m.Address != Address(m.Canonical) {
			t.Fatalf("address %s is not BLAKE3 of the canonical bytes", m.Address)
		}
		root, rs := decode(data, true)
		if root == nil || len(rs) > 0 {
			t.Fatalf("accepted document does not decode cleanly: %v", rs)
		}
		// One layout per input (compact, tabs or spaces) keeps an
		// execution to two ingestions.
		for _, indent := range []string{[]string{"", "\t", "   "}[len(data)%3]} {
			again, err := reemit(root, indent)
			if err != nil {
				t.Fatalf("re-emit: %v", err)
			}
			if len(again) > strictjson.MaxInputBytes {
				continue // whitespace pushed it past the size limit: refused by design
			}
			m2, err := Ingest(again, Options{})
			if err != nil {
				t.Fatalf("re-serialized document refused: %v\n%.2000s", err, again)
			}
			if m2.Address != m.Address || !bytes.Equal(m2.Canonical, m.Canonical) {
				t.Fatalf("address changed on re-serialization: %s → %s\n%s\n%s", m.Address, m2.Address, m.Canonical, m2.Canonical)
			}
			if !slices.Equal(m2.Excluded, m.Excluded) {
				t.Fatalf("excluded changed on re-serialization: %v → %v", m.Excluded, m2.Excluded)
			}
		}
	})
}

// formatMountString writes m back as a docker --mount string: the fields
// type, source (when set) and target, quoted by encoding/csv.
func formatMountString(m Mount) (string, error) {
	fields := []string{"type=" + m.Kind}
	if m.Source != "" {
		fields = append(fields, "source="+m.Source)
	}
	fields = append(fields, "target="+m.Target)
	var b strings.Builder
	w := csv.NewWriter(&b)
	if err := w.Write(fields); err != nil {
		return "", err
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// parseMountString runs the ingester's docker --mount parser on s alone.
func parseMountString(s string) (Mount, bool, []Refusal) {
	in := &ingester{m: &Manifest{}}
	m, ok := in.mountString(&strictjson.Node{Kind: strictjson.KindString, Pointer: "/mounts/0", Str: s})
	return m, ok, in.refusals
}

// FuzzMountString: the docker --mount string parser never panics; its
// field splitting agrees with encoding/csv on every string without CR/LF; it
// accepts exactly when it refuses nothing; an accepted mount has a target
// and a known kind, and written back as a mount string (encoding/csv
// quoting) parses to the same Mount.
func FuzzMountString(f *testing.F) {
	for _, in := range c7Inputs(f) {
		root, _ := decode(in, true)
		if ms := root.Get("mounts"); ms != nil {
			for _, e := range ms.Elems {
				if e.Kind == strictjson.KindString {
					f.Add(e.Str)
				}
			}
		}
	}
	for _, s := range []string{
		"source=cache,target=/home/vscode/.cache,type=volume",
		`"source=a,b","target=/x y",type=bind,consistency=cached`,
		"type=tmpfs,destination=/tmp",
		"Type=BIND,SRC=/a,DST=/b,dst=/c",
		"target=/x,readonly",
		"target=/x,volume-opt=o=bind",
		"source=x",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !strings.ContainsAny(s, "\r\n") {
			// The comma-split fast path reads what encoding/csv reads.
			fast, ferr := mountFields(s)
			slow, serr := csvFields(s)
			if (ferr != nil) != (serr != nil) || !slices.Equal(fast, slow) {
				t.Fatalf("mountFields(%q) = %q, %v; encoding/csv: %q, %v", s, fast, ferr, slow, serr)
			}
		}
		m, ok, rs := parseMountString(s)
		if ok != (len(rs) == 0) {
			t.Fatalf("ok=%v with refusals %v", ok, rs)
		}
		for _, r := range rs {
			if !knownClasses[r.Class] || r.Pointer != "/mounts/0" || r.Message == "" {
				t.Fatalf("bad refusal %v", r)
			}
		}
		if !ok {
			return
		}
		if m.Target == "" || (m.Kind != MountBind && m.Kind != MountVolume && m.Kind != MountTmpfs) {
			t.Fatalf("accepted mount %+v has no target or an unknown kind", m)
		}
		again, err := formatMountString(m)
		if err != nil {
			t.Fatalf("format %+v: %v", m, err)
		}
		m2, ok2, rs2 := parseMountString(again)
		if !ok2 {
			t.Fatalf("written-back mount %q refused: %v", again, rs2)
		}
		if m2 != m {
			t.Fatalf("round trip %q → %+v → %q → %+v", s, m, again, m2)
		}
	})
}
