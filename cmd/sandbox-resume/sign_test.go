package main

import (
	"os"
	"path/filepath"
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
	// A public key is not a signing key.
	if code, _, _ := sigRun(t, "sign", "--key", key+".pub", cfg); code == 0 {
		t.Fatal("sign with a public key succeeded")
	}
	if code, _, _ := sigRun(t, "sign", cfg); code != 64 {
		t.Fatalf("sign without --key: exit %d, want 64", code)
	}
}
