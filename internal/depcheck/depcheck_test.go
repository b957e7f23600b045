package depcheck

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// moduleDir is the root of this module (two levels above this file).
func moduleDir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestLayout checks this module against the rules of docs/design.md
// "Layout".
func TestLayout(t *testing.T) {
	g, err := Load(moduleDir(t), "", "./...")
	if err != nil {
		t.Fatal(err)
	}
	if len(g) < 50 || g[Module+"/resume"] == nil {
		t.Fatalf("go list found %d packages and no resume: the check would prove nothing", len(g))
	}
	for _, v := range Check(g) {
		t.Error(v)
	}
}

// TestPlantedImportsFail plants one forbidden import at a time into a
// package of this module (a new file, through go list's -overlay: the tree
// on disk is not touched) and checks that the check fails on it, naming
// the rule — so TestLayout passing means something.
func TestPlantedImportsFail(t *testing.T) {
	dir := moduleDir(t)
	for _, tc := range []struct {
		name, pkg, imp, rule string
	}{
		{"a deciding package reaches cobra", "snapshot", "github.com/spf13/cobra", "never reaches github.com/spf13/cobra"},
		{"a deciding package reaches oras", "migrate", "oras.land/oras-go/v2", "never reaches oras.land/oras-go"},
		{"a deciding package reaches grpc", "host", "google.golang.org/grpc", "never reaches google.golang.org/grpc"},
		{"a deciding package reaches zap", "resume", "go.uber.org/zap", "never reaches go.uber.org/zap"},
		{"a fake reaches the containerd client", "host/memhost", "github.com/containerd/containerd/v2/client", "never reaches github.com/containerd/containerd/v2"},
		{"a suite reaches containerd through the adapter", "host/hosttest", Module + "/runtime/containerd", "imports only packages of earlier items"},
		{"item 1 imports one of ours", "internal/strictjson", Module + "/internal/atomicfile", "import nothing of ours"},
		{"migrate imports resume", "migrate", Module + "/resume", "never import one another"},
		{"suspend imports migrate", "suspend", Module + "/migrate", "never import one another"},
		{"an adapter imports suspend", "runtime/containerd", Module + "/suspend", "adapters import items 1–5 only"},
		{"an adapter imports resume", "runtime/containerd", Module + "/resume", "adapters import items 1–5 only"},
		{"an adapter imports migrate", "ledger/bolt", Module + "/migrate", "adapters import items 1–5 only"},
		{"a library imports test/", "schemas", Module + "/test/integration/harness", "nothing outside test/ imports test/"},
		{"a fake imports a later item", "host/memhost", Module + "/suspend", "imports only packages of earlier items"},
		{"a library imports the in-memory host", "resume", Module + "/host/memhost", "imported only by tests and examples"},
		{"a library imports a fake", "suspend", Module + "/ledger/fake", "imported only by tests and examples"},
		{"an adapter imports a suite", "runtime/containerd", Module + "/host/hosttest", "imported only by tests and examples"},
		{"a library imports the testkit", "migrate", Module + "/internal/testimage", "imported only by tests and examples"},
		{"the command imports a fake", "cmd/sandbox-resume", Module + "/host/memhost", "the binary links no test support"},
		{"the binary links testing", "cmd/sandbox-resume", "testing", "the binary links no test support and no testing"},
		{"runspec imports migrate", "runspec", Module + "/migrate", "imports only packages of earlier items"},
		{"adopt imports suspend", "envmanifest/adopt", Module + "/suspend", "imports only packages of earlier items"},
		{"runspec imports a fake", "runspec", Module + "/host/memhost", "imported only by tests and examples"},
		{"an adapter imports runspec", "runtime/containerd", Module + "/runspec", "adapters import items 1–5 only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "planted.go")
			name := filepath.Base(tc.pkg)
			if strings.HasPrefix(tc.pkg, "cmd/") {
				name = "main"
			}
			src := "package " + name + "\n\nimport _ \"" + tc.imp + "\"\n"
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			overlay := map[string]map[string]string{"Replace": {filepath.Join(dir, tc.pkg, "zz_planted.go"): file}}
			b, _ := json.Marshal(overlay)
			ov := filepath.Join(t.TempDir(), "overlay.json")
			if err := os.WriteFile(ov, b, 0o644); err != nil {
				t.Fatal(err)
			}
			g, err := Load(dir, ov, "./...")
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, v := range Check(g) {
				if v.Package == Module+"/"+tc.pkg && strings.Contains(v.Rule, tc.rule) {
					found = true
				}
			}
			if !found {
				t.Errorf("planting %s in %s: Check found %v, want a violation %q", tc.imp, tc.pkg, Check(g), tc.rule)
			}
		})
	}
}

// TestUnplacedPackage: a package the layout does not place is a violation.
func TestUnplacedPackage(t *testing.T) {
	g := Graph{Module + "/newthing": nil, Module + "/resume": {Module + "/snapshot"}, Module + "/snapshot": nil}
	vs := Check(g)
	if len(vs) != 1 || vs[0].Package != Module+"/newthing" {
		t.Fatalf("Check = %v, want one violation for newthing", vs)
	}
}

// TestTestSupport: which packages are test support.
func TestTestSupport(t *testing.T) {
	for p, want := range map[string]bool{
		"ledger/fake": true, "ledger/ledgertest": true, "host/hosttest": true, "host/memhost": true,
		"suspend/suspendtest": true, "internal/testimage": true, "internal/testenv": true, "internal/testkit": true,
		"host": false, "ledger": false, "suspend": false, "internal/depcheck": false, "cmd/sandbox-resume": false,
		"test/integration/harness": false,
	} {
		if got := TestSupport(p); got != want {
			t.Errorf("TestSupport(%q) = %t, want %t", p, got, want)
		}
	}
}

// TestExportedSignatures: no exported identifier of a non-internal
// package carries an internal/ type, beside ExportedExceptions — each of
// which must still occur, so the list only shrinks.
func TestExportedSignatures(t *testing.T) {
	srcs, err := LoadSources(moduleDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) < 15 {
		t.Fatalf("%d packages loaded: the check would prove nothing", len(srcs))
	}
	vs, err := CheckExported(srcs)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range vs {
		k := ExceptionKey(v)
		if _, ok := ExportedExceptions[k]; ok {
			seen[k] = true
			continue
		}
		t.Error(v)
	}
	for k := range ExportedExceptions {
		if !seen[k] {
			t.Errorf("exception %q no longer occurs: remove it from ExportedExceptions", k)
		}
	}
}

// TestPlantedExportedSignatures plants exported identifiers carrying an
// internal/ type into a real package's sources (envmanifest, as on disk)
// and checks that each is found, and that unexported ones are not.
func TestPlantedExportedSignatures(t *testing.T) {
	srcs, err := LoadSources(moduleDir(t))
	if err != nil {
		t.Fatal(err)
	}
	var env *Source
	for i := range srcs {
		if srcs[i].ImportPath == Module+"/envmanifest" {
			env = &srcs[i]
		}
	}
	if env == nil {
		t.Fatal("envmanifest not loaded")
	}
	const head = "package envmanifest\n\nimport sj \"" + Module + "/internal/strictjson\"\n\n"
	for _, tc := range []struct {
		name, src, ident string // ident "" wants none
	}{
		{"a function parameter", "func PlantedParse(n *sj.Node) error { return nil }\n", "PlantedParse"},
		{"a result", "func PlantedNode() []*sj.Error { return nil }\n", "PlantedNode"},
		{"a struct field", "type PlantedDoc struct {\n\tInner *sj.Node\n}\n", "PlantedDoc.Inner"},
		{"an embedded field", "type PlantedWrap struct {\n\t*sj.Node\n}\n", "PlantedWrap"},
		{"an alias", "type PlantedKind = sj.ErrorKind\n", "PlantedKind"},
		{"a method", "type PlantedT struct{}\n\nfunc (PlantedT) Node() *sj.Node { return nil }\n", "PlantedT.Node"},
		{"an interface method", "type PlantedI interface {\n\tNode() *sj.Node\n}\n", "PlantedI.Node"},
		{"a variable", "var PlantedV *sj.Node\n", "PlantedV"},
		{"unexported only", "type plantedT struct {\n\tn *sj.Node\n}\n\nfunc plantedF(n *sj.Node) {}\n\ntype PlantedOK struct {\n\tn *sj.Node\n}\n\nfunc PlantedBody() { var n *sj.Node; _ = n }\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{"zz_planted.go": []byte(head + tc.src)}
			for n, b := range env.Files {
				files[n] = b
			}
			vs, err := CheckExported([]Source{{ImportPath: env.ImportPath, Files: files}})
			if err != nil {
				t.Fatal(err)
			}
			found := 0
			for _, v := range vs {
				if strings.Contains(v.Rule, "(zz_planted.go)") {
					found++
					if tc.ident == "" || ExceptionKey(v) != "envmanifest "+tc.ident || v.Import != Module+"/internal/strictjson" {
						t.Errorf("planted %q: violation %v", tc.src, v)
					}
				}
			}
			if tc.ident != "" && found == 0 {
				t.Errorf("planting %q in envmanifest: CheckExported found %v, want %s", tc.src, vs, tc.ident)
			}
		})
	}
}
