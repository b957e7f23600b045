package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPinCmd(t *testing.T) {
	t.Setenv("CONTAINERD_ADDRESS", "")
	noDaemon := filepath.Join(t.TempDir(), "no.sock")
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	lock := `{"features": {"ghcr.io/devcontainers/features/node:1": {"version": "1.6.1", "resolved": "ghcr.io/devcontainers/features/node@sha256:` + b + `", "integrity": "sha256:` + b + `"}}}`
	doc := "{\n  \"image\": \"debian:12@sha256:" + a + "\", // by digest already\n  \"features\": {\n    \"ghcr.io/devcontainers/features/node:1\": {\"version\": \"20\"}\n  }\n}\n"
	path := writeConfig(t, doc, lock)
	pinned := strings.Replace(doc, "ghcr.io/devcontainers/features/node:1", "ghcr.io/devcontainers/features/node@sha256:"+b, 1)

	// Without --write: the document on stdout, the summary on stderr; the
	// image carries a digest, so no daemon is asked.
	code, out, stderr := manifestRun(t, "", "--address", noDaemon, "pin", path)
	if code != 0 || out != pinned || !strings.Contains(stderr, "pinned:  true") || !strings.Contains(stderr, "(key)") {
		t.Fatalf("pin: exit %d\n%s\n%s", code, out, stderr)
	}
	if data, _ := os.ReadFile(path); string(data) != doc {
		t.Error("pin without --write wrote the file")
	}
	code, out, _ = manifestRun(t, "", "--address", noDaemon, "--output", "json", "pin", "--write", path)
	var got pinOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || !got.Pinned || !got.Changed || got.Written != path || got.Document != nil || len(got.Edits) != 1 {
		t.Fatalf("pin --write: exit %d %+v (%v)\n%s", code, got, err, out)
	}
	if data, _ := os.ReadFile(path); string(data) != pinned {
		t.Errorf("pin --write wrote %q", data)
	}
	mcode, mout, _ := manifestRun(t, "", "--output", "json", "manifest", path)
	if mcode != 0 || !strings.Contains(mout, `"pinned": true`) || !strings.Contains(mout, got.Address) {
		t.Errorf("manifest of the pinned file: exit %d\n%s", mcode, mout)
	}
	if code, out, _ := manifestRun(t, "", "--address", noDaemon, "pin", "--write", path); code != 0 || !strings.Contains(out, "already pinned") {
		t.Errorf("second pin: exit %d %s", code, out)
	}

	// A feature without a lockfile entry is refused, naming it.
	nolock := writeConfig(t, strings.Replace(doc, "node:1", "go:1", 1), lock)
	code, out, _ = manifestRun(t, "", "--address", noDaemon, "--output", "json", "pin", nolock)
	if code != 2 || !strings.Contains(out, `"lockfile"`) || !strings.Contains(out, "go:1") {
		t.Errorf("no lockfile entry: exit %d\n%s", code, out)
	}
	// An image by tag needs the daemon: absent, exit 1.
	bytag := writeConfig(t, `{"image": "debian:12"}`, "")
	if code, _, stderr := manifestRun(t, "", "--address", noDaemon, "pin", bytag); code != 1 || !strings.Contains(stderr, "no.sock") {
		t.Errorf("absent daemon: exit %d %s", code, stderr)
	}
	if code, _, _ := manifestRun(t, "", "pin", "a", "b"); code != 64 {
		t.Errorf("two paths: exit %d, want 64", code)
	}
}
