package envelope

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// Wrapper member names of the signed documents (docs/design.md "Signed
// documents").
const (
	// MemberManifest holds a manifest core in a signed manifest.
	MemberManifest = "manifest"
	// MemberRef holds a SnapshotRef in a SnapshotRef file.
	MemberRef = "ref"
	// MemberSignatures holds the array of Signature entries.
	MemberSignatures = "signatures"
)

// ErrSignature is wrapped by every verification failure of a signed
// document: signature list missing or empty, no entry naming a trusted key,
// or an entry naming a trusted key whose sig is not strict base64, not 64
// bytes, or does not verify. Its class is "untrusted" (internal/exitcode).
var ErrSignature = errdef.New(errdef.ErrUntrusted, "signature missing, invalid or untrusted")

// Signature is one entry of a signed document's "signatures" array: KeyID
// names the signing key ("ed25519:" + 64 lowercase hex, see KeyID) and Sig is
// the 64-byte Ed25519 signature (RFC 8032 §5.1.6) over the canonical bytes,
// in RFC 4648 §4 standard base64 with padding.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// Document is a parsed signed wrapper {<Member>: {…}, "signatures": […]}
// (docs/design.md "Signed documents"). Inner is the inner object exactly as
// decoded; Canonical is the RFC 8785 JCS of Inner.Raw, the bytes every
// signature covers. Signatures keeps file order and may be empty: Verify
// reports that.
type Document struct {
	Member     string
	Inner      *strictjson.Node
	Canonical  []byte
	Signatures []Signature
}

// ProblemKind says what is wrong with a wrapper that does not parse.
type ProblemKind string

// The kinds of Problem.
const (
	// Malformed: the text does not pass the strict decoder
	// (internal/strictjson); Problem.JSONKind names the decoder's error
	// kind.
	Malformed ProblemKind = "malformed"
	// Missing: a required member is absent (the document member, or an
	// entry's "keyid" or "sig").
	Missing ProblemKind = "missing"
	// WrongType: a member has the wrong JSON type, or the inner object
	// cannot be canonicalized.
	WrongType ProblemKind = "wrong-type"
	// UnknownMember: the wrapper or a signature entry has a member it may
	// not have.
	UnknownMember ProblemKind = "unknown-member"
)

// Problem is one reason a signed wrapper does not parse: its RFC 6901 JSON
// Pointer into the file ("" is the whole file), its kind, and a message for
// people (with line:column first for a placed decoder problem). JSONKind
// is the strict decoder's error kind when Kind is Malformed ("syntax",
// "encoding", "limit", "number", "duplicate-key", …), else "".
type Problem struct {
	Pointer  string
	Kind     ProblemKind
	Message  string
	JSONKind string
}

// ParseError is returned by Parse when a wrapper does not parse: every
// problem, the decoder's in document order, the wrapper's own sorted by
// pointer.
type ParseError struct {
	Problems []Problem
}

var _ error = (*ParseError)(nil)

// Error lists the problems, "pointer: message" each, separated by "; ".
func (e *ParseError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		ptr := p.Pointer
		if ptr == "" {
			ptr = `""`
		}
		parts[i] = ptr + ": " + p.Message
	}
	return "signed document: " + strings.Join(parts, "; ")
}

// Parse parses data as a signed wrapper whose document member is member
// ("manifest" or "ref"), with the strict decoder (strictjson.Decode with
// jsonc false: duplicates, I-JSON numbers, encoding, size and depth
// limits).
//
// It returns a *ParseError listing every problem with its JSON Pointer
// when: data does not decode (Malformed, one problem per decoder error);
// member is missing (Missing) or not an object (WrongType); the wrapper has
// a member other than member and "signatures" (UnknownMember);
// "signatures" is present but not an array, an entry is not an object, an
// entry lacks "keyid" or "sig" or has another member, or those are not
// strings. A missing or empty "signatures" array is not a parse error:
// Verify reports it (ErrSignature).
func Parse(data []byte, member string) (*Document, error) {
	root, errs := strictjson.Decode(data, false)
	if len(errs) > 0 {
		ps := make([]Problem, len(errs))
		for i, e := range errs {
			ps[i] = Problem{Pointer: e.Pointer, Kind: Malformed, Message: e.Text(), JSONKind: string(e.Kind)}
		}
		return nil, &ParseError{Problems: ps}
	}
	var ps []Problem
	problem := func(ptr string, kind ProblemKind, format string, args ...any) {
		ps = append(ps, Problem{Pointer: ptr, Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	doc := &Document{Member: member}
	for _, m := range root.Members {
		if m.Name != member && m.Name != MemberSignatures {
			problem(strictjson.Pointer("", m.Name), UnknownMember, "unknown member %q in a signed %s wrapper (allowed: %q, %q)", m.Name, member, member, MemberSignatures)
		}
	}
	inner := root.Get(member)
	switch {
	case inner == nil:
		problem(strictjson.Pointer("", member), Missing, "a signed %s wrapper needs an object %q", member, member)
	case inner.Kind != strictjson.KindObject:
		problem(inner.Pointer, WrongType, "%q must be an object, not %s", member, inner.Kind)
	default:
		doc.Inner = inner
	}
	if sigs := root.Get(MemberSignatures); sigs != nil {
		if sigs.Kind != strictjson.KindArray {
			problem(sigs.Pointer, WrongType, "%q must be an array, not %s", MemberSignatures, sigs.Kind)
		} else {
			for _, e := range sigs.Elems {
				if s, ok := parseSignatureEntry(e, problem); ok {
					doc.Signatures = append(doc.Signatures, s)
				}
			}
		}
	}
	if len(ps) > 0 {
		sortProblems(ps)
		return nil, &ParseError{Problems: ps}
	}
	canon, err := jcs.Transform(doc.Inner.Raw)
	if err != nil {
		return nil, &ParseError{Problems: []Problem{{Pointer: doc.Inner.Pointer, Kind: WrongType, Message: "canonicalize (RFC 8785): " + err.Error()}}}
	}
	doc.Canonical = canon
	return doc, nil
}

// CanonicalMember returns the canonical text of the member name of the
// inner object: a subslice of d.Canonical (not a copy; do not modify it),
// or nil when the inner object has no such member. RFC 8785 is recursive
// (§3.2.3: members are serialized by the same rules as the whole), so a
// member value's text inside the JCS of the object is the JCS of that
// value: a caller that needs the canonical bytes of a subtree (a
// SnapshotRef's "core") takes them from here instead of running JCS over
// the subtree again. The text is located with a jsontext.Decoder; an error
// says the bytes are not a JSON object (not reached for a Document Parse
// returned).
func (d *Document) CanonicalMember(name string) ([]byte, error) {
	pd := canonicalDecoders.Get().(*pooledDecoder)
	defer func() {
		pd.src = bytes.Buffer{}
		pd.dec.Reset(&pd.src)
		canonicalDecoders.Put(pd)
	}()
	// A *bytes.Buffer is read in place (no copy into the decoder).
	pd.src = *bytes.NewBuffer(d.Canonical)
	pd.dec.Reset(&pd.src, canonicalReadOptions...)
	dec := &pd.dec
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("canonical %s member %q: not a JSON object (%v)", d.Member, name, err)
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("canonical %s member %q: %w", d.Member, name, err)
		}
		if tok.String() != name {
			if err := dec.SkipValue(); err != nil {
				return nil, fmt.Errorf("canonical %s member %q: %w", d.Member, name, err)
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("canonical %s member %q: %w", d.Member, name, err)
		}
		end := int(dec.InputOffset())
		return d.Canonical[end-len(v) : end : end], nil
	}
	return nil, nil
}

// pooledDecoder is a reusable jsontext.Decoder reading a bytes.Buffer (a
// new Decoder per call was a good part of CanonicalMember's cost).
type pooledDecoder struct {
	src bytes.Buffer
	dec jsontext.Decoder
}

var canonicalDecoders = sync.Pool{New: func() any { return new(pooledDecoder) }}

// canonicalReadOptions read JCS output: it is valid UTF-8 and has no
// repeated name, so the checks that would find them are off.
var canonicalReadOptions = []jsontext.Options{
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
}

// sortProblems sorts problems by pointer in UTF-8 byte order, keeping the
// order of problems at one pointer.
func sortProblems(ps []Problem) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].Pointer < ps[j-1].Pointer; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// parseSignatureEntry checks one "signatures" element: an object with
// exactly the string members "keyid" and "sig".
func parseSignatureEntry(e *strictjson.Node, problem func(string, ProblemKind, string, ...any)) (Signature, bool) {
	if e.Kind != strictjson.KindObject {
		problem(e.Pointer, WrongType, "a signature entry must be an object, not %s", e.Kind)
		return Signature{}, false
	}
	ok := true
	for _, m := range e.Members {
		if m.Name != "keyid" && m.Name != "sig" {
			problem(strictjson.Pointer(e.Pointer, m.Name), UnknownMember, "unknown member %q in a signature entry (allowed: \"keyid\", \"sig\")", m.Name)
			ok = false
		}
	}
	var s Signature
	for _, f := range []struct {
		name string
		dst  *string
	}{{"keyid", &s.KeyID}, {"sig", &s.Sig}} {
		v := e.Get(f.name)
		switch {
		case v == nil:
			problem(strictjson.Pointer(e.Pointer, f.name), Missing, "a signature entry needs a string %q", f.name)
			ok = false
		case v.Kind != strictjson.KindString:
			problem(v.Pointer, WrongType, "%q must be a string, not %s", f.name, v.Kind)
			ok = false
		default:
			*f.dst = v.Str
		}
	}
	return s, ok
}

// Verify checks the signatures over d.Canonical against trust
// (docs/design.md "Signed documents"): it succeeds when at least one entry
// names a trusted key and every entry that names a trusted key verifies;
// entries for other keys are ignored. Errors wrap ErrSignature and name the
// entry's pointer and keyid.
func (d *Document) Verify(trust *KeyRing) error {
	_, err := d.VerifiedBy(trust)
	return err
}

// VerifiedBy is Verify that also returns the keyids of the trusted entries
// that verified, in file order (a keyid listed twice appears twice).
func (d *Document) VerifiedBy(trust *KeyRing) ([]string, error) {
	if len(d.Signatures) == 0 {
		return nil, fmt.Errorf("/%s: signature missing (no entries): %w", MemberSignatures, ErrSignature)
	}
	var ok []string
	for i, s := range d.Signatures {
		pub, trusted := trust.Lookup(s.KeyID)
		if !trusted {
			continue
		}
		// The entry's pointer is only formatted for an error.
		sig, err := decodeSig(s.Sig)
		if err != nil {
			return nil, fmt.Errorf("/%s/%d/sig: key %s: %v: %w", MemberSignatures, i, s.KeyID, err, ErrSignature)
		}
		if !ed25519.Verify(pub, d.Canonical, sig) {
			return nil, fmt.Errorf("/%s/%d/sig: key %s: signature does not verify over the canonical %s: %w", MemberSignatures, i, s.KeyID, d.Member, ErrSignature)
		}
		ok = append(ok, s.KeyID)
	}
	if len(ok) == 0 {
		ids := make([]string, len(d.Signatures))
		for i, s := range d.Signatures {
			ids[i] = s.KeyID
		}
		return nil, fmt.Errorf("/%s: no entry names a trusted key (signed by %s; trusted: %s): %w",
			MemberSignatures, strings.Join(ids, ", "), strings.Join(trust.KeyIDs(), ", "), ErrSignature)
	}
	return ok, nil
}

// decodeSig decodes an RFC 4648 §4 standard base64 signature strictly:
// padding required, no trailing bits set, no CR/LF (which
// base64.StdEncoding.Strict() still skips), so exactly one text encodes
// each signature; it must decode to ed25519.SignatureSize bytes.
func decodeSig(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("sig is not strict base64: contains CR or LF")
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("sig is not strict base64: %v", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("sig is %d bytes, want %d", len(sig), ed25519.SignatureSize)
	}
	return sig, nil
}

// Sign signs canonical (the RFC 8785 JCS bytes of the inner document) with
// each signer in order and returns the signed file's bytes: the wrapper
// {member: <canonical>, "signatures": [{"keyid", "sig"}, …]} with keys
// sorted (JCS), 2-space indentation and a final newline (docs/design.md
// "Signed documents").
//
// A signer is any crypto.Signer whose Public() is an ed25519.PublicKey: an
// ed25519.PrivateKey, or a key held by a KMS or an HSM. It is asked for a
// pure Ed25519 signature (RFC 8032 §5.1.6: crypto.Hash(0), the message
// itself, never a digest) and the signature must verify under its public
// key before it is written.
//
// It fails when member is empty or "signatures", no signer is given, a
// signer holds another kind of key, fails or returns a signature that does
// not verify, or canonical is not a JSON object already in JCS form (a
// signature over other bytes would not verify after parsing).
func Sign(member string, canonical []byte, signers ...crypto.Signer) ([]byte, error) {
	if member == "" || member == MemberSignatures {
		return nil, fmt.Errorf("sign: invalid document member %q", member)
	}
	if len(signers) == 0 {
		return nil, errors.New("sign: no signing key")
	}
	if len(bytes.TrimSpace(canonical)) == 0 || canonical[0] != '{' {
		return nil, fmt.Errorf("sign: the %s document must be a JSON object", member)
	}
	again, err := jcs.Transform(canonical)
	if err != nil {
		return nil, fmt.Errorf("sign: %s document: %w", member, err)
	}
	if !bytes.Equal(again, canonical) {
		return nil, fmt.Errorf("sign: %s document is not in RFC 8785 canonical form", member)
	}
	sigs := make([]Signature, len(signers))
	for i, s := range signers {
		if s == nil {
			return nil, fmt.Errorf("sign: key %d is nil", i)
		}
		if k, ok := s.(ed25519.PrivateKey); ok && len(k) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("sign: key %d is %d bytes, want %d", i, len(k), ed25519.PrivateKeySize)
		}
		pub, ok := s.Public().(ed25519.PublicKey)
		if !ok || len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("sign: key %d is a %T, not an Ed25519 key", i, s.Public())
		}
		sig, err := s.Sign(rand.Reader, canonical, crypto.Hash(0))
		if err != nil {
			return nil, fmt.Errorf("sign: key %d (%s): %w", i, KeyID(pub), err)
		}
		if !ed25519.Verify(pub, canonical, sig) {
			return nil, fmt.Errorf("sign: key %d (%s): the signer's signature does not verify under its public key", i, KeyID(pub))
		}
		sigs[i] = Signature{KeyID: KeyID(pub), Sig: base64.StdEncoding.EncodeToString(sig)}
	}
	return encode(member, canonical, sigs)
}

// encode serializes a wrapper: JCS (sorted keys) then 2-space indent.
func encode(member string, inner []byte, sigs []Signature) ([]byte, error) {
	if sigs == nil {
		sigs = []Signature{} // an empty array, never null
	}
	raw, err := json.Marshal(map[string]any{
		member:           json.RawMessage(inner),
		MemberSignatures: sigs,
	})
	if err != nil {
		return nil, fmt.Errorf("sign: marshal wrapper: %w", err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("sign: canonicalize wrapper: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, canon, "", "  "); err != nil {
		return nil, fmt.Errorf("sign: indent wrapper: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// Encode serializes d in the signed file form (as Sign writes it) from its
// Member, its Canonical bytes and its Signatures as they are (an empty
// list is written as []). It is the identity on files Sign wrote.
func (d *Document) Encode() ([]byte, error) {
	return encode(d.Member, d.Canonical, d.Signatures)
}
