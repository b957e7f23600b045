package envelope

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
)

// KeyIDPrefix starts every key identifier: "ed25519:" + 64 lowercase hex
// (docs/design.md "Signed documents").
const KeyIDPrefix = "ed25519:"

// PEM block types of the key files (RFC 7468 §10 and §13): a PKCS#8
// private key (RFC 5208, RFC 8410 §7) and a PKIX SubjectPublicKeyInfo
// (RFC 5280 §4.1.2.7, RFC 8410 §4). They are the files that
// `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout` write.
const (
	PEMTypePrivateKey = "PRIVATE KEY"
	PEMTypePublicKey  = "PUBLIC KEY"
)

// ErrKeyExists is returned (wrapped, with the file name) by WriteKeyPair
// when PREFIX.key or PREFIX.pub already exists and force is false. Its
// class is "refused" (internal/exitcode).
var ErrKeyExists = errdef.New(errdef.ErrRefused, "key file already exists")

// keygenError is an error of WriteKeyPair whose message says it all in
// one sentence ("keygen: k.key already exists") while it still wraps the
// sentinels callers test with errors.Is (ErrKeyExists, fs.ErrExist,
// fs.ErrNotExist, syscall.ENOTDIR).
type keygenError struct {
	msg  string
	errs []error
}

func (e *keygenError) Error() string   { return e.msg }
func (e *keygenError) Unwrap() []error { return e.errs }

// keyExists is the error for an existing key file at path.
func keyExists(path string) error {
	return &keygenError{msg: "keygen: " + path + " already exists", errs: []error{ErrKeyExists, fs.ErrExist}}
}

// checkKeyDir reports, in plain words, a directory for the key files that
// does not exist or is not a directory (rather than the error of a
// temporary file that could not be created in it).
func checkKeyDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &keygenError{msg: "keygen: directory " + dir + " does not exist", errs: []error{fs.ErrNotExist}}
	case errors.Is(err, syscall.ENOTDIR) || (err == nil && !fi.IsDir()):
		return &keygenError{msg: "keygen: " + dir + " is not a directory", errs: []error{syscall.ENOTDIR}}
	case err != nil:
		return fmt.Errorf("keygen: %w", err)
	}
	return nil
}

// KeyID returns the identifier of an Ed25519 public key: "ed25519:" + the
// lowercase hex SHA-256 of the key's PKIX (SubjectPublicKeyInfo) DER
// encoding (docs/design.md "Signed documents"). pub must be 32 bytes; a key of
// another length yields "" (it cannot be marshalled).
func KeyID(pub ed25519.PublicKey) string {
	if len(pub) != ed25519.PublicKeySize {
		return ""
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	return KeyIDPrefix + hex.EncodeToString(sum[:])
}

// ParsePrivateKeyPEM parses one PEM block of type "PRIVATE KEY" holding a
// PKCS#8 Ed25519 private key (RFC 8410 §7), as written by WriteKeyPair and by
// `openssl genpkey -algorithm ed25519`. Text before the block and whitespace
// after it are allowed; anything else after it, another block type,
// encrypted PEM or another key algorithm is an error.
func ParsePrivateKeyPEM(data []byte) (ed25519.PrivateKey, error) {
	block, err := singlePEM(data, PEMTypePrivateKey)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("PKCS#8 private key: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("holds %s, not an Ed25519 private key", keyKind(k))
	}
	return priv, nil
}

// ParsePublicKeyPEM parses one PEM block of type "PUBLIC KEY" holding a PKIX
// SubjectPublicKeyInfo Ed25519 public key (RFC 8410 §4), as written by
// WriteKeyPair and by `openssl pkey -pubout`. The same rules as
// ParsePrivateKeyPEM apply to the text around the block.
func ParsePublicKeyPEM(data []byte) (ed25519.PublicKey, error) {
	block, err := singlePEM(data, PEMTypePublicKey)
	if err != nil {
		return nil, err
	}
	return parsePKIX(block.Bytes)
}

func parsePKIX(der []byte) (ed25519.PublicKey, error) {
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("PKIX public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("holds %s, not an Ed25519 public key", keyKind(k))
	}
	return pub, nil
}

// singlePEM decodes exactly one PEM block of type want from data.
func singlePEM(data []byte, want string) (*pem.Block, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("ssh-")) {
			return nil, fmt.Errorf("holds an OpenSSH public key, not %s (no PEM block)", pemKinds[want])
		}
		return nil, fmt.Errorf("no PEM block (want %s)", pemKinds[want])
	}
	if block.Type != want {
		return nil, fmt.Errorf("holds %s, not %s", pemKind(block.Type), pemKinds[want])
	}
	if len(block.Headers) != 0 {
		return nil, fmt.Errorf("PEM block %q has headers (encrypted keys are not supported)", want)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("data after the PEM block %q", want)
	}
	return block, nil
}

// pemKinds names, for people, what the PEM block types found in key files
// hold.
var pemKinds = map[string]string{
	PEMTypePrivateKey:       `a private key (PEM "PRIVATE KEY", PKCS#8)`,
	PEMTypePublicKey:        `a public key (PEM "PUBLIC KEY", PKIX)`,
	"ENCRYPTED PRIVATE KEY": `an encrypted private key (PEM "ENCRYPTED PRIVATE KEY")`,
	"RSA PRIVATE KEY":       `an RSA private key (PEM "RSA PRIVATE KEY", PKCS#1)`,
	"RSA PUBLIC KEY":        `an RSA public key (PEM "RSA PUBLIC KEY", PKCS#1)`,
	"EC PRIVATE KEY":        `an EC private key (PEM "EC PRIVATE KEY", SEC 1)`,
	"OPENSSH PRIVATE KEY":   `an OpenSSH private key (PEM "OPENSSH PRIVATE KEY")`,
	"CERTIFICATE":           `a certificate (PEM "CERTIFICATE")`,
}

// pemKind names what a PEM block of type typ holds.
func pemKind(typ string) string {
	if k, ok := pemKinds[typ]; ok {
		return k
	}
	return fmt.Sprintf("a PEM %q block", typ)
}

// keyKind names the algorithm of a key parsed from PKCS#8 or PKIX.
func keyKind(k any) string {
	switch k.(type) {
	case *rsa.PrivateKey:
		return "an RSA private key"
	case *rsa.PublicKey:
		return "an RSA public key"
	case *ecdsa.PrivateKey:
		return "an ECDSA private key"
	case *ecdsa.PublicKey:
		return "an ECDSA public key"
	case *ecdh.PrivateKey:
		return "an X25519 (ECDH) private key"
	case *ecdh.PublicKey:
		return "an X25519 (ECDH) public key"
	}
	return fmt.Sprintf("a %T", k)
}

// LoadPrivateKeyFile is LoadPrivateKey of a key file a user names to sign
// with, under the key-file rule of docs/design.md "Hardening", "Key files":
// a private key in a file group or other may read or write (mode & 0o077,
// as ssh refuses it) fails wrapping ErrKeyMode, naming the mode and the
// `chmod 600` fix. A file that holds no private key fails as in
// LoadPrivateKey, whatever its mode.
// `openssl genpkey` writes 0644 under the usual umask; keygen writes 0600.
func LoadPrivateKeyFile(path string) (ed25519.PrivateKey, error) {
	data, perm, err := inputfile.ReadMode(path, inputfile.MaxKey)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	priv, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	if perm&0o077 != 0 {
		return nil, fmt.Errorf("private key %s: %w: mode %04o lets group or other read or write it (run chmod 600 %s)", path, ErrKeyMode, perm, path)
	}
	return priv, nil
}

// ErrKeyMode is wrapped by LoadPrivateKeyFile's error for a private key
// file readable or writable by group or other.
var ErrKeyMode = errors.New("private key file not private")

// LoadPrivateKey reads a PKCS#8 PEM Ed25519 private key from path (see
// ParsePrivateKeyPEM), at most 64 KiB, without judging the file's mode
// (tests read committed keys with it; commands use LoadPrivateKeyFile).
// Errors name the file.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := inputfile.Read(path, inputfile.MaxKey)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	priv, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	return priv, nil
}

// LoadPublicKey reads a PKIX PEM Ed25519 public key from path (see
// ParsePublicKeyPEM). Errors name the file.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := inputfile.Read(path, inputfile.MaxKey)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	pub, err := ParsePublicKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	return pub, nil
}

// KeyRing is a set of trusted Ed25519 public keys indexed by KeyID. The zero
// value is an empty ring; it is safe for concurrent reads once filled.
type KeyRing struct {
	keys map[string]ed25519.PublicKey
}

// NewKeyRing returns a ring holding pubs. Keys of the wrong length are
// skipped (they have no KeyID).
func NewKeyRing(pubs ...ed25519.PublicKey) *KeyRing {
	r := &KeyRing{}
	for _, p := range pubs {
		r.Add(p)
	}
	return r
}

// Add trusts pub and returns its KeyID ("" and no change when pub is not 32
// bytes). Adding a key twice is harmless.
func (r *KeyRing) Add(pub ed25519.PublicKey) string {
	id := KeyID(pub)
	if id == "" {
		return ""
	}
	if r.keys == nil {
		r.keys = make(map[string]ed25519.PublicKey)
	}
	r.keys[id] = append(ed25519.PublicKey(nil), pub...)
	return id
}

// Lookup returns the trusted key named by keyid ("ed25519:<64 hex>").
func (r *KeyRing) Lookup(keyid string) (ed25519.PublicKey, bool) {
	if r == nil {
		return nil, false
	}
	pub, ok := r.keys[keyid]
	return pub, ok
}

// Len returns the number of trusted keys.
func (r *KeyRing) Len() int {
	if r == nil {
		return 0
	}
	return len(r.keys)
}

// KeyIDs returns the KeyID of every trusted key in byte order.
func (r *KeyRing) KeyIDs() []string {
	if r == nil {
		return nil
	}
	ids := make([]string, 0, len(r.keys))
	for id := range r.keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// LoadTrust builds the trusted key ring of `--trust PUB|DIR`: path is either
// one PKIX PEM public key file (see ParsePublicKeyPEM) or a directory whose
// regular files named *.pub or *.pem (not recursive) are each one PKIX PEM
// public key. A file that does not parse is an error naming it (a private
// key in the trust directory is an error, not a silent skip); a directory
// with no such file is an error.
func LoadTrust(path string) (*KeyRing, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	ring := &KeyRing{}
	if !fi.IsDir() {
		pub, err := LoadPublicKey(path)
		if err != nil {
			return nil, fmt.Errorf("trust: %w", err)
		}
		ring.Add(pub)
		return ring, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".pub") && !strings.HasSuffix(name, ".pem") {
			continue
		}
		full := filepath.Join(path, name)
		st, err := os.Stat(full) // follows symlinks
		if err != nil {
			return nil, fmt.Errorf("trust: %w", err)
		}
		if !st.Mode().IsRegular() {
			continue
		}
		pub, err := LoadPublicKey(full)
		if err != nil {
			return nil, fmt.Errorf("trust: %w", err)
		}
		ring.Add(pub)
	}
	if ring.Len() == 0 {
		return nil, fmt.Errorf("trust: no public key (*.pub, *.pem) in directory %s", path)
	}
	return ring, nil
}

// WriteKeyPair generates an Ed25519 key pair from crypto/rand and writes
// PREFIX.key (PKCS#8 PEM, mode 0600) and PREFIX.pub (PKIX PEM, mode 0644),
// each temp → fsync → rename in the target directory. Without force it
// refuses, before writing anything, when either file exists: the error wraps
// ErrKeyExists and fs.ErrExist and names the file. A directory of prefix
// that does not exist is an error naming it (wrapping fs.ErrNotExist; one
// that is not a directory wraps syscall.ENOTDIR). It returns the two paths.
func WriteKeyPair(prefix string, force bool) (pubPath, keyPath string, err error) {
	if prefix == "" {
		return "", "", errors.New("keygen: empty output prefix")
	}
	pubPath, keyPath = prefix+".pub", prefix+".key"
	if err := checkKeyDir(filepath.Dir(prefix)); err != nil {
		return "", "", err
	}
	if !force {
		for _, p := range []string{keyPath, pubPath} {
			if _, err := os.Lstat(p); err == nil {
				return "", "", keyExists(p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return "", "", fmt.Errorf("keygen: %w", err)
			}
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("keygen: generate: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", fmt.Errorf("keygen: marshal PKCS#8: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", "", fmt.Errorf("keygen: marshal PKIX: %w", err)
	}
	privPEM := pem.EncodeToMemory(&pem.Block{Type: PEMTypePrivateKey, Bytes: privDER})
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: PEMTypePublicKey, Bytes: pubDER})
	if err := writeKeyFile(keyPath, privPEM, 0o600, force); err != nil {
		return "", "", err
	}
	if err := writeKeyFile(pubPath, pubPEM, 0o644, force); err != nil {
		if !force {
			_ = os.Remove(keyPath) // we created it just now; do not leave half a pair
		}
		return "", "", err
	}
	return pubPath, keyPath, nil
}

// writeKeyFile writes a key file atomically (internal/atomicfile); without
// force it links rather than renames, so a file that appeared meanwhile is
// never replaced (ErrKeyExists).
func writeKeyFile(path string, data []byte, mode os.FileMode, force bool) error {
	err := atomicfile.Create(path, mode, atomicfile.Options{NoReplace: !force}, func(w io.Writer) error {
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("keygen: %s: %w", path, err)
		}
		return nil
	})
	if errors.Is(err, fs.ErrExist) && !force {
		return keyExists(path)
	}
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	return nil
}
