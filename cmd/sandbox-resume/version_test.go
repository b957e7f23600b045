package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: --version prints the version, the Go version and the
// containerd client module's version (go.mod's requirement), in text and
// as {"version", "go", "containerd"} under --output json; -ldflags
// "-X main.version=…" sets the first.
func TestVersion(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == containerdModule {
			want = f[1]
		}
	}
	if want == "" {
		t.Fatalf("go.mod requires no %s", containerdModule)
	}

	w := newWorld(t)
	code, stdout, stderr := w.run("--version")
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || stderr != "" || len(lines) != 3 || !strings.HasPrefix(lines[0], "sandbox-resume ") ||
		!strings.Contains(lines[1], runtime.Version()) || !strings.Contains(lines[2], want) {
		t.Errorf("--version: exit %d\n%s%s", code, stdout, stderr)
	}

	defer func(v string) { version = v }(version)
	version = "v9.8.7"
	code, stdout, _ = w.run("--output", "json", "--version")
	var v versionInfo
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil || v != (versionInfo{Version: "v9.8.7", Go: runtime.Version(), Containerd: want}) {
		t.Errorf("--output json --version: exit %d, %+v (%v)\n%s", code, v, err, stdout)
	}
}
