package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInspectCmd(t *testing.T) {
	td := filepath.Join("..", "..", "snapshot", "testdata")
	g2, pub := filepath.Join(td, "ref2", "g2.ref.json"), filepath.Join(td, "ref-test.pub")

	code, out, stderr := sigRun(t, "inspect", g2)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"NOT verified", "run           demo-1", "generation    2", "parent        sha256:", "layers        2: 2048 bytes", "spec          sha256:", "runtime       io.containerd.runsc.v1", "fence         17"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = sigRun(t, "--output", "json", "inspect", "--trust", pub, g2)
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("inspect --output json --trust: exit %d, %q (%v)", code, out, err)
	}
	if res["verified"] != true || res["run"] != "demo-1" || res["generation"] != 2.0 || res["layersSize"] != 2048.0 || res["spec"] == nil || res["parent"] == nil {
		t.Errorf("inspect json %v", res)
	}
	if ids, _ := res["signedBy"].([]any); len(ids) != 1 {
		t.Errorf("signedBy %v", res["signedBy"])
	}

	// A /1 ref: generation 1, no spec, no runtime.
	code, out, _ = sigRun(t, "--output", "json", "inspect", filepath.Join(td, "pinned.ref.json"))
	res = nil
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res["generation"] != 1.0 || res["spec"] != nil || res["runtime"] != nil || res["verified"] != false {
		t.Errorf("inspect of a /1 ref: exit %d %v", code, res)
	}

	// Not a ref: 2; another key: 6; a tampered ref: 6.
	if code, _, _ := sigRun(t, "inspect", filepath.Join("..", "..", "go.mod")); code != 2 {
		t.Errorf("inspect of go.mod: exit %d, want 2", code)
	}
	dir := t.TempDir()
	other := sigKeygen(t, dir, "o")
	if code, _, _ := sigRun(t, "inspect", "--trust", other+".pub", g2); code != 6 {
		t.Errorf("inspect --trust another key: exit %d, want 6", code)
	}
	b, err := os.ReadFile(g2)
	if err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(dir, "tampered.json")
	if err := os.WriteFile(tampered, []byte(strings.Replace(string(b), `"pinned": true`, `"pinned": false`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := sigRun(t, "inspect", tampered); code != 6 {
		t.Errorf("inspect of a tampered ref: exit %d, want 6 (%s)", code, stderr)
	}
	if code, _, _ := sigRun(t, "inspect"); code != 64 {
		t.Errorf("inspect without a file: exit %d, want 64", code)
	}
}
