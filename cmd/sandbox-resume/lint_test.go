package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfig writes a devcontainer.json (and a lockfile when lock is not
// "") into a new directory and returns its path.
func writeConfig(t *testing.T, doc, lock string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if lock != "" {
		if err := os.WriteFile(filepath.Join(dir, "devcontainer-lock.json"), []byte(lock), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestLintCmd(t *testing.T) {
	t.Setenv("CONTAINERD_ADDRESS", "") // no daemon: the image is not checked
	doc := "{\n  // base\n  \"image\": \"debian:12\",\n  \"postCreateCommand\": \"make\",\n  \"mounts\": [\"type=bind,source=/a,target=/a,readonly\"],\n  \"name\": \"x\"\n}\n"
	path := writeConfig(t, doc, "")

	code, out, stderr := manifestRun(t, "", "--output", "json", "lint", path)
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s %s", code, out, stderr)
	}
	var got lintOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	if got.OK || got.Error == nil || got.Error.Class != "refused" || len(got.Refusals) != 2 || got.Fix != nil {
		t.Errorf("report %+v", got)
	}
	for _, r := range got.Refusals {
		if r.Advice == "" || r.Property == "" {
			t.Errorf("refusal without advice: %+v", r)
		}
	}
	if got.Refusals[0].Pointer != "/mounts/0" || got.Refusals[0].Fix != "remove-mount" {
		t.Errorf("mount refusal %+v", got.Refusals[0])
	}
	if data, _ := os.ReadFile(path); string(data) != doc {
		t.Error("lint without --fix wrote the file")
	}

	code, out, _ = manifestRun(t, "", "lint", "--fix", path)
	if code != 0 {
		t.Fatalf("--fix: exit %d, want 0\n%s", code, out)
	}
	want := "{\n  // base\n  \"image\": \"debian:12\",\n  \"mounts\": [],\n  \"name\": \"x\"\n}\n"
	if data, _ := os.ReadFile(path); string(data) != want {
		t.Errorf("--fix wrote %q, want %q", data, want)
	}
	for _, s := range []string{"--fix removed 2 members and wrote", "/mounts/0  changes-what-runs", "/postCreateCommand  executes-or-widens", "unpinned: /image docker.io/library/debian:12", "address: blake3:"} {
		if !strings.Contains(out, s) {
			t.Errorf("--fix text lacks %q:\n%s", s, out)
		}
	}

	code, out, _ = manifestRun(t, "", "--output", "json", "lint", "--fix", path)
	got = lintOutput{}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || !got.OK || got.Fix == nil || got.Fix.Written || got.Error != nil || got.Pinned == nil || *got.Pinned {
		t.Errorf("clean --fix: exit %d %+v (%v)", code, got, err)
	}

	// stdin, missing file, usage.
	if code, out, _ := manifestRun(t, `{"image": "debian:12", "Image": "x"}`, "lint", "-"); code != 2 || !strings.Contains(out, `did you mean "image"`) {
		t.Errorf("stdin: exit %d\n%s", code, out)
	}
	if code, _, _ := manifestRun(t, "", "lint", "--fix", "-"); code != 64 {
		t.Errorf("--fix -: exit %d, want 64", code)
	}
	if code, _, _ := manifestRun(t, "", "lint"); code != 64 {
		t.Errorf("no PATH: exit %d, want 64", code)
	}
	if code, out, _ := manifestRun(t, "", "--output", "json", "lint", filepath.Join(t.TempDir(), "none.json")); code != 2 || !strings.Contains(out, `"bad-input"`) {
		t.Errorf("missing file: exit %d %s", code, out)
	}
	// --address names a daemon: it is consulted, and an absent one is 1.
	if code, _, stderr := manifestRun(t, "", "--address", filepath.Join(t.TempDir(), "no.sock"), "lint", path); code != 1 || !strings.Contains(stderr, "no.sock") {
		t.Errorf("absent daemon: exit %d %s", code, stderr)
	}
}
