package envmanifest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"

	"github.com/gowebpki/jcs"
)

// c7Update fills the "address" fields of testdata/c7 from the hand-written
// canonical bytes (`go test ./envmanifest -run TestC7 -update`). Nothing
// else in a case file is ever written by a program.
var c7Update = flag.Bool("update", false, "fill the address fields of testdata/c7 from their hand-written canonical bytes, and rewrite testdata/corpus-canonical.json (TestCorpus)")

const c7Dir = "testdata/c7"

// c7Case is one C7 conformance vector (testdata/c7/README.md documents the
// shape for other implementations).
type c7Case struct {
	Name          string        `json:"name"`
	Rule          string        `json:"rule"`
	Group         string        `json:"group,omitempty"`
	Input         *string       `json:"input,omitempty"`
	InputBase64   string        `json:"inputBase64,omitempty"`
	InputTemplate []c7Part      `json:"inputTemplate,omitempty"`
	ConfigName    string        `json:"configName,omitempty"`
	Lockfile      *string       `json:"lockfile,omitempty"`
	LockfileName  string        `json:"lockfileName,omitempty"`
	LockfileFlag  bool          `json:"lockfileFlag,omitempty"`
	Expect        c7Expectation `json:"expect"`

	file string
}

type c7Part struct {
	Text   string `json:"text"`
	Repeat int    `json:"repeat,omitempty"`
}

type c7Expectation struct {
	Canonical   *string     `json:"canonical,omitempty"`
	Address     string      `json:"address,omitempty"`
	Pinned      *bool       `json:"pinned,omitempty"`
	ImagePinned *bool       `json:"imagePinned,omitempty"`
	Excluded    []string    `json:"excluded,omitempty"`
	Refusals    []c7Refusal `json:"refusals,omitempty"`
}

type c7Refusal struct {
	Pointer string `json:"pointer"`
	Class   Class  `json:"class"`
}

func (c *c7Case) accepted() bool { return c.Expect.Canonical != nil }

// input returns the raw bytes of the case's devcontainer.json.
func (c *c7Case) input() ([]byte, error) {
	n := 0
	if c.Input != nil {
		n++
	}
	if c.InputBase64 != "" {
		n++
	}
	if c.InputTemplate != nil {
		n++
	}
	if n != 1 {
		return nil, fmt.Errorf("%s: exactly one of input, inputBase64, inputTemplate must be given (got %d)", c.file, n)
	}
	switch {
	case c.Input != nil:
		return []byte(*c.Input), nil
	case c.InputBase64 != "":
		return base64.StdEncoding.Strict().DecodeString(c.InputBase64)
	}
	var b bytes.Buffer
	for _, p := range c.InputTemplate {
		r := p.Repeat
		if r == 0 {
			r = 1
		}
		b.WriteString(strings.Repeat(p.Text, r))
	}
	return b.Bytes(), nil
}

// lockfileName is the file name the lockfile is written under: the case's
// lockfileName, else the name the reference CLI discovers beside the config.
func (c *c7Case) configName() string {
	if c.ConfigName != "" {
		return c.ConfigName
	}
	return "devcontainer.json"
}

func (c *c7Case) lockfileName() string {
	if c.LockfileName != "" {
		return c.LockfileName
	}
	if strings.HasPrefix(c.configName(), ".") {
		return ".devcontainer-lock.json"
	}
	return "devcontainer-lock.json"
}

func loadC7(t *testing.T) []*c7Case {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(c7Dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no C7 vectors in %s", c7Dir)
	}
	sort.Strings(files)
	var cases []*c7Case
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		c := &c7Case{file: f}
		if err := dec.Decode(c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cases = append(cases, c)
	}
	return cases
}

// c7B3sum returns "blake3:" + Debian b3sum's hex digest of data, or "" (and
// skips the caller's cross-check) when b3sum is missing and CI is unset
// (testenv.OptionalPath).
func c7B3sum(t *testing.T, data []byte) string {
	t.Helper()
	path := testenv.OptionalPath(t, "b3sum", "apt-get install b3sum, or make deps")
	if path == "" {
		return ""
	}
	cmd := exec.Command(path, "--no-names")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("b3sum: %v", err)
	}
	return AddressPrefix + strings.TrimSpace(string(out))
}

var c7AddressRE = regexp.MustCompile(`"address": "[^"]*"`)

// TestC7Data checks the vectors themselves, without the ingester: shape,
// unique names, that each hand-written canonical text is already in JCS
// form, that groups agree, that every refusal class is covered, and that
// each address is BLAKE3 of the canonical bytes (cross-checked with b3sum).
// With -update it fills the address fields, and nothing else.
func TestC7Data(t *testing.T) {
	cases := loadC7(t)
	names := map[string]string{}
	groups := map[string][]*c7Case{}
	classes := map[Class]int{}
	for _, c := range cases {
		if c.Name == "" || c.Rule == "" {
			t.Errorf("%s: name and rule are required", c.file)
		}
		if want := c.Name + ".json"; !strings.HasSuffix(filepath.Base(c.file), "-"+want) {
			t.Errorf("%s: file name does not end in -%s", c.file, want)
		}
		if prev, ok := names[c.Name]; ok {
			t.Errorf("%s: name %q already used by %s", c.file, c.Name, prev)
		}
		names[c.Name] = c.file
		if _, err := c.input(); err != nil {
			t.Errorf("%v", err)
		}
		if c.accepted() == (c.Expect.Refusals != nil) {
			t.Errorf("%s: expect holds either canonical (accepted) or refusals (refused)", c.file)
			continue
		}
		if c.Group != "" {
			groups[c.Group] = append(groups[c.Group], c)
		}
		if !c.accepted() {
			if c.Group != "" {
				t.Errorf("%s: a refused case cannot be in a determinism group", c.file)
			}
			for i, r := range c.Expect.Refusals {
				classes[r.Class]++
				if i > 0 && c.Expect.Refusals[i-1].Pointer > r.Pointer {
					t.Errorf("%s: expected refusals not sorted by pointer at %d", c.file, i)
				}
			}
			continue
		}
		if c.Expect.Pinned == nil || c.Expect.ImagePinned == nil || c.Expect.Excluded == nil {
			t.Errorf("%s: an accepted case gives pinned, imagePinned and excluded", c.file)
		}
		canon := []byte(*c.Expect.Canonical)
		again, err := jcs.Transform(canon)
		if err != nil || !bytes.Equal(again, canon) {
			t.Errorf("%s: hand-written canonical is not in JCS form (%v):\n have %s\n jcs  %s", c.file, err, canon, again)
		}
		want := Address(canon)
		if *c7Update && c.Expect.Address != want {
			if err := c7WriteAddress(c.file, want); err != nil {
				t.Fatal(err)
			}
			c.Expect.Address = want
		}
		if c.Expect.Address != want {
			t.Errorf("%s: address %q, BLAKE3 of the canonical bytes is %q (run go test ./envmanifest -run TestC7 -update)", c.file, c.Expect.Address, want)
		}
		if b := c7B3sum(t, canon); b != "" && b != c.Expect.Address {
			t.Errorf("%s: b3sum says %s, file says %s", c.file, b, c.Expect.Address)
		}
	}
	for name, members := range groups {
		if len(members) < 2 {
			t.Errorf("group %q has only %s", name, members[0].file)
			continue
		}
		for _, m := range members[1:] {
			if *m.Expect.Canonical != *members[0].Expect.Canonical {
				t.Errorf("group %q: %s and %s have different canonical bytes", name, members[0].file, m.file)
			}
		}
	}
	for _, cl := range []Class{ClassSyntax, ClassEncoding, ClassLimit, ClassNumber, ClassDuplicateKey, ClassExecutesOrWidens,
		ClassChangesWhatRuns, ClassUnknownProperty, ClassInvalidValue, ClassMissing, ClassConflict, ClassLockfile} {
		if classes[cl] == 0 {
			t.Errorf("no vector expects refusal class %q", cl)
		}
	}
	t.Logf("%d vectors, %d determinism groups", len(cases), len(groups))
}

// c7WriteAddress rewrites the one "address" field of a case file in place
// (temp file, fsync, rename), leaving every other byte as it was.
func c7WriteAddress(file, addr string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if n := len(c7AddressRE.FindAllIndex(data, -1)); n != 1 {
		return fmt.Errorf("%s: want exactly one \"address\" field to update, found %d", file, n)
	}
	out := c7AddressRE.ReplaceAll(data, []byte(`"address": "`+addr+`"`))
	return atomicfile.WriteFile(file, out, 0o644)
}

// runC7 ingests one case the way README.md describes: the input is written
// as the config file in an empty folder, the lockfile (if any) beside it,
// and Ingest gets the config's path (and the lockfile's with lockfileFlag).
func runC7(t *testing.T, c *c7Case) (*Manifest, error) {
	t.Helper()
	data, err := c.input()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, c.configName())
	if err := os.WriteFile(cfg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{Path: cfg}
	if c.Lockfile != nil {
		lf := filepath.Join(dir, c.lockfileName())
		if err := os.WriteFile(lf, []byte(*c.Lockfile), 0o644); err != nil {
			t.Fatal(err)
		}
		if c.LockfileFlag {
			opts.Lockfile = lf
		}
	}
	return Ingest(data, opts)
}

// TestC7 runs every vector through Ingest and compares the outcome exactly:
// canonical bytes, address, pinned, imagePinned and excluded for accepted
// cases; the refusals (pointer and class, as a multiset, sorted by pointer)
// for refused ones; and one address per determinism group.
func TestC7(t *testing.T) {
	cases := loadC7(t)
	groupAddr := map[string]string{}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			m, err := runC7(t, c)
			if !c.accepted() {
				var re *RefusedError
				if !errors.As(err, &re) {
					t.Fatalf("%s (%s): want refusals %v, got manifest/err %v", c.file, c.Rule, c.Expect.Refusals, c7Describe(m, err))
				}
				c7CompareRefusals(t, c, re.Refusals)
				return
			}
			if err != nil {
				t.Fatalf("%s (%s): want accepted, got %v", c.file, c.Rule, err)
			}
			if got, want := string(m.Canonical), *c.Expect.Canonical; got != want {
				t.Errorf("%s (%s): canonical bytes\n got  %s\n want %s", c.file, c.Rule, got, want)
			}
			if m.Address != c.Expect.Address {
				t.Errorf("%s: address %s, want %s", c.file, m.Address, c.Expect.Address)
			}
			if m.Address != Address(m.Canonical) {
				t.Errorf("%s: Manifest.Address %s is not the address of Manifest.Canonical", c.file, m.Address)
			}
			if again, err := m.Core.Canonical(); err != nil || !bytes.Equal(again, m.Canonical) {
				t.Errorf("%s: Core.Canonical() disagrees with Manifest.Canonical (%v)", c.file, err)
			}
			if got := m.IsPinned(); got != *c.Expect.Pinned {
				t.Errorf("%s (%s): pinned %v, want %v", c.file, c.Rule, got, *c.Expect.Pinned)
			}
			if got := m.ImagePinned(); got != *c.Expect.ImagePinned {
				t.Errorf("%s (%s): imagePinned %v, want %v", c.file, c.Rule, got, *c.Expect.ImagePinned)
			}
			if got := append([]string{}, m.Excluded...); strings.Join(got, "\x00") != strings.Join(c.Expect.Excluded, "\x00") {
				t.Errorf("%s: excluded %q, want %q", c.file, got, c.Expect.Excluded)
			}
			if c.Group != "" {
				if a, ok := groupAddr[c.Group]; ok && a != m.Address {
					t.Errorf("%s: group %q: address %s differs from the group's %s", c.file, c.Group, m.Address, a)
				} else if !ok {
					groupAddr[c.Group] = m.Address
				}
			}
		})
	}
}

func c7Describe(m *Manifest, err error) string {
	if err != nil {
		return err.Error()
	}
	if m == nil {
		return "nil manifest, nil error"
	}
	return fmt.Sprintf("accepted %s %s", m.Address, m.Canonical)
}

// c7CompareRefusals asserts the refusals equal the expected ones as a
// multiset of (pointer, class), that they are sorted by pointer, and that
// each has a message.
func c7CompareRefusals(t *testing.T, c *c7Case, got []Refusal) {
	t.Helper()
	key := func(p string, cl Class) string { return fmt.Sprintf("%q %s", p, cl) }
	var g, w []string
	for i, r := range got {
		g = append(g, key(r.Pointer, r.Class))
		if i > 0 && got[i-1].Pointer > r.Pointer {
			t.Errorf("%s: refusals not sorted by pointer: %q before %q", c.file, got[i-1].Pointer, r.Pointer)
		}
		if strings.TrimSpace(r.Message) == "" {
			t.Errorf("%s: refusal %q %s has no message", c.file, r.Pointer, r.Class)
		}
	}
	for _, r := range c.Expect.Refusals {
		w = append(w, key(r.Pointer, r.Class))
	}
	sort.Strings(g)
	sort.Strings(w)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		var msgs []string
		for _, r := range got {
			msgs = append(msgs, r.String())
		}
		t.Errorf("%s (%s): refusals\n got  %s\n want %s\n messages:\n  %s", c.file, c.Rule, strings.Join(g, ", "), strings.Join(w, ", "), strings.Join(msgs, "\n  "))
	}
}
