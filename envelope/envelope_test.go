package envelope

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// inner is a JCS object with an escape JCS must keep (\u001b).
const inner = `{"a":"x\u001by","b":[1,2],"c":{"d":true}}`

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pubOf(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// remoteSigner stands for a KMS or HSM: a crypto.Signer that is not an
// ed25519.PrivateKey, and records what it was asked to sign.
type remoteSigner struct {
	key   ed25519.PrivateKey
	asked []byte
	opts  crypto.SignerOpts
}

func (s *remoteSigner) Public() crypto.PublicKey { return s.key.Public() }
func (s *remoteSigner) Sign(_ io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	s.asked, s.opts = append([]byte(nil), msg...), opts
	return ed25519.Sign(s.key, msg), nil
}

// TestSignWithSigner: a crypto.Signer that is not a private key in memory
// signs; it is asked for pure Ed25519 over the canonical bytes themselves,
// and the file verifies against its public key.
func TestSignWithSigner(t *testing.T) {
	rs := &remoteSigner{key: newKey(t)}
	file, err := Sign(MemberRef, []byte(inner), rs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rs.asked, []byte(inner)) || rs.opts.HashFunc() != crypto.Hash(0) {
		t.Fatalf("signer asked to sign %q with hash %v, want the canonical bytes with crypto.Hash(0)", rs.asked, rs.opts.HashFunc())
	}
	doc, err := Parse(file, MemberRef)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := doc.VerifiedBy(NewKeyRing(pubOf(rs.key)))
	if err != nil || len(ids) != 1 || ids[0] != KeyID(pubOf(rs.key)) {
		t.Fatalf("VerifiedBy = %v, %v", ids, err)
	}
	// The same key in memory writes the same file (Ed25519 is deterministic).
	again, err := Sign(MemberRef, []byte(inner), rs.key)
	if err != nil || !bytes.Equal(again, file) {
		t.Fatalf("private key and signer files differ: %v\n%s\n%s", err, again, file)
	}
	if err := doc.Verify(NewKeyRing(pubOf(newKey(t)))); !errors.Is(err, ErrSignature) {
		t.Fatalf("Verify with another key: %v, want ErrSignature", err)
	}
}

// lyingSigner returns a signature by another key than the one it names.
type lyingSigner struct{ named, signs ed25519.PrivateKey }

func (s lyingSigner) Public() crypto.PublicKey { return s.named.Public() }
func (s lyingSigner) Sign(_ io.Reader, msg []byte, _ crypto.SignerOpts) ([]byte, error) {
	return ed25519.Sign(s.signs, msg), nil
}

type failingSigner struct{ key ed25519.PrivateKey }

func (s failingSigner) Public() crypto.PublicKey { return s.key.Public() }
func (s failingSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("HSM unreachable")
}

// TestSignRefusesSigners: a signer of another algorithm, one whose
// signature does not verify under its public key, and one that fails are
// refused, naming the key.
func TestSignRefusesSigners(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	a, b := newKey(t), newKey(t)
	for name, tc := range map[string]struct {
		s    crypto.Signer
		want string
	}{
		"ecdsa":      {ec, "not an Ed25519 key"},
		"lying":      {lyingSigner{named: a, signs: b}, "does not verify"},
		"failing":    {failingSigner{a}, "HSM unreachable"},
		"short key":  {ed25519.PrivateKey(a[:10]), "10 bytes"},
		"nil signer": {nil, "nil"},
	} {
		if _, err := Sign(MemberRef, []byte(inner), tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Sign = %v, want an error mentioning %q", name, err, tc.want)
		}
	}
}

// TestParseProblems: every way a wrapper fails to parse is one Problem of
// the right kind at the right pointer; decoder problems carry the
// strictjson error.
func TestParseProblems(t *testing.T) {
	entry := `{"keyid":"k","sig":"s"}`
	tests := []struct {
		name, file, pointer string
		kind                ProblemKind
		jsonKind            strictjson.ErrorKind
	}{
		{"not JSON", `{"ref":`, "", Malformed, strictjson.Syntax},
		{"duplicate", `{"ref":{},"ref":{},"signatures":[]}`, "/ref", Malformed, strictjson.DuplicateKey},
		{"big number", `{"ref":{"n":9007199254740993},"signatures":[]}`, "/ref/n", Malformed, strictjson.Number},
		{"missing member", `{"signatures":[` + entry + `]}`, "/ref", Missing, ""},
		{"member not object", `{"ref":[],"signatures":[]}`, "/ref", WrongType, ""},
		{"unknown wrapper member", `{"ref":{},"signatures":[],"x":1}`, "/x", UnknownMember, ""},
		{"signatures not array", `{"ref":{},"signatures":{}}`, "/signatures", WrongType, ""},
		{"entry not object", `{"ref":{},"signatures":[1]}`, "/signatures/0", WrongType, ""},
		{"entry extra member", `{"ref":{},"signatures":[{"keyid":"k","sig":"s","alg":"x"}]}`, "/signatures/0/alg", UnknownMember, ""},
		{"entry without sig", `{"ref":{},"signatures":[{"keyid":"k"}]}`, "/signatures/0/sig", Missing, ""},
		{"keyid not string", `{"ref":{},"signatures":[{"keyid":1,"sig":"s"}]}`, "/signatures/0/keyid", WrongType, ""},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.file), MemberRef)
		var pe *ParseError
		if !errors.As(err, &pe) || len(pe.Problems) != 1 {
			t.Errorf("%s: Parse = %v, want one problem", tt.name, err)
			continue
		}
		p := pe.Problems[0]
		if p.Pointer != tt.pointer || p.Kind != tt.kind || p.Message == "" {
			t.Errorf("%s: problem %+v, want %q %s", tt.name, p, tt.pointer, tt.kind)
		}
		if (p.JSONKind != "") != (tt.kind == Malformed) || (p.JSONKind != "" && p.JSONKind != string(tt.jsonKind)) {
			t.Errorf("%s: JSON kind %q, want kind %q", tt.name, p.JSONKind, tt.jsonKind)
		}
	}
	// Several problems come sorted by pointer.
	_, err := Parse([]byte(`{"z":1,"signatures":[{"keyid":"k"}],"a":2}`), MemberRef)
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatal(err)
	}
	var ptrs []string
	for _, p := range pe.Problems {
		ptrs = append(ptrs, p.Pointer)
	}
	if got := strings.Join(ptrs, " "); got != "/a /ref /signatures/0/sig /z" {
		t.Errorf("pointers %q, want sorted", got)
	}
	// A missing or empty signature list parses; Verify refuses it.
	for _, f := range []string{`{"ref":{}}`, `{"ref":{},"signatures":[]}`} {
		doc, err := Parse([]byte(f), MemberRef)
		if err != nil {
			t.Fatalf("Parse(%s): %v", f, err)
		}
		if err := doc.Verify(NewKeyRing(pubOf(newKey(t)))); !errors.Is(err, ErrSignature) {
			t.Errorf("Verify(%s) = %v, want ErrSignature", f, err)
		}
	}
}

// TestEncodeRoundTrip: Encode is the identity on a file Sign wrote, and a
// document with no signatures is written with [].
func TestEncodeRoundTrip(t *testing.T) {
	file, err := Sign(MemberManifest, []byte(inner), newKey(t), newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Parse(file, MemberManifest)
	if err != nil {
		t.Fatal(err)
	}
	again, err := doc.Encode()
	if err != nil || !bytes.Equal(again, file) {
		t.Fatalf("Encode: %v\n%s\nvs\n%s", err, again, file)
	}
	empty, err := (&Document{Member: MemberRef, Canonical: []byte(`{}`)}).Encode()
	if err != nil || string(empty) != "{\n  \"ref\": {},\n  \"signatures\": []\n}\n" {
		t.Fatalf("Encode without signatures: %v %q", err, empty)
	}
}

// TestCanonicalMember: each member's text inside Canonical is the JCS of
// that member on its own (a subslice, no copy); an absent member is nil.
func TestCanonicalMember(t *testing.T) {
	file, err := Sign(MemberRef, []byte(inner), newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Parse(file, MemberRef)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a": `"x\u001by"`, "b": `[1,2]`, "c": `{"d":true}`} {
		got, err := doc.CanonicalMember(name)
		if err != nil || string(got) != want {
			t.Errorf("member %q: %q, %v; want %q", name, got, err, want)
		}
	}
	if got, err := doc.CanonicalMember("d"); got != nil || err != nil {
		t.Errorf("absent member: %q, %v", got, err)
	}
	if _, err := (&Document{Member: MemberRef, Canonical: []byte(`[1]`)}).CanonicalMember("a"); err == nil {
		t.Error("an array read as an object")
	}
}
