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
