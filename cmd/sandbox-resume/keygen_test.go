package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
)

// sigRun runs the CLI in process and returns its exit code, stdout and stderr.
func sigRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestKeygenCmd(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "signer")
	code, out, stderr := sigRun(t, "keygen", "--out", prefix)
	if code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, stderr)
	}
	priv, err := envelope.LoadPrivateKey(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := envelope.LoadPublicKey(prefix + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(priv.Public()) {
		t.Fatal("pub is not the key's public half")
	}
	if !strings.Contains(out, envelope.KeyID(pub)) {
		t.Fatalf("keygen output lacks the keyid:\n%s", out)
	}
	if fi, _ := os.Stat(prefix + ".key"); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", fi.Mode().Perm())
	}
	before, _ := os.ReadFile(prefix + ".key")

	// Refuses to overwrite: exit 2, class "refused", key unchanged.
	code, out, _ = sigRun(t, "--output", "json", "keygen", "--out", prefix)
	if code != 2 {
		t.Fatalf("keygen over existing files: exit %d, want 2", code)
	}
	var je struct {
		Error struct{ Class, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &je); err != nil || je.Error.Class != "refused" || !strings.Contains(je.Error.Message, prefix+".key") || !strings.Contains(je.Error.Message, "--force") {
		t.Fatalf("error output %q (%v)", out, err)
	}
	if after, _ := os.ReadFile(prefix + ".key"); !bytes.Equal(before, after) {
		t.Fatal("refused keygen changed the key")
	}

	// --force overwrites; --output json gives the paths and keyid.
	code, out, stderr = sigRun(t, "--output", "json", "keygen", "--out", prefix, "--force")
	if code != 0 {
		t.Fatalf("keygen --force: exit %d: %s", code, stderr)
	}
	var res struct{ Key, Pub, KeyID string }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	pub2, err := envelope.LoadPublicKey(res.Pub)
	if err != nil {
		t.Fatal(err)
	}
	if res.KeyID != envelope.KeyID(pub2) || res.Key != prefix+".key" || pub2.Equal(pub) {
		t.Fatalf("keygen --force result %+v", res)
	}

	// Text output: one plain "already exists" sentence naming the file.
	code, _, stderr = sigRun(t, "keygen", "--out", prefix)
	if want := "sandbox-resume: keygen: " + prefix + ".key already exists (use --force to overwrite)\n"; code != 2 || stderr != want {
		t.Fatalf("keygen over existing files: exit %d, stderr %q, want %q", code, stderr, want)
	}

	// Usage errors: 64.
	if code, _, _ := sigRun(t, "keygen"); code != 64 {
		t.Fatalf("keygen without --out: exit %d, want 64", code)
	}
	if code, _, _ := sigRun(t, "keygen", "--out", prefix, "extra"); code != 64 {
		t.Fatalf("keygen with an argument: exit %d, want 64", code)
	}
}

// TestKeygenCmdMissingDir: --out into a directory that does not exist (or
// is a file) is bad input (2) naming that directory, not a temporary
// file, and writes nothing.
func TestKeygenCmdMissingDir(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	code, out, stderr := sigRun(t, "keygen", "--out", filepath.Join(missing, "k"))
	if want := "sandbox-resume: keygen: directory " + missing + " does not exist\n"; code != 2 || out != "" || stderr != want {
		t.Fatalf("keygen into a missing directory: exit %d, stdout %q, stderr %q; want 2, %q", code, out, stderr, want)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = sigRun(t, "--output", "json", "keygen", "--out", filepath.Join(file, "k"))
	if je := decodeJSONError(t, out); code != 2 || je.Class != "bad-input" || je.Message != "keygen: "+file+" is not a directory" {
		t.Fatalf("keygen under a file: exit %d, %+v", code, je)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("keygen left files behind: %v", entries)
	}
}
