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
		{"a fake reaches the containerd client", "resume/fake", "github.com/containerd/containerd/v2/client", "never reaches github.com/containerd/containerd/v2"},
		{"a suite reaches containerd through the adapter", "resume/materializertest", Module + "/runtime/containerd", "imports only packages of earlier items"},
		{"item 1 imports one of ours", "internal/strictjson", Module + "/internal/atomicfile", "import nothing of ours"},
		{"migrate imports resume", "migrate", Module + "/resume", "never import one another"},
		{"an adapter imports suspend", "runtime/containerd", Module + "/snapshot/suspend", "adapters never import snapshot/suspend"},
		{"a library imports test/", "schemas", Module + "/test/integration/harness", "nothing outside test/ imports test/"},
		{"a fake imports a later item", "snapshot/fake", Module + "/snapshot/suspend", "imports only packages of earlier items"},
		{"runspec imports migrate", "runspec", Module + "/migrate", "never import one another"},
		{"adopt imports suspend", "envmanifest/adopt", Module + "/snapshot/suspend", "never import one another"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "planted.go")
			name := filepath.Base(tc.pkg)
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
