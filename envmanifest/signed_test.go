package envmanifest

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
)

// signTestCore is a pinned-image core with every member, including a
// containerEnv value holding a control character: JCS writes it as the
// escape \u001b, so flipping the case of its hex digit is an edit that JCS
// cancels out (docs/design.md "Signed documents").
func signTestCore() Core {
	return Core{
		Schema: CoreSchema,
		Image:  "docker.io/library/debian:12@sha256:" + strings.Repeat("ab", 32),
		Features: []Feature{
			{ID: "ghcr.io/devcontainers/features/go:1", Options: json.RawMessage(`{"version":"1.26"}`)},
			{ID: "ghcr.io/devcontainers/features/node@sha256:" + strings.Repeat("cd", 32), Options: json.RawMessage(`{}`)},
		},
		ContainerEnv: map[string]string{"LANG": "C.UTF-8", "ESC": "a\x1bb"},
		Mounts: []Mount{
			{Source: "${localWorkspaceFolder}/cache", Target: "/cache", Kind: "bind"},
			{Target: "/tmp/x", Kind: "tmpfs"},
		},
		RemoteUser: "vscode",
	}
}

func signTestKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

// encodeSigned writes a signed manifest file with the given entries, as
// envelope.Sign would lay it out.
func encodeSigned(member string, canonical []byte, sigs []envelope.Signature) ([]byte, error) {
	return (&envelope.Document{Member: member, Canonical: canonical, Signatures: sigs}).Encode()
}

// signTestShared returns the shared/ folder beside the module root (or
// $SANDBOX_RESUME_SHARED); it skips when missing, and fails under CI=true.
func signTestShared(t testing.TB) string {
	t.Helper()
	return testenv.Shared(t)
}

// signTestOpenSSL returns the openssl binary; skips when missing unless CI=true.
func signTestOpenSSL(t testing.TB) string {
	t.Helper()
	return testenv.LookPath(t, "openssl", "make deps installs it")
}

func signTestRun(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func signTestPub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// signTestFile returns the canonical bytes of signTestCore and its signed
// manifest file by keys.
func signTestFile(t testing.TB, keys ...ed25519.PrivateKey) (canonical, file []byte) {
	t.Helper()
	signers := make([]crypto.Signer, len(keys))
	for i, k := range keys {
		signers[i] = k
	}
	c := signTestCore()
	canonical, err := c.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	file, err = envelope.Sign(envelope.MemberManifest, canonical, signers...)
	if err != nil {
		t.Fatal(err)
	}
	return canonical, file
}

// signTestExit maps a verification result to the CLI exit code
// docs/design.md "Exit codes and classes" gives it, failing the test for
// an error of any other kind.
func signTestExit(t testing.TB, err error) int {
	t.Helper()
	var re *RefusedError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, envelope.ErrSignature):
		return 6
	case errors.As(err, &re):
		if len(re.Refusals) == 0 {
			t.Fatalf("RefusedError without refusals: %v", err)
		}
		return 2
	}
	t.Fatalf("unexpected error kind %T: %v", err, err)
	return -1
}

func TestSignVerifyRoundTrip(t *testing.T) {
	k := signTestKey(t)
	canonical, file := signTestFile(t, k)
	if !bytes.HasSuffix(file, []byte("}\n")) || !bytes.HasPrefix(file, []byte("{\n  \"manifest\": {\n")) {
		t.Fatalf("file is not the sorted, 2-space indented wrapper:\n%s", file)
	}
	if bytes.Index(file, []byte(`"manifest"`)) > bytes.Index(file, []byte(`"signatures"`)) {
		t.Fatal("wrapper keys not sorted")
	}
	doc, err := ParseSigned(file, envelope.MemberManifest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc.Canonical, canonical) {
		t.Fatalf("parsed canonical\n%s\nwant\n%s", doc.Canonical, canonical)
	}
	if len(doc.Signatures) != 1 || doc.Signatures[0].KeyID != envelope.KeyID(signTestPub(k)) {
		t.Fatalf("signatures %+v", doc.Signatures)
	}
	if err := doc.Verify(envelope.NewKeyRing(signTestPub(k))); err != nil {
		t.Fatal(err)
	}
	again, err := doc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, file) {
		t.Fatalf("Encode is not the identity on a signed file:\n%s\nvs\n%s", again, file)
	}
	vm, err := VerifySignedManifest(file, envelope.NewKeyRing(signTestPub(k)))
	if err != nil {
		t.Fatal(err)
	}
	// The image is pinned, the go feature is by tag: unpinned (seed 002).
	if vm.Address != Address(canonical) || vm.Pinned || !vm.ImagePinned {
		t.Fatalf("verified %+v", vm)
	}
	if len(vm.KeyIDs) != 1 || vm.KeyIDs[0] != envelope.KeyID(signTestPub(k)) {
		t.Fatalf("keyids %v", vm.KeyIDs)
	}
	c := signTestCore()
	if got, _ := vm.Core.Canonical(); !bytes.Equal(got, canonical) {
		t.Fatalf("core read back differs:\n%s", got)
	}
	if vm.Core.ContainerEnv["ESC"] != c.ContainerEnv["ESC"] {
		t.Fatal("containerEnv value lost")
	}
}

// TestSignedBitFlips flips every bit of one signed manifest, one at a time:
// each result is refused (6, or 2 where it no longer parses) unless the
// verified inner object equals the original (an edit JCS cancels out).
func TestSignedBitFlips(t *testing.T) {
	k := signTestKey(t)
	canonical, file := signTestFile(t, k)
	ring := envelope.NewKeyRing(signTestPub(k))
	counts := map[int]int{}
	sigStart := bytes.Index(file, []byte(`"sig": "`)) + len(`"sig": "`)
	sigEnd := sigStart + bytes.IndexByte(file[sigStart:], '"')
	for i := range file {
		for bit := 0; bit < 8; bit++ {
			flipped := append([]byte(nil), file...)
			flipped[i] ^= 1 << bit
			vm, err := VerifySignedManifest(flipped, ring)
			code := signTestExit(t, err)
			counts[code]++
			if code == 0 && !bytes.Equal(vm.Canonical, canonical) {
				t.Errorf("byte %d bit %d: accepted a different document:\n%s", i, bit, vm.Canonical)
			}
			if code == 0 && i >= sigStart && i < sigEnd {
				t.Errorf("byte %d bit %d: a flip inside the signature's base64 was accepted", i, bit)
			}
		}
	}
	t.Logf("%d bytes, %d flips: exit 0 (same document) %d, exit 2 %d, exit 6 %d", len(file), 8*len(file), counts[0], counts[2], counts[6])
	if counts[0]+counts[2]+counts[6] != 8*len(file) {
		t.Fatalf("flips unaccounted for: %v", counts)
	}
	// The \u001b escape makes at least one flip (b → B) the same document;
	// every other kind of result must also occur.
	if counts[0] == 0 || counts[2] == 0 || counts[6] == 0 {
		t.Fatalf("expected accepted-same, refused (2) and untrusted (6) flips, got %v", counts)
	}
}

func TestVerifyTrustRules(t *testing.T) {
	a, b, c := signTestKey(t), signTestKey(t), signTestKey(t)
	canonical, _ := signTestFile(t, a)
	otherCanonical := []byte(`{"image":"docker.io/library/alpine:3","schema":"sandbox.env-manifest/1"}`)

	withSigs := func(sigs ...envelope.Signature) []byte {
		f, err := encodeSigned(envelope.MemberManifest, canonical, sigs)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	entry := func(k ed25519.PrivateKey, msg []byte) envelope.Signature {
		return envelope.Signature{KeyID: envelope.KeyID(signTestPub(k)), Sig: base64.StdEncoding.EncodeToString(ed25519.Sign(k, msg))}
	}
	good := func(k ed25519.PrivateKey) envelope.Signature { return entry(k, canonical) }
	bad := func(k ed25519.PrivateKey) envelope.Signature { return entry(k, otherCanonical) }

	cases := []struct {
		name  string
		file  []byte
		trust *envelope.KeyRing
		want  int
	}{
		{"trusted", withSigs(good(a)), envelope.NewKeyRing(signTestPub(a)), 0},
		{"untrusted key", withSigs(good(a)), envelope.NewKeyRing(signTestPub(b)), 6},
		{"empty ring", withSigs(good(a)), envelope.NewKeyRing(), 6},
		{"empty signatures", withSigs(), envelope.NewKeyRing(signTestPub(a)), 6},
		{"missing signatures", []byte(`{"manifest":` + string(canonical) + `}`), envelope.NewKeyRing(signTestPub(a)), 6},
		{"two trusted, one fails", withSigs(good(a), bad(b)), envelope.NewKeyRing(signTestPub(a), signTestPub(b)), 6},
		{"two trusted, first fails", withSigs(bad(a), good(b)), envelope.NewKeyRing(signTestPub(a), signTestPub(b)), 6},
		{"two trusted, both verify", withSigs(good(a), good(b)), envelope.NewKeyRing(signTestPub(a), signTestPub(b)), 0},
		{"unknown failing entry ignored", withSigs(bad(c), good(a)), envelope.NewKeyRing(signTestPub(a)), 0},
		{"only unknown entries", withSigs(good(c)), envelope.NewKeyRing(signTestPub(a)), 6},
		{"signature of another document", withSigs(bad(a)), envelope.NewKeyRing(signTestPub(a)), 6},
		{"keyid names a trusted key, sig by another", withSigs(envelope.Signature{KeyID: envelope.KeyID(signTestPub(a)), Sig: good(b).Sig}), envelope.NewKeyRing(signTestPub(a)), 6},
		{"short sig", withSigs(envelope.Signature{KeyID: envelope.KeyID(signTestPub(a)), Sig: base64.StdEncoding.EncodeToString(ed25519.Sign(a, canonical)[:63])}), envelope.NewKeyRing(signTestPub(a)), 6},
		{"empty sig", withSigs(envelope.Signature{KeyID: envelope.KeyID(signTestPub(a))}), envelope.NewKeyRing(signTestPub(a)), 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifySignedManifest(tc.file, tc.trust)
			if got := signTestExit(t, err); got != tc.want {
				t.Fatalf("exit %d, want %d (err %v)", got, tc.want, err)
			}
		})
	}
}

// TestStrictBase64 checks that a signature text a lenient decoder maps to
// the same 64 bytes is refused: trailing bits set, no padding, an escaped
// newline inside.
func TestStrictBase64(t *testing.T) {
	k := signTestKey(t)
	canonical, _ := signTestFile(t, k)
	sig := ed25519.Sign(k, canonical)
	enc := base64.StdEncoding.EncodeToString(sig) // 86 chars + "=="
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	last := strings.IndexByte(alphabet, enc[85])
	trailing := enc[:85] + string(alphabet[last|1]) + "=="
	if trailing == enc {
		trailing = enc[:85] + string(alphabet[last|2]) + "=="
	}
	// The lenient decoder maps it to the same signature: the test is real.
	if lenient, err := base64.StdEncoding.DecodeString(trailing); err != nil || !bytes.Equal(lenient, sig) {
		t.Fatalf("lenient decode of %q: %x, %v", trailing, lenient, err)
	}
	ring := envelope.NewKeyRing(signTestPub(k))
	for name, s := range map[string]string{
		"trailing bits": trailing,
		"no padding":    strings.TrimRight(enc, "="),
		"newline":       enc[:40] + "\n" + enc[40:],
		"CR":            enc[:40] + "\r" + enc[40:],
		"url alphabet":  base64.URLEncoding.EncodeToString(sig),
		"space":         enc[:40] + " " + enc[40:],
	} {
		if s == enc {
			continue // the URL alphabet can coincide
		}
		t.Run(name, func(t *testing.T) {
			f, err := encodeSigned(envelope.MemberManifest, canonical, []envelope.Signature{{KeyID: envelope.KeyID(signTestPub(k)), Sig: s}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = VerifySignedManifest(f, ring)
			if !errors.Is(err, envelope.ErrSignature) {
				t.Fatalf("sig %q: %v, want envelope.ErrSignature", s, err)
			}
		})
	}
}

// TestReorderedDocument: the same core with other member order, whitespace
// and escapes verifies and derives the same address.
func TestReorderedDocument(t *testing.T) {
	k := signTestKey(t)
	canonical, file := signTestFile(t, k)
	doc, err := ParseSigned(file, envelope.MemberManifest)
	if err != nil {
		t.Fatal(err)
	}
	var core map[string]any
	if err := json.Unmarshal(canonical, &core); err != nil {
		t.Fatal(err)
	}
	// Go's encoder sorts map keys too: write them in another order by
	// hand, with other whitespace and Go's escapes (\u001b, \u003c).
	names := []string{"remoteUser", "mounts", "image", "features", "containerEnv", "schema"}
	var inner bytes.Buffer
	inner.WriteString("{ ")
	for i, n := range names {
		v, _ := json.MarshalIndent(core[n], "    ", "\t")
		if i > 0 {
			inner.WriteString(" ,\n ")
		}
		key, _ := json.Marshal(n)
		inner.Write(key)
		inner.WriteString(" :")
		inner.Write(v)
	}
	inner.WriteString("\n}")
	reordered := []byte(`{"signatures": [{"sig": "` + doc.Signatures[0].Sig + `", "keyid": "` + doc.Signatures[0].KeyID + `"}],` + "\n" + `"manifest": ` + inner.String() + "}")
	if bytes.Contains(reordered, canonical) {
		t.Fatal("the re-ordered document is byte-identical to the canonical one; the test would prove nothing")
	}
	vm, err := VerifySignedManifest(reordered, envelope.NewKeyRing(signTestPub(k)))
	if err != nil {
		t.Fatalf("%v\n%s", err, reordered)
	}
	if vm.Address != Address(canonical) {
		t.Fatalf("address %s, want %s", vm.Address, Address(canonical))
	}
}

func TestParseSignedRefusals(t *testing.T) {
	k := signTestKey(t)
	canonical, _ := signTestFile(t, k)
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(k, canonical))
	kid := envelope.KeyID(signTestPub(k))
	entry := `{"keyid":"` + kid + `","sig":"` + sig + `"}`
	m := string(canonical)
	cases := []struct {
		name, file, pointer string
		class               Class
	}{
		{"not JSON", `{"manifest":`, "", ClassSyntax},
		{"top-level array", `[` + m + `]`, "", ClassSyntax},
		{"empty", ``, "", ClassSyntax},
		{"JSONC comment", `{"manifest":` + m + `,"signatures":[` + entry + `]} // c`, "", ClassSyntax},
		{"missing manifest", `{"signatures":[` + entry + `]}`, "/manifest", ClassMissing},
		{"manifest not object", `{"manifest":"x","signatures":[` + entry + `]}`, "/manifest", ClassInvalidValue},
		{"manifest null", `{"manifest":null,"signatures":[]}`, "/manifest", ClassInvalidValue},
		{"ref instead of manifest", `{"ref":` + m + `,"signatures":[` + entry + `]}`, "/manifest", ClassMissing},
		{"unknown wrapper member", `{"manifest":` + m + `,"signatures":[` + entry + `],"note":1}`, "/note", ClassUnknownProperty},
		{"duplicate wrapper member", `{"manifest":` + m + `,"manifest":` + m + `,"signatures":[` + entry + `]}`, "/manifest", ClassDuplicateKey},
		{"signatures not array", `{"manifest":` + m + `,"signatures":{}}`, "/signatures", ClassInvalidValue},
		{"signatures null", `{"manifest":` + m + `,"signatures":null}`, "/signatures", ClassInvalidValue},
		{"entry not object", `{"manifest":` + m + `,"signatures":["x"]}`, "/signatures/0", ClassInvalidValue},
		{"entry unknown member", `{"manifest":` + m + `,"signatures":[{"keyid":"` + kid + `","sig":"` + sig + `","alg":"ed25519"}]}`, "/signatures/0/alg", ClassUnknownProperty},
		{"entry missing sig", `{"manifest":` + m + `,"signatures":[{"keyid":"` + kid + `"}]}`, "/signatures/0/sig", ClassMissing},
		{"entry keyid number", `{"manifest":` + m + `,"signatures":[{"keyid":1,"sig":"` + sig + `"}]}`, "/signatures/0/keyid", ClassInvalidValue},
		{"entry duplicate sig", `{"manifest":` + m + `,"signatures":[{"keyid":"` + kid + `","sig":"` + sig + `","sig":"` + sig + `"}]}`, "/signatures/0/sig", ClassDuplicateKey},
		{"big number in inner", `{"manifest":{"n":9007199254740993},"signatures":[]}`, "/manifest/n", ClassNumber},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSigned([]byte(tc.file), envelope.MemberManifest)
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("err %v, want *RefusedError", err)
			}
			found := false
			for _, r := range re.Refusals {
				found = found || (r.Pointer == tc.pointer && r.Class == tc.class)
			}
			if !found {
				t.Fatalf("refusals %v lack %q %s", re.Refusals, tc.pointer, tc.class)
			}
		})
	}
	// The "ref" member is accepted by the same parser.
	if _, err := ParseSigned([]byte(`{"ref":{"a":1},"signatures":[`+entry+`]}`), envelope.MemberRef); err != nil {
		t.Fatal(err)
	}
}

// TestInnerUnknownMember: a correctly signed inner document with a member a
// manifest core does not have verifies (6 passes) but is refused (2) at its
// pointer.
func TestInnerUnknownMember(t *testing.T) {
	k := signTestKey(t)
	inner := []byte(`{"extra":true,"image":"docker.io/library/alpine:3","schema":"sandbox.env-manifest/1"}`)
	file, err := envelope.Sign(envelope.MemberManifest, inner, k)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ParseSigned(file, envelope.MemberManifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Verify(envelope.NewKeyRing(signTestPub(k))); err != nil {
		t.Fatalf("signature should verify: %v", err)
	}
	_, err = VerifySignedManifest(file, envelope.NewKeyRing(signTestPub(k)))
	var re *RefusedError
	if !errors.As(err, &re) || len(re.Refusals) != 1 || re.Refusals[0].Pointer != "/manifest/extra" || re.Refusals[0].Class != ClassUnknownProperty {
		t.Fatalf("err %v, want one unknown-property refusal at /manifest/extra", err)
	}
	// Untrusted beats schema: checks run in resume's order.
	_, err = VerifySignedManifest(file, envelope.NewKeyRing(signTestPub(signTestKey(t))))
	if !errors.Is(err, envelope.ErrSignature) {
		t.Fatalf("untrusted file with a bad core: %v, want envelope.ErrSignature first", err)
	}
}

func TestSignRefuses(t *testing.T) {
	k := signTestKey(t)
	for name, in := range map[string]string{
		"not canonical": `{ "image": "x" }`,
		"unsorted":      `{"schema":"s","image":"x"}`,
		"not object":    `[1]`,
		"empty":         ``,
		"invalid":       `{"a":`,
	} {
		if _, err := envelope.Sign(envelope.MemberManifest, []byte(in), k); err == nil {
			t.Errorf("%s: envelope.Sign(%q) succeeded", name, in)
		}
	}
	if _, err := envelope.Sign(envelope.MemberManifest, []byte(`{}`)); err == nil {
		t.Error("Sign without a key succeeded")
	}
	if _, err := envelope.Sign(envelope.MemberSignatures, []byte(`{}`), k); err == nil {
		t.Error("Sign under member \"signatures\" succeeded")
	}
}

// TestOpenSSLSignatureInterop: openssl accepts our signature over the
// canonical bytes, and a key made by openssl signs documents we verify (and
// openssl's own signature over the canonical bytes verifies in Verify).
func TestOpenSSLSignatureInterop(t *testing.T) {
	ossl := signTestOpenSSL(t)
	dir := t.TempDir()

	// Ours → openssl.
	pubPath, keyPath, err := envelope.WriteKeyPair(filepath.Join(dir, "ours"), false)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := envelope.LoadPrivateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	canonical, file := signTestFile(t, priv)
	doc, err := ParseSigned(file, envelope.MemberManifest)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(doc.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	canonPath, sigPath := filepath.Join(dir, "canonical.json"), filepath.Join(dir, "sig.bin")
	if err := os.WriteFile(canonPath, doc.Canonical, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sigPath, sig, 0o644); err != nil {
		t.Fatal(err)
	}
	out := signTestRun(t, ossl, "pkeyutl", "-verify", "-rawin", "-pubin", "-inkey", pubPath, "-sigfile", sigPath, "-in", canonPath)
	if !bytes.Contains(out, []byte("Signature Verified Successfully")) {
		t.Fatalf("openssl: %s", out)
	}
	// openssl must also refuse a wrong message, or the check above proves nothing.
	if err := os.WriteFile(canonPath, append(append([]byte(nil), canonical...), ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(ossl, "pkeyutl", "-verify", "-rawin", "-pubin", "-inkey", pubPath, "-sigfile", sigPath, "-in", canonPath).CombinedOutput(); err == nil {
		t.Fatalf("openssl verified a signature over other bytes: %s", out)
	}

	// openssl → ours: an openssl key signs with Sign, and openssl's own
	// signature verifies.
	oKey, oPub := filepath.Join(dir, "o.key"), filepath.Join(dir, "o.pub")
	signTestRun(t, ossl, "genpkey", "-algorithm", "ed25519", "-out", oKey)
	signTestRun(t, ossl, "pkey", "-in", oKey, "-pubout", "-out", oPub)
	opriv, err := envelope.LoadPrivateKey(oKey)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := envelope.LoadTrust(oPub)
	if err != nil {
		t.Fatal(err)
	}
	_, ofile := signTestFile(t, opriv)
	if _, err := VerifySignedManifest(ofile, ring); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(canonPath, canonical, 0o644); err != nil {
		t.Fatal(err)
	}
	osig := signTestRun(t, ossl, "pkeyutl", "-sign", "-rawin", "-inkey", oKey, "-in", canonPath)
	f, err := encodeSigned(envelope.MemberManifest, canonical, []envelope.Signature{{KeyID: envelope.KeyID(signTestPub(opriv)), Sig: base64.StdEncoding.EncodeToString(osig)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifySignedManifest(f, ring); err != nil {
		t.Fatalf("openssl's signature: %v", err)
	}
}
