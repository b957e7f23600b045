package envelope

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
)

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

func TestRFC8032Vectors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(signTestShared(t), "vectors", "ed25519", "rfc8032_7.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Name       string `json:"name"`
			SecretKey  string `json:"secret_key"`
			PublicKey  string `json:"public_key"`
			Message    string `json:"message"`
			MessageLen int    `json:"message_len"`
			Signature  string `json:"signature"`
		}
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 5 {
		t.Fatalf("want the 5 RFC 8032 §7.1 vectors, got %d", len(file.Vectors))
	}
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			priv := ed25519.NewKeyFromSeed(unhex(v.SecretKey))
			pub := priv.Public().(ed25519.PublicKey)
			if !bytes.Equal(pub, unhex(v.PublicKey)) {
				t.Fatalf("public key %x, want %s", pub, v.PublicKey)
			}
			msg := unhex(v.Message)
			if len(msg) != v.MessageLen {
				t.Fatalf("message is %d bytes, want %d", len(msg), v.MessageLen)
			}
			want := unhex(v.Signature)
			if got := ed25519.Sign(priv, msg); !bytes.Equal(got, want) {
				t.Fatalf("signature %x, want %x", got, want)
			}
			if !ed25519.Verify(pub, msg, want) {
				t.Fatal("vector signature does not verify")
			}
			bad := append([]byte(nil), want...)
			bad[0] ^= 1
			if ed25519.Verify(pub, msg, bad) {
				t.Fatal("tampered signature verifies")
			}
			// The KeyID of the vector key is the SHA-256 of its PKIX DER.
			der, err := x509.MarshalPKIXPublicKey(pub)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(der)
			if got, want := KeyID(pub), "ed25519:"+hex.EncodeToString(sum[:]); got != want {
				t.Fatalf("KeyID %s, want %s", got, want)
			}
		})
	}
}

// TestKeyIDOpenSSL checks KeyID against the SHA-256 of the PKIX DER that
// openssl writes (`openssl pkey -pubout -outform DER`).
func TestKeyIDOpenSSL(t *testing.T) {
	ossl := signTestOpenSSL(t)
	dir := t.TempDir()
	_, keyPath, err := WriteKeyPair(filepath.Join(dir, "k"), false)
	if err != nil {
		t.Fatal(err)
	}
	der := signTestRun(t, ossl, "pkey", "-in", keyPath, "-pubout", "-outform", "DER")
	sum := sha256.Sum256(der)
	priv, err := LoadPrivateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := KeyID(priv.Public().(ed25519.PublicKey)), "ed25519:"+hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("KeyID %s, openssl DER gives %s", got, want)
	}
	if len(KeyID(priv.Public().(ed25519.PublicKey))) != len("ed25519:")+64 {
		t.Fatal("KeyID length")
	}
}

func TestWriteKeyPair(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "signer")
	pubPath, keyPath, err := WriteKeyPair(prefix, false)
	if err != nil {
		t.Fatal(err)
	}
	if pubPath != prefix+".pub" || keyPath != prefix+".key" {
		t.Fatalf("paths %s %s", pubPath, keyPath)
	}
	fi, err := os.Stat(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v, want 0600", fi.Mode().Perm())
	}
	priv, err := LoadPrivateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(priv.Public()) {
		t.Fatal("PREFIX.pub is not the public half of PREFIX.key")
	}
	keyBefore, _ := os.ReadFile(keyPath)

	// No overwrite without force; nothing changes.
	_, _, err = WriteKeyPair(prefix, false)
	if !errors.Is(err, ErrKeyExists) || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second keygen: %v, want ErrKeyExists", err)
	}
	if !strings.Contains(err.Error(), keyPath) {
		t.Fatalf("error does not name the file: %v", err)
	}
	if after, _ := os.ReadFile(keyPath); !bytes.Equal(after, keyBefore) {
		t.Fatal("refused keygen changed the key")
	}
	// Only the .pub existing also refuses, and creates no .key.
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other+".pub", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteKeyPair(other, false); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("keygen over an existing .pub: %v", err)
	}
	if _, err := os.Stat(other + ".key"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("refused keygen left %s.key: %v", other, err)
	}

	// With force: a new key, still 0600.
	if _, _, err := WriteKeyPair(prefix, true); err != nil {
		t.Fatal(err)
	}
	priv2, err := LoadPrivateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if priv2.Equal(priv) {
		t.Fatal("--force did not write a new key")
	}
	if fi, _ := os.Stat(keyPath); fi.Mode().Perm() != 0o600 {
		t.Fatalf("forced private key mode %v", fi.Mode().Perm())
	}
	// No temporary files remain.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}

// TestOpenSSLKeyInterop: a key made by `openssl genpkey -algorithm ed25519`
// loads, its `openssl pkey -pubout` half loads and matches, and a key we
// wrote is read by openssl.
func TestOpenSSLKeyInterop(t *testing.T) {
	ossl := signTestOpenSSL(t)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "o.key")
	pubPath := filepath.Join(dir, "o.pub")
	signTestRun(t, ossl, "genpkey", "-algorithm", "ed25519", "-out", keyPath)
	signTestRun(t, ossl, "pkey", "-in", keyPath, "-pubout", "-out", pubPath)
	// openssl writes the key as the umask allows (0644 here); a key group
	// or other may read is refused until `chmod 600` (README).
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPrivateKeyFile(keyPath); !errors.Is(err, ErrKeyMode) || !strings.Contains(err.Error(), "chmod 600") || !strings.Contains(err.Error(), "0644") {
		t.Fatalf("a 0644 openssl key: %v, want ErrKeyMode naming the mode and chmod 600", err)
	}
	if err := os.Chmod(keyPath, 0o600); err != nil { // chmod 600
		t.Fatal(err)
	}
	priv, err := LoadPrivateKeyFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(priv.Public()) {
		t.Fatal("openssl public key differs from the private key's public half")
	}
	// Ours → openssl: openssl derives the same public key PEM.
	ourPub, ourKey, err := WriteKeyPair(filepath.Join(dir, "ours"), false)
	if err != nil {
		t.Fatal(err)
	}
	got := signTestRun(t, ossl, "pkey", "-in", ourKey, "-pubout")
	want, _ := os.ReadFile(ourPub)
	if !bytes.Equal(got, want) {
		t.Fatalf("openssl derives\n%s\nwe wrote\n%s", got, want)
	}
}

func TestParseKeyPEMErrors(t *testing.T) {
	dir := t.TempDir()
	pubPath, keyPath, err := WriteKeyPair(filepath.Join(dir, "k"), false)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, _ := os.ReadFile(pubPath)
	keyPEM, _ := os.ReadFile(keyPath)
	cases := []struct {
		name string
		data []byte
		priv bool
		want string
	}{
		{"empty", nil, true, "no PEM block"},
		{"public as private", pubPEM, true, `holds a public key (PEM "PUBLIC KEY", PKIX), not a private key`},
		{"private as public", keyPEM, false, `holds a private key (PEM "PRIVATE KEY", PKCS#8), not a public key`},
		{"RSA private key", rsaPKCS8PEM(t), true, "holds an RSA private key, not an Ed25519 private key"},
		{"PKCS#1 block", []byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"), true, `holds an RSA private key (PEM "RSA PRIVATE KEY", PKCS#1)`},
		{"certificate", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), false, `holds a certificate (PEM "CERTIFICATE")`},
		{"OpenSSH public key", []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE user@host\n"), false, "holds an OpenSSH public key"},
		{"trailing garbage", append(append([]byte(nil), pubPEM...), "junk"...), false, "after the PEM block"},
		{"two blocks", append(append([]byte(nil), pubPEM...), pubPEM...), false, "after the PEM block"},
		{"bad DER", []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), false, "PKIX"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.priv {
				_, err = ParsePrivateKeyPEM(c.data)
			} else {
				_, err = ParsePublicKeyPEM(c.data)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	// Whitespace after the block is fine.
	if _, err := ParsePublicKeyPEM(append(append([]byte(nil), pubPEM...), "\n\n"...)); err != nil {
		t.Fatal(err)
	}
	// An error from a file names the file.
	if _, err := LoadPublicKey(keyPath); err == nil || !strings.Contains(err.Error(), keyPath) {
		t.Fatalf("LoadPublicKey(private key) = %v", err)
	}
}

// rsaPKCS8PEM returns a PKCS#8 PEM RSA private key: the right block type
// holding another algorithm.
func rsaPKCS8PEM(t *testing.T) []byte {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PEMTypePrivateKey, Bytes: der})
}

func TestLoadTrust(t *testing.T) {
	dir := t.TempDir()
	pubA, keyA, err := WriteKeyPair(filepath.Join(dir, "a"), false)
	if err != nil {
		t.Fatal(err)
	}
	trustDir := filepath.Join(dir, "trust")
	if err := os.Mkdir(trustDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Empty directory: error.
	if _, err := LoadTrust(trustDir); err == nil {
		t.Fatal("empty trust directory accepted")
	}
	// Single file.
	ring, err := LoadTrust(pubA)
	if err != nil {
		t.Fatal(err)
	}
	privA, _ := LoadPrivateKey(keyA)
	idA := KeyID(privA.Public().(ed25519.PublicKey))
	if _, ok := ring.Lookup(idA); !ok || ring.Len() != 1 {
		t.Fatalf("ring %v lacks %s", ring.KeyIDs(), idA)
	}
	// Directory of *.pub and *.pem; other files ignored.
	for _, n := range []string{"x", "y"} {
		p, _, err := WriteKeyPair(filepath.Join(trustDir, n), false)
		if err != nil {
			t.Fatal(err)
		}
		if n == "y" {
			if err := os.Rename(p, filepath.Join(trustDir, "y.pem")); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Remove(filepath.Join(trustDir, n+".key")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(trustDir, "README"), []byte("not a key"), 0o644); err != nil {
		t.Fatal(err)
	}
	ring, err = LoadTrust(trustDir)
	if err != nil {
		t.Fatal(err)
	}
	if ring.Len() != 2 {
		t.Fatalf("ring has %d keys, want 2: %v", ring.Len(), ring.KeyIDs())
	}
	if _, ok := ring.Lookup(idA); ok {
		t.Fatal("key outside the trust directory is trusted")
	}
	// A private key named *.pem in the trust directory is an error naming it.
	bad := filepath.Join(trustDir, "z.pem")
	if data, err := os.ReadFile(keyA); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTrust(trustDir); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("LoadTrust with a private key: %v", err)
	}
	// Missing path.
	if _, err := LoadTrust(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing trust path: %v", err)
	}
}
