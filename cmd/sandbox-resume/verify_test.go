package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

func TestVerifyCmd(t *testing.T) {
	dir := t.TempDir()
	key := sigKeygen(t, dir, "k")
	cfg := sigConfig(t, dir)
	code, signed, stderr := sigRun(t, "sign", "--key", key+".key", cfg)
	if code != 0 {
		t.Fatalf("sign: exit %d: %s", code, stderr)
	}
	file := filepath.Join(dir, "signed.json")
	if err := os.WriteFile(file, []byte(signed), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := envmanifest.IngestFile(cfg, envmanifest.Options{})
	if err != nil {
		t.Fatal(err)
	}

	code, out, stderr := sigRun(t, "verify", "--trust", key+".pub", file)
	if code != 0 || out != m.Address+"\n" {
		t.Fatalf("verify: exit %d, stdout %q, stderr %q; want %s", code, out, stderr, m.Address)
	}
	if !strings.Contains(stderr, "unpinned") {
		t.Fatalf("an unpinned manifest is not labelled: %q", stderr)
	}
	code, out, _ = sigRun(t, "--output", "json", "verify", "--trust", key+".pub", file)
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("verify --output json: exit %d, %q (%v)", code, out, err)
	}
	pub, _ := envelope.LoadPublicKey(key + ".pub")
	if res["address"] != m.Address || res["pinned"] != false || res["imagePinned"] != false || len(res) != 4 {
		t.Fatalf("verify json %v", res)
	}
	if ids, _ := res["keyids"].([]any); len(ids) != 1 || ids[0] != envelope.KeyID(pub) {
		t.Fatalf("keyids %v", res["keyids"])
	}

	// A trust directory holding only another key: 6, class untrusted.
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	sigKeygen(t, other, "o")
	if err := os.Remove(filepath.Join(other, "o.key")); err != nil {
		t.Fatal(err)
	}
	code, out, _ = sigRun(t, "--output", "json", "verify", "--trust", other, file)
	if code != 6 || !strings.Contains(out, `"untrusted"`) {
		t.Fatalf("untrusted: exit %d, %s", code, out)
	}
	// Both keys in the directory: accepted.
	if err := os.Rename(key+".pub", filepath.Join(other, "k.pub")); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := sigRun(t, "verify", "--trust", other, file); code != 0 || out != m.Address+"\n" {
		t.Fatalf("trust directory with the key: exit %d %q", code, out)
	}
	trustPub := filepath.Join(other, "k.pub")

	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	priv, err := envelope.LoadPrivateKey(key + ".key")
	if err != nil {
		t.Fatal(err)
	}
	extra, err := envelope.Sign(envelope.MemberManifest, []byte(`{"extra":1,"image":"docker.io/library/debian:12","schema":"sandbox.env-manifest/1"}`), priv)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"not JSON", []string{"verify", "--trust", trustPub, write("a", "not json")}, 2},
		{"manifest not an object", []string{"verify", "--trust", trustPub, write("b", `{"manifest":[],"signatures":[]}`)}, 2},
		{"missing file", []string{"verify", "--trust", trustPub, filepath.Join(dir, "nope.json")}, 2},
		{"unknown wrapper member", []string{"verify", "--trust", trustPub, write("c", strings.Replace(signed, `"signatures": [`, `"x": [], "signatures": [`, 1))}, 2},
		{"empty signatures", []string{"verify", "--trust", trustPub, write("c2", signed[:strings.Index(signed, `"signatures"`)]+`"signatures": []}`)}, 6},
		{"no signatures member", []string{"verify", "--trust", trustPub, write("d", `{"manifest":{"image":"docker.io/library/debian:12","schema":"sandbox.env-manifest/1"}}`)}, 6},
		{"signed core with an unknown member", []string{"verify", "--trust", trustPub, write("e", string(extra))}, 2},
		{"missing --trust", []string{"verify", file}, 64},
		{"trust path missing", []string{"verify", "--trust", filepath.Join(dir, "none.pub"), file}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if code, out, stderr := sigRun(t, tc.args...); code != tc.want {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.want, out, stderr)
			}
		})
	}
}

// TestVerifyCmdBitFlips runs a sample of the single-bit flips of one signed
// manifest through the CLI (the library test covers every bit): each exits
// 2 or 6, or 0 with the original address.
func TestVerifyCmdBitFlips(t *testing.T) {
	dir := t.TempDir()
	key := sigKeygen(t, dir, "k")
	cfg := sigConfig(t, dir)
	code, signed, _ := sigRun(t, "sign", "--key", key+".key", cfg)
	if code != 0 {
		t.Fatal("sign failed")
	}
	_, addr, _ := sigRun(t, "verify", "--trust", key+".pub", sigWriteTemp(t, dir, "orig.json", []byte(signed)))
	counts := map[int]int{}
	step := 7
	if testing.Short() {
		step = 31
	}
	for i := 0; i < len(signed); i += step {
		for bit := 0; bit < 8; bit++ {
			b := []byte(signed)
			b[i] ^= 1 << bit
			p := sigWriteTemp(t, dir, "flip.json", b)
			code, out, stderr := sigRun(t, "--output", "json", "verify", "--trust", key+".pub", p)
			counts[code]++
			switch code {
			case 0:
				var res struct{ Address string }
				if err := json.Unmarshal([]byte(out), &res); err != nil || res.Address+"\n" != addr {
					t.Errorf("byte %d bit %d accepted with address %q (original %q)", i, bit, res.Address, addr)
				}
			case 2, 6:
				if !bytes.Contains([]byte(out), []byte(`"error"`)) {
					t.Errorf("byte %d bit %d: exit %d without a JSON error: %q %q", i, bit, code, out, stderr)
				}
			default:
				t.Errorf("byte %d bit %d: exit %d: %s%s", i, bit, code, out, stderr)
			}
		}
	}
	t.Logf("%d flips through the CLI: %v", 8*((len(signed)+step-1)/step), counts)
	if counts[2] == 0 || counts[6] == 0 {
		t.Fatalf("the sample should reach both refusal kinds: %v", counts)
	}
}

func sigWriteTemp(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestVerifyCmdNotSigned: a file that is not a signed manifest at all (a
// devcontainer.json with comments, a plain JSON one, a signed ref) is
// refused (2) with a message that says so and where; a signed manifest
// that is merely broken is not called "not a signed manifest".
func TestVerifyCmdNotSigned(t *testing.T) {
	dir := t.TempDir()
	key := sigKeygen(t, dir, "k")
	jsonc := sigConfig(t, dir) // starts with "{\n\t// a comment"
	plain := sigWriteTemp(t, dir, "plain.json", []byte(`{"image": "debian:12"}`))
	ref := sigWriteTemp(t, dir, "ref.json", []byte(`{"ref": {}, "signatures": []}`))
	broken := sigWriteTemp(t, dir, "broken.json", []byte(`{"manifest": {}, "signatures": 1}`))
	for _, c := range []struct {
		file string
		want []string // lines of stderr, each a prefix
		not  bool
	}{
		{jsonc, []string{"sandbox-resume: " + jsonc + " is not a signed manifest: 1 refusal", `  "": syntax: 2:2: invalid character '/'`}, true},
		{plain, []string{"sandbox-resume: " + plain + " is not a signed manifest: 2 refusals", "  /image: unknown-property: ", "  /manifest: missing: "}, true},
		{ref, []string{"sandbox-resume: " + ref + " is not a signed manifest: 2 refusals", "  /manifest: missing: ", "  /ref: unknown-property: "}, true},
		{broken, []string{"sandbox-resume: " + broken + ": 1 refusal", "  /signatures: invalid-value: "}, false},
	} {
		code, out, stderr := sigRun(t, "verify", "--trust", key+".pub", c.file)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		ok := code == 2 && out == "" && len(lines) == len(c.want)
		for i := 0; ok && i < len(lines); i++ {
			ok = strings.HasPrefix(lines[i], c.want[i])
		}
		if !ok {
			t.Errorf("verify %s: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and lines starting:\n%s", filepath.Base(c.file), code, out, stderr, strings.Join(c.want, "\n"))
		}
		if strings.Contains(stderr, "not a signed") != c.not {
			t.Errorf("verify %s: stderr %q", filepath.Base(c.file), stderr)
		}
	}
}
