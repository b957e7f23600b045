package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// sigKeygen makes a key pair under dir and returns PREFIX.
func sigKeygen(t *testing.T, dir, name string) string {
	t.Helper()
	prefix := filepath.Join(dir, name)
	if _, _, err := envelope.WriteKeyPair(prefix, false); err != nil {
		t.Fatal(err)
	}
	return prefix
}

// sigConfig writes a devcontainer.json that ingests.
func sigConfig(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "devcontainer.json")
	const cfg = `{
	// a comment: JSONC is fine for the source
	"name": "demo",
	"image": "debian:12",
	"containerEnv": {"LANG": "C.UTF-8", "ESC": "a\u001bb"},
	"remoteUser": "vscode",
}`
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSignCmd(t *testing.T) {
	dir := t.TempDir()
	key := sigKeygen(t, dir, "k")
	cfg := sigConfig(t, dir)
	code, out, stderr := sigRun(t, "sign", "--key", key+".key", cfg)
	if code != 0 {
		t.Fatalf("sign: exit %d: %s", code, stderr)
	}
	m, err := envmanifest.IngestFile(cfg, envmanifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	trust, err := envelope.LoadTrust(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	vm, err := envmanifest.VerifySignedManifest([]byte(out), trust)
	if err != nil {
		t.Fatalf("signed output does not verify: %v\n%s", err, out)
	}
	if vm.Address != m.Address {
		t.Fatalf("signed address %s, ingestion gives %s", vm.Address, m.Address)
	}
	// The printed file is exactly Sign's serialization (sorted, indented).
	doc, err := envmanifest.ParseSigned([]byte(out), envelope.MemberManifest)
	if err != nil {
		t.Fatal(err)
	}
	again, err := doc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != out {
		t.Fatalf("sign output is not in the file form:\n%s", out)
	}

	// A refused config: exit 2, nothing on stdout.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"image":"debian:12","runArgs":["--privileged"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := sigRun(t, "sign", "--key", key+".key", bad); code != 2 || out != "" {
		t.Fatalf("sign of a refused config: exit %d, stdout %q", code, out)
	}
	// A key file of the wrong kind is bad input (2), and the message says
	// what the file holds.
	if code, out, stderr := sigRun(t, "sign", "--key", key+".pub", cfg); code != 2 || out != "" ||
		!strings.Contains(stderr, key+".pub") || !strings.Contains(stderr, `holds a public key (PEM "PUBLIC KEY"`) {
		t.Fatalf("sign with a public key: exit %d, stdout %q, stderr %q; want 2 naming the file and its kind", code, out, stderr)
	}
	code, out, _ = sigRun(t, "--output", "json", "sign", "--key", key+".pub", cfg)
	if je := decodeJSONError(t, out); code != 2 || je.Class != "bad-input" {
		t.Fatalf("sign --output json with a public key: exit %d, %q", code, out)
	}
	if code, _, _ := sigRun(t, "sign", cfg); code != 64 {
		t.Fatalf("sign without --key: exit %d, want 64", code)
	}
}

// cliJSONError is the {"error": …} object of a failed command under
// --output json.
type cliJSONError struct {
	Class    string `json:"class"`
	Message  string `json:"message"`
	Refusals []struct {
		Pointer, Class, Message string
	} `json:"refusals"`
}

// decodeJSONError decodes stdout as exactly one {"error": …} object.
func decodeJSONError(t *testing.T, out string) cliJSONError {
	t.Helper()
	var v struct {
		Error *cliJSONError `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil || v.Error == nil || dec.More() {
		t.Fatalf("stdout is not one {\"error\"} object (%v):\n%s", err, out)
	}
	return *v.Error
}
