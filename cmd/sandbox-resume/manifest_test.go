package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// manifestRun runs the CLI in process with stdin and returns its exit
// code, stdout and stderr.
func manifestRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func exampleConfig(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "devcontainer.json")
}

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func TestManifestCmdJSON(t *testing.T) {
	// A digest image beside features by tag: imagePinned true, pinned false
	// (issue 2 "Done when"; seed 002).
	in := `{"image":"debian@` + digestA + `","features":{"rust":{},"node":"20"},"name":"x","forwardPorts":[1]}`
	code, out, stderr := manifestRun(t, in, "--output", "json", "manifest", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, stderr)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	if len(got) != 6 {
		t.Errorf("members %v, want address pinned imagePinned manifest excluded policy", keys)
	}
	var policy []string
	if err := json.Unmarshal(got["policy"], &policy); err != nil || !slices.Contains(policy, "LD_PRELOAD") || slices.Contains(policy, "PATH") {
		t.Errorf("policy = %s, want the default reserved list (with LD_PRELOAD, without PATH)", got["policy"])
	}
	wantCore := `{"features":[{"id":"ghcr.io/devcontainers/features/node:1","options":{"version":"20"}},{"id":"ghcr.io/devcontainers/features/rust:1","options":{}}],"image":"docker.io/library/debian@` + digestA + `","schema":"sandbox.env-manifest/1"}`
	var core bytes.Buffer
	if err := json.Compact(&core, got["manifest"]); err != nil || core.String() != wantCore {
		t.Errorf("manifest = %s, want %s", core.String(), wantCore)
	}
	checks := map[string]string{"pinned": "false", "imagePinned": "true", "excluded": `["/forwardPorts","/name"]`}
	for k, want := range checks {
		var c bytes.Buffer
		_ = json.Compact(&c, got[k])
		if c.String() != want {
			t.Errorf("%s = %s, want %s", k, c.String(), want)
		}
	}
	var addr string
	_ = json.Unmarshal(got["address"], &addr)
	if len(addr) != len("blake3:")+64 || !strings.HasPrefix(addr, "blake3:") {
		t.Errorf("address = %q", addr)
	}
	// rust: true means {"version": true}: another core, another address.
	_, out2, _ := manifestRun(t, "// c\n{\"forwardPorts\":[1],\"features\":{\"ghcr.io/devcontainers/features/node:1\":{\"version\":\"20\"},\"rust\":true,},\"image\":\"docker.io/library/debian@"+digestA+"\"}", "--output", "json", "manifest", "-")
	if !strings.Contains(out2, `"address": "blake3:`) || strings.Contains(out2, addr) {
		t.Errorf("rust: true gave the same address as rust: {}")
	}
}

func TestManifestCmdExampleText(t *testing.T) {
	code, out, stderr := manifestRun(t, "", "manifest", exampleConfig(t))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"address:     blake3:", "pinned:      unpinned", "imagePinned: false (image by tag)", "excluded:    /customizations /forwardPorts /name", `"schema": "sandbox.env-manifest/1"`} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	// JSON and text name the same address.
	_, jout, _ := manifestRun(t, "", "--output", "json", "manifest", exampleConfig(t))
	var j struct{ Address string }
	if err := json.Unmarshal([]byte(jout), &j); err != nil || !strings.Contains(out, j.Address) {
		t.Errorf("json address %q not in text output (%v)", j.Address, err)
	}
}

func TestManifestCmdRefused(t *testing.T) {
	code, out, _ := manifestRun(t, `{"image":"ubuntu","runArgs":["--privileged"],"Name":1}`, "--output", "json", "manifest", "-")
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	var got struct {
		Error struct {
			Class    string
			Refusals []struct{ Pointer, Class, Message string }
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Error.Class != "refused" || len(got.Error.Refusals) != 2 ||
		got.Error.Refusals[0].Pointer != "/Name" || got.Error.Refusals[0].Class != "unknown-property" ||
		got.Error.Refusals[1].Pointer != "/runArgs" || got.Error.Refusals[1].Class != "executes-or-widens" {
		t.Errorf("error = %+v", got.Error)
	}
	// Root-pointer refusals are printed with "pointer": "".
	code, out, _ = manifestRun(t, `[]`, "--output", "json", "manifest", "-")
	if code != 2 || !strings.Contains(out, `"pointer": ""`) || !strings.Contains(out, `"class": "syntax"`) {
		t.Errorf("exit %d: %s", code, out)
	}
}

func TestManifestCmdInputAndUsage(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := manifestRun(t, "", "manifest", filepath.Join(dir, "missing.json")); code != 2 || !strings.Contains(stderr, "missing.json") {
		t.Errorf("missing file: exit %d %s, want 2 naming the file", code, stderr)
	}
	for _, args := range [][]string{{"manifest"}, {"manifest", "a", "b"}, {"manifest", "--nope", "x"}} {
		if code, _, _ := manifestRun(t, "", args...); code != 64 {
			t.Errorf("%v: exit %d, want 64", args, code)
		}
	}
	// --lockfile pins a feature by digest.
	cfg := filepath.Join(dir, "c.json")
	lock := filepath.Join(dir, "lock.json")
	_ = os.WriteFile(cfg, []byte(`{"image":"debian@`+digestA+`","features":{"ghcr.io/devcontainers/features/node:1":{}}}`), 0o644)
	_ = os.WriteFile(lock, []byte(`{"features":{"ghcr.io/devcontainers/features/node:1":{"resolved":"ghcr.io/devcontainers/features/node@`+digestA+`","integrity":"`+digestA+`"}}}`), 0o644)
	code, out, stderr := manifestRun(t, "", "--output", "json", "manifest", "--lockfile", lock, cfg)
	if code != 0 || !strings.Contains(out, `"pinned": true`) || !strings.Contains(out, "features/node@"+digestA) {
		t.Errorf("exit %d: %s %s", code, out, stderr)
	}
}

func TestManifestCmdPolicy(t *testing.T) {
	in := `{"image":"debian:12","containerEnv":{"Ld_Preload":"/x.so","PATH":"/bin"}}`
	code, out, _ := manifestRun(t, in, "--output", "json", "manifest", "-")
	if code != 2 || !strings.Contains(out, `"reserved-env"`) || !strings.Contains(out, `/containerEnv/Ld_Preload`) {
		t.Fatalf("reserved name in another case: exit %d, want 2 with a reserved-env refusal at /containerEnv/Ld_Preload:\n%s", code, out)
	}
	code, out, _ = manifestRun(t, in, "--output", "json", "--policy", "none", "manifest", "-")
	if code != 0 || !strings.Contains(out, `"policy": []`) {
		t.Fatalf("--policy none: exit %d, want 0 with an empty policy:\n%s", code, out)
	}
}
