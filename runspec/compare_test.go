package runspec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/runspec"
)

var updateSpecRules = flag.Bool("update", false, "rewrite runspec/testdata/speccheck/rules.json from runspec.Rules")

const specCheckDir = "testdata/speccheck"

// specCases is the shape of testdata/speccheck/cases.json (its
// "description" member says what each field means).
type specCases struct {
	Description    string              `json:"description"`
	Base           string              `json:"base"`
	ContainerEnv   map[string]string   `json:"containerEnv"`
	HostNamespaces map[string][]string `json:"hostNamespaces"`
	Reserved       []string            `json:"reserved"`
	Cases          []specCase          `json:"cases"`
}

type specCase struct {
	Name         string      `json:"name"`
	Recorded     []patchOp   `json:"recorded"`
	Offered      []patchOp   `json:"offered"`
	RecordedText *string     `json:"recordedText"`
	OfferedText  *string     `json:"offeredText"`
	Expect       specOutcome `json:"expect"`
}

type specOutcome struct {
	Accepted  bool              `json:"accepted"`
	SpecDrift []json.RawMessage `json:"specDrift"`
	Error     *struct {
		Side    string `json:"side"`
		Pointer string `json:"pointer"`
		Kind    string `json:"kind"`
	} `json:"error"`
}

// patchOp is one RFC 6902 operation (add, remove, replace, move).
type patchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from"`
	Value json.RawMessage `json:"value"`
}

func decodeNumbers(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode test data: %v", err)
	}
}

func loadSpecCases(t *testing.T) (specCases, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(specCheckDir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sc specCases
	decodeNumbers(t, data, &sc)
	base, err := os.ReadFile(filepath.Join(specCheckDir, sc.Base))
	if err != nil {
		t.Fatal(err)
	}
	return sc, base
}

// TestCompareSpecCases runs every case of testdata/speccheck/cases.json.
func TestCompareSpecCases(t *testing.T) {
	sc, base := loadSpecCases(t)
	if len(sc.Cases) == 0 {
		t.Fatal("no cases")
	}
	opts := runspec.Options{
		ContainerEnv: sc.ContainerEnv,
		Reserved:     sc.Reserved,
		HostNamespace: func(nsType, path string) bool {
			return slices.Contains(sc.HostNamespaces[nsType], path)
		},
	}
	names := map[string]bool{}
	for _, c := range sc.Cases {
		if names[c.Name] {
			t.Errorf("case name %q repeated", c.Name)
		}
		names[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			recorded := specSide(t, base, c.Recorded, c.RecordedText)
			offered := specSide(t, base, c.Offered, c.OfferedText)
			got, err := runspec.Compare(recorded, offered, opts)
			if c.Expect.Error != nil {
				var se *runspec.Error
				if !errors.As(err, &se) || !errors.Is(err, runspec.ErrInvalid) {
					t.Fatalf("err = %v, want a *Error wrapping ErrInvalid", err)
				}
				want := *c.Expect.Error
				if se.Side != want.Side || se.Pointer != want.Pointer || se.Kind != want.Kind {
					t.Fatalf("error = {side %q, pointer %q, kind %q} (%v), want {%q, %q, %q}",
						se.Side, se.Pointer, se.Kind, se, want.Side, want.Pointer, want.Kind)
				}
				if got != nil {
					t.Errorf("drift = %v beside an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Compare: %v", err)
			}
			if got == nil {
				t.Error("drift is nil, want a non-nil slice")
			}
			if refused := runspec.Refused(got); refused == c.Expect.Accepted {
				t.Errorf("Refused = %v, want accepted = %v", refused, c.Expect.Accepted)
			}
			want := make([]runspec.SpecDrift, len(c.Expect.SpecDrift))
			for i, raw := range c.Expect.SpecDrift {
				decodeNumbers(t, raw, &want[i])
			}
			if !sameSpecDrift(t, got, want) {
				t.Errorf("specDrift\n got %s\nwant %s", driftJSON(got), driftJSON(want))
			}
		})
	}
}

// specSide builds one side of a case: text as given, or base patched.
func specSide(t *testing.T, base []byte, ops []patchOp, text *string) []byte {
	t.Helper()
	if text != nil {
		return []byte(*text)
	}
	if len(ops) == 0 {
		return base
	}
	var doc any
	decodeNumbers(t, base, &doc)
	for _, op := range ops {
		var err error
		if doc, err = applyPatchOp(t, doc, op); err != nil {
			t.Fatalf("patch %s %s: %v", op.Op, op.Path, err)
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// applyPatchOp applies one RFC 6902 operation to doc (decoded with
// UseNumber, so numbers keep their text).
func applyPatchOp(t *testing.T, doc any, op patchOp) (any, error) {
	var value any
	if op.Value != nil {
		decodeNumbers(t, op.Value, &value)
	}
	switch op.Op {
	case "add", "replace":
		return editAt(doc, splitPointer(op.Path), func(parent any, tok string) (any, error) {
			return setMember(parent, tok, value, op.Op == "add")
		})
	case "remove":
		return editAt(doc, splitPointer(op.Path), removeMember(nil))
	case "move":
		var moved any
		doc, err := editAt(doc, splitPointer(op.From), removeMember(&moved))
		if err != nil {
			return nil, err
		}
		return editAt(doc, splitPointer(op.Path), func(parent any, tok string) (any, error) {
			return setMember(parent, tok, moved, true)
		})
	}
	return nil, fmt.Errorf("unsupported op %q", op.Op)
}

func splitPointer(p string) []string {
	toks := strings.Split(p, "/")[1:]
	for i, tok := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
	}
	return toks
}

// editAt walks to the parent of the last token and lets leaf change it,
// storing the (possibly new) containers back on the way up.
func editAt(node any, toks []string, leaf func(parent any, tok string) (any, error)) (any, error) {
	if len(toks) == 0 {
		return nil, errors.New("the root cannot be patched")
	}
	if len(toks) == 1 {
		return leaf(node, toks[0])
	}
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[toks[0]]
		if !ok {
			return nil, fmt.Errorf("no member %q", toks[0])
		}
		c, err := editAt(child, toks[1:], leaf)
		if err != nil {
			return nil, err
		}
		n[toks[0]] = c
		return n, nil
	case []any:
		i, err := strconv.Atoi(toks[0])
		if err != nil || i < 0 || i >= len(n) {
			return nil, fmt.Errorf("no element %q", toks[0])
		}
		c, err := editAt(n[i], toks[1:], leaf)
		if err != nil {
			return nil, err
		}
		n[i] = c
		return n, nil
	}
	return nil, fmt.Errorf("%q is inside a scalar", toks[0])
}

func setMember(parent any, tok string, value any, add bool) (any, error) {
	switch p := parent.(type) {
	case map[string]any:
		if _, ok := p[tok]; !ok && !add {
			return nil, fmt.Errorf("replace: no member %q", tok)
		}
		p[tok] = value
		return p, nil
	case []any:
		if add && tok == "-" {
			return append(p, value), nil
		}
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i > len(p) || (!add && i == len(p)) {
			return nil, fmt.Errorf("no index %q", tok)
		}
		if !add {
			p[i] = value
			return p, nil
		}
		return slices.Insert(p, i, value), nil
	}
	return nil, fmt.Errorf("cannot set %q in a scalar", tok)
}

func removeMember(removed *any) func(parent any, tok string) (any, error) {
	return func(parent any, tok string) (any, error) {
		switch p := parent.(type) {
		case map[string]any:
			v, ok := p[tok]
			if !ok {
				return nil, fmt.Errorf("remove: no member %q", tok)
			}
			if removed != nil {
				*removed = v
			}
			delete(p, tok)
			return p, nil
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(p) {
				return nil, fmt.Errorf("remove: no index %q", tok)
			}
			if removed != nil {
				*removed = p[i]
			}
			return slices.Delete(p, i, i+1), nil
		}
		return nil, fmt.Errorf("cannot remove %q from a scalar", tok)
	}
}

// sameSpecDrift compares entries in order: pointers and allowed exactly,
// values as parsed JSON with numbers as their exact text, an absent value
// only equal to an absent one.
func sameSpecDrift(t *testing.T, got, want []runspec.SpecDrift) bool {
	t.Helper()
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Pointer != w.Pointer || g.OfferedPointer != w.OfferedPointer || g.Allowed != w.Allowed {
			return false
		}
		if !sameJSON(t, g.Recorded, w.Recorded) || !sameJSON(t, g.Offered, w.Offered) {
			return false
		}
	}
	return true
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if (a == nil) != (b == nil) {
		return false
	}
	if a == nil {
		return true
	}
	var va, vb any
	decodeNumbers(t, a, &va)
	decodeNumbers(t, b, &vb)
	return reflect.DeepEqual(va, vb)
}

func driftJSON(d []runspec.SpecDrift) string {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestCompareSpecExactNumbersNotRounded pins the two number facts of
// docs/design.md "Spec validation" outside the data file too:
// values that one float64 cannot tell apart differ, and the largest uint64
// equals itself and is reported as written.
func TestCompareSpecExactNumbersNotRounded(t *testing.T) {
	spec := func(v string) []byte {
		return []byte(`{"ociVersion":"1.3.0","process":{"rlimits":[{"type":"RLIMIT_NOFILE","hard":` + v + `,"soft":1024}]}}`)
	}
	d, err := runspec.Compare(spec("9007199254740993"), spec("9007199254740992"), runspec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 1 || d[0].Pointer != "/process/rlimits/0/hard" || string(d[0].Recorded) != "9007199254740993" || string(d[0].Offered) != "9007199254740992" {
		t.Fatalf("drift = %s", driftJSON(d))
	}
	d, err = runspec.Compare(spec("18446744073709551615"), spec("18446744073709551615"), runspec.Options{})
	if err != nil || len(d) != 0 {
		t.Fatalf("drift = %s, err = %v; want none", driftJSON(d), err)
	}
}

// TestCompareSpecNilHostNamespaceFailsClosed: without a host check every
// offered namespace path is drift, even one equal to the recorded path.
func TestCompareSpecNilHostNamespaceFailsClosed(t *testing.T) {
	spec := []byte(`{"ociVersion":"1.3.0","linux":{"namespaces":[{"type":"network","path":"/var/run/netns/a"}]}}`)
	d, err := runspec.Compare(spec, spec, runspec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 1 || d[0].Pointer != "/linux/namespaces/0/path" || !runspec.Refused(d) {
		t.Fatalf("drift = %s", driftJSON(d))
	}
}

// TestCompareSpecErrorText names the side, the pointer and the kind.
func TestCompareSpecErrorText(t *testing.T) {
	_, err := runspec.Compare([]byte(`{"ociVersion":"1.3.0"}`), []byte(`{"ociVersion":"1.3.0","process":{"user":{"uid":"0"}}}`), runspec.Options{})
	if err == nil || err.Error() != "offered spec: /process/user/uid: type: must be an integer (uint32), not string" {
		t.Fatalf("err = %v", err)
	}
}

// TestSpecRulesPublished: testdata/speccheck/rules.json is Rules as
// JSON (rewrite it with -update).
func TestSpecRulesPublished(t *testing.T) {
	got, err := json.MarshalIndent(runspec.Rules(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join(specCheckDir, "rules.json")
	if *updateSpecRules {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./runspec -run TestSpecRulesPublished -update", path)
	}
}

// TestSpecRulesTable checks the table's own consistency: known rules and
// types, a key on every keyed set, one row per pattern, and rows below an
// "equal" or "may-differ" row repeating its rule.
func TestSpecRulesTable(t *testing.T) {
	rules := map[string]bool{
		runspec.RuleEqual: true, runspec.RuleMayDiffer: true, runspec.RuleMembers: true,
		runspec.RuleSet: true, runspec.RuleKeyedSet: true, runspec.RuleOrdered: true,
		runspec.RuleBindSource: true, runspec.RuleNamespacePath: true, runspec.RuleEnv: true,
		runspec.RuleListed: true,
	}
	types := map[string]bool{"object": true, "array": true, "string": true, "boolean": true,
		"int32": true, "int64": true, "uint16": true, "uint32": true, "uint64": true}
	byPtr := map[string]runspec.Rule{}
	for _, r := range runspec.Rules() {
		if _, dup := byPtr[r.Pointer]; dup {
			t.Errorf("%q: repeated", r.Pointer)
		}
		byPtr[r.Pointer] = r
		if !rules[r.Rule] || !types[r.Type] {
			t.Errorf("%q: rule %q, type %q", r.Pointer, r.Rule, r.Type)
		}
		if (r.Rule == runspec.RuleKeyedSet) != (r.Key != "") {
			t.Errorf("%q: key %q with rule %q", r.Pointer, r.Key, r.Rule)
		}
		if r.Pointer == "" {
			continue
		}
		parent, ok := byPtr[r.Pointer[:strings.LastIndexByte(r.Pointer, '/')]]
		if !ok {
			t.Errorf("%q: no parent row before it", r.Pointer)
			continue
		}
		if (parent.Rule == runspec.RuleEqual || parent.Rule == runspec.RuleMayDiffer) && r.Rule != parent.Rule {
			t.Errorf("%q: rule %q below a %q row", r.Pointer, r.Rule, parent.Rule)
		}
	}
}

// TestSpecRulesFollowDesign pins the lists of docs/design.md "Spec
// validation", check 10 against the table, so a table edit that drops a
// guarded member fails here as well as in the cases.
func TestSpecRulesFollowDesign(t *testing.T) {
	want := map[string]string{
		"/process/user/uid": "equal", "/process/user/gid": "equal", "/process/user/umask": "equal",
		"/process/user/additionalGids":            "set",
		"/process/capabilities/bounding":          "set",
		"/process/capabilities/effective":         "set",
		"/process/capabilities/inheritable":       "set",
		"/process/capabilities/permitted":         "set",
		"/process/capabilities/ambient":           "set",
		"/process/noNewPrivileges":                "equal",
		"/process/apparmorProfile":                "equal",
		"/process/selinuxLabel":                   "equal",
		"/process/rlimits":                        "keyed-set",
		"/process/oomScoreAdj":                    "equal",
		"/root/readonly":                          "equal",
		"/hooks":                                  "equal",
		"/linux/namespaces":                       "keyed-set",
		"/linux/namespaces/*/path":                "namespace-path",
		"/linux/uidMappings":                      "set",
		"/linux/gidMappings":                      "set",
		"/linux/seccomp":                          "equal",
		"/linux/devices":                          "keyed-set",
		"/linux/resources/devices":                "equal",
		"/linux/maskedPaths":                      "set",
		"/linux/readonlyPaths":                    "set",
		"/linux/sysctl":                           "equal",
		"/linux/mountLabel":                       "equal",
		"/linux/intelRdt":                         "equal",
		"/linux/personality":                      "equal",
		"/annotations/org.systemd.*":              "equal",
		"/annotations/run.oci.*":                  "equal",
		"/annotations/io.containerd.*":            "equal",
		"/annotations/io.kubernetes.*":            "equal",
		"/annotations/io.sandbox-resume.*":        "equal",
		"/mounts":                                 "ordered",
		"/mounts/*/destination":                   "equal",
		"/mounts/*/type":                          "equal",
		"/mounts/*/options":                       "equal",
		"/mounts/*/source":                        "bind-source",
		"/ociVersion":                             "may-differ",
		"/process/args":                           "may-differ",
		"/process/cwd":                            "may-differ",
		"/process/terminal":                       "may-differ",
		"/process/consoleSize":                    "may-differ",
		"/process/env":                            "env",
		"/hostname":                               "may-differ",
		"/domainname":                             "may-differ",
		"/annotations/*":                          "equal",
		"/annotations/org.opencontainers.image.*": "listed",
		"/annotations/io.sandbox-resume.note.*":   "listed",
		"/linux/resources/memory":                 "may-differ",
		"/linux/resources/cpu":                    "may-differ",
		"/linux/resources/pids":                   "may-differ",
		"/linux/resources/blockIO":                "may-differ",
		"/linux/resources/hugepageLimits":         "may-differ",
		"/linux/resources/network":                "may-differ",
		"/linux/resources/rdma":                   "may-differ",
		"/linux/resources/unified":                "may-differ",
		"/root/path":                              "may-differ",
		"/linux/cgroupsPath":                      "may-differ",
		"":                                        "members",
		"/process":                                "members",
		"/linux":                                  "members",
		"/linux/resources":                        "members",
		"/process/capabilities":                   "members",
		"/process/user":                           "members",
		"/root":                                   "members",
		"/annotations":                            "members",
		"/mounts/*":                               "members",
		"/linux/namespaces/*":                     "members",
		"/process/rlimits/*":                      "equal",
		"/linux/devices/*":                        "equal",
		"/linux/uidMappings/*":                    "equal",
		"/linux/resources/devices/*":              "equal",
		"/process/capabilities/bounding/*":        "equal",
		"/linux/seccomp/syscalls/*/args/*":        "equal",
		"/linux/seccomp/syscalls/*/args/*/value":  "equal",
	}
	have := map[string]runspec.Rule{}
	for _, r := range runspec.Rules() {
		have[r.Pointer] = r
	}
	for ptr, rule := range want {
		if have[ptr].Rule != rule {
			t.Errorf("%q: rule %q, want %q", ptr, have[ptr].Rule, rule)
		}
	}
	if have["/process/rlimits"].Key != "type" || have["/linux/devices"].Key != "path" || have["/linux/namespaces"].Key != "type" {
		t.Error("keyed sets: rlimits by type, devices by path, namespaces by type")
	}
}

// TestHostPID1Namespace checks the real host check where it can: pid 1's
// own namespace file is the host's, and anything it cannot stat fails
// closed.
func TestHostPID1Namespace(t *testing.T) {
	if !runspec.HostPID1Namespace("pid", filepath.Join(t.TempDir(), "missing")) {
		t.Error("a path that cannot be stat'ed must count as the host's")
	}
	if !runspec.HostPID1Namespace("no-such-type", "/proc/1/ns/pid") {
		t.Error("an unknown type must count as the host's")
	}
	if _, err := os.Stat("/proc/1/ns/net"); err != nil {
		// Where pid 1's namespace cannot be read (a sandbox whose pid 1
		// belongs to another user namespace: permission denied even as
		// root), nothing can be compared with it, so every path counts
		// as the host's (fail closed), this process's own too.
		if !runspec.HostPID1Namespace("network", "/proc/self/ns/net") {
			t.Errorf("pid 1's namespace unreadable (%v), yet /proc/self/ns/net was judged not the host's", err)
		}
		return
	}
	if !runspec.HostPID1Namespace("network", "/proc/1/ns/net") {
		t.Error("/proc/1/ns/net is pid 1's network namespace")
	}
	f := filepath.Join(t.TempDir(), "not-a-namespace")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if runspec.HostPID1Namespace("network", f) {
		t.Error("a regular file is not pid 1's namespace")
	}
}

// FuzzCompareSpec: no panic on any input; a failure is a *Error; and
// any spec that decodes, compared with itself, has no drift.
func FuzzCompareSpec(f *testing.F) {
	base, err := os.ReadFile(filepath.Join(specCheckDir, "base.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(base)
	for _, s := range []string{`{"ociVersion":"1"}`, `{"ociVersion":"1","mounts":[{"type":"bind","source":"/a","destination":"/b"}]}`,
		`{"ociVersion":"1","x":[{},null,[]]}`, `{"ociVersion":"1","process":{"user":{"uid":1.5}}}`, `[]`} {
		f.Add([]byte(s))
	}
	opts := runspec.Options{HostNamespace: func(string, string) bool { return false }}
	f.Fuzz(func(t *testing.T, spec []byte) {
		d, err := runspec.Compare(spec, spec, opts)
		if err != nil {
			var se *runspec.Error
			if !errors.As(err, &se) || se.Side != runspec.SideRecorded {
				t.Fatalf("err = %v", err)
			}
			return
		}
		if len(d) != 0 {
			t.Fatalf("a spec differs from itself: %s", driftJSON(d))
		}
	})
}
