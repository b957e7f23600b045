package envmanifest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadPolicyDefault(t *testing.T) {
	got, err := LoadPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "NODE_OPTIONS", "PYTHONSTARTUP", "PERL5OPT", "RUBYOPT", "JAVA_TOOL_OPTIONS"} {
		if !slices.Contains(got, want) {
			t.Errorf("default policy lacks %s", want)
		}
	}
	if slices.Contains(got, "PATH") {
		t.Error("PATH must not be reserved: the address covers it")
	}
	if !slices.IsSorted(got) {
		t.Errorf("policy not sorted: %v", got)
	}
	if len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("policy has duplicates: %v", got)
	}
}

func TestLoadPolicyNone(t *testing.T) {
	got, err := LoadPolicy(PolicyNone)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("LoadPolicy(none) = %v, %v; want empty non-nil list", got, err)
	}
}

func TestLoadPolicyFileExtends(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "policy")
	if err := os.WriteFile(p, []byte("# extra names\nmy_token\n\nLD_PRELOAD\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LoadPolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := LoadPolicy("")
	if len(got) != len(def)+1 || !slices.Contains(got, "MY_TOKEN") {
		t.Fatalf("file policy = %d names (default %d), want default + MY_TOKEN", len(got), len(def))
	}
}

func TestLoadPolicyBadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "policy")
	if err := os.WriteFile(p, []byte("OK_NAME\nnot a name\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadPolicy(p)
	if err == nil || !strings.Contains(err.Error(), p+":2") {
		t.Fatalf("want an error naming %s:2, got %v", p, err)
	}
	if _, err := LoadPolicy(filepath.Join(dir, "absent")); err == nil {
		t.Fatal("missing policy file accepted")
	}
}
