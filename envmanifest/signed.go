package envmanifest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// Wrapper member names of the signed documents (DESIGN "Signed documents").
const (
	// SignedMemberManifest holds a manifest core in a signed manifest.
	SignedMemberManifest = "manifest"
	// SignedMemberRef holds a SnapshotRef in a SnapshotRef file.
	SignedMemberRef = "ref"
	// SignedMemberSignatures holds the array of Signature entries.
	SignedMemberSignatures = "signatures"
)

// ErrSignature is wrapped by every verification failure of a signed
// document: signature list missing or empty, no entry naming a trusted key,
// or an entry naming a trusted key whose sig is not strict base64, not 64
// bytes, or does not verify. The CLI maps it to exit 6, class "untrusted"
// (DESIGN "CLI contract", resume check 2).
var ErrSignature = errors.New("signature missing, invalid or untrusted")

// Signature is one entry of a signed document's "signatures" array: KeyID
// names the signing key ("ed25519:" + 64 lowercase hex, see KeyID) and Sig is
// the 64-byte Ed25519 signature (RFC 8032 §5.1.6) over the canonical bytes,
// in RFC 4648 §4 standard base64 with padding.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// SignedDocument is a parsed signed wrapper {<Member>: {…}, "signatures":
// […]} (DESIGN "Signed documents"). Inner is the inner object exactly as
// decoded; Canonical is the RFC 8785 JCS of Inner.Raw, the bytes every
// signature covers. Signatures keeps file order and may be empty: Verify
// reports that.
type SignedDocument struct {
	Member     string
	Inner      *strictjson.Node
	Canonical  []byte
	Signatures []Signature
}

// ParseSigned parses data as a signed wrapper whose document member is
// member ("manifest" or "ref"), with the strict decoder (Decode with jsonc
// false: duplicates, I-JSON numbers, encoding, size and depth limits).
//
// It returns a *RefusedError (exit 2) listing every problem with its JSON
// Pointer when: data does not decode (any decoder refusal); member is
// missing ("missing") or not an object ("invalid-value"); the wrapper has a
// member other than member and "signatures" ("unknown-property");
// "signatures" is present but not an array, an entry is not an object, an
// entry lacks "keyid" or "sig" or has another member, or those are not
// strings. A missing or empty "signatures" array is not a parse error:
// Verify reports it (ErrSignature). Source of the error is empty; ReadSigned
// fills it with the file name.
func ParseSigned(data []byte, member string) (*SignedDocument, error) {
	root, refusals := decode(data, false)
	if len(refusals) > 0 {
		SortRefusals(refusals)
		return nil, &RefusedError{Refusals: refusals}
	}
	if root == nil || root.Kind != strictjson.KindObject {
		return nil, &RefusedError{Refusals: []Refusal{{Pointer: "", Class: ClassSyntax, Message: "the top level must be an object"}}}
	}
	var rs []Refusal
	refuse := func(ptr string, class Class, format string, args ...any) {
		rs = append(rs, Refusal{Pointer: ptr, Class: class, Message: fmt.Sprintf(format, args...)})
	}
	doc := &SignedDocument{Member: member}
	for _, m := range root.Members {
		if m.Name != member && m.Name != SignedMemberSignatures {
			refuse(strictjson.Pointer("", m.Name), ClassUnknownProperty, "unknown member %q in a signed %s wrapper (allowed: %q, %q)", m.Name, member, member, SignedMemberSignatures)
		}
	}
	inner := root.Get(member)
	switch {
	case inner == nil:
		refuse(strictjson.Pointer("", member), ClassMissing, "a signed %s wrapper needs an object %q", member, member)
	case inner.Kind != strictjson.KindObject:
		refuse(inner.Pointer, ClassInvalidValue, "%q must be an object, not %s", member, inner.Kind)
	default:
		doc.Inner = inner
	}
	if sigs := root.Get(SignedMemberSignatures); sigs != nil {
		if sigs.Kind != strictjson.KindArray {
			refuse(sigs.Pointer, ClassInvalidValue, "%q must be an array, not %s", SignedMemberSignatures, sigs.Kind)
		} else {
			for _, e := range sigs.Elems {
				if s, ok := parseSignatureEntry(e, refuse); ok {
					doc.Signatures = append(doc.Signatures, s)
				}
			}
		}
	}
	if len(rs) > 0 {
		SortRefusals(rs)
		return nil, &RefusedError{Refusals: rs}
	}
	canon, err := jcs.Transform(doc.Inner.Raw)
	if err != nil {
		return nil, &RefusedError{Refusals: []Refusal{{Pointer: doc.Inner.Pointer, Class: ClassInvalidValue, Message: "canonicalize (RFC 8785): " + err.Error()}}}
	}
	doc.Canonical = canon
	return doc, nil
}

// parseSignatureEntry checks one "signatures" element: an object with
// exactly the string members "keyid" and "sig".
func parseSignatureEntry(e *strictjson.Node, refuse func(string, Class, string, ...any)) (Signature, bool) {
	if e.Kind != strictjson.KindObject {
		refuse(e.Pointer, ClassInvalidValue, "a signature entry must be an object, not %s", e.Kind)
		return Signature{}, false
	}
	ok := true
	for _, m := range e.Members {
		if m.Name != "keyid" && m.Name != "sig" {
			refuse(strictjson.Pointer(e.Pointer, m.Name), ClassUnknownProperty, "unknown member %q in a signature entry (allowed: \"keyid\", \"sig\")", m.Name)
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
			refuse(strictjson.Pointer(e.Pointer, f.name), ClassMissing, "a signature entry needs a string %q", f.name)
			ok = false
		case v.Kind != strictjson.KindString:
			refuse(v.Pointer, ClassInvalidValue, "%q must be a string, not %s", f.name, v.Kind)
			ok = false
		default:
			*f.dst = v.Str
		}
	}
	return s, ok
}

// ReadSigned reads the file at path and parses it with ParseSigned; a
// *RefusedError carries path as its Source, and a read error (a missing
// file too) is returned as a *RefusedError at pointer "" as well (DESIGN
// "CLI contract": a file that does not exist is exit 2).
func ReadSigned(path, member string) (*SignedDocument, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &RefusedError{Source: path, Refusals: []Refusal{{Pointer: "", Class: ClassMissing, Message: err.Error()}}}
	}
	doc, err := ParseSigned(data, member)
	var re *RefusedError
	if errors.As(err, &re) {
		re.Source = path
	}
	return doc, err
}

// Verify checks the signatures over d.Canonical against trust (DESIGN
// "Signed documents"): it succeeds when at least one entry names a trusted
// key and every entry that names a trusted key verifies; entries for other
// keys are ignored. Errors wrap ErrSignature and name the entry's pointer
// and keyid.
func (d *SignedDocument) Verify(trust *KeyRing) error {
	_, err := d.VerifiedBy(trust)
	return err
}

// VerifiedBy is Verify that also returns the keyids of the trusted entries
// that verified, in file order (a keyid listed twice appears twice).
func (d *SignedDocument) VerifiedBy(trust *KeyRing) ([]string, error) {
	if len(d.Signatures) == 0 {
		return nil, fmt.Errorf("/%s: signature missing (no entries): %w", SignedMemberSignatures, ErrSignature)
	}
	var ok []string
	for i, s := range d.Signatures {
		pub, trusted := trust.Lookup(s.KeyID)
		if !trusted {
			continue
		}
		ptr := fmt.Sprintf("/%s/%d", SignedMemberSignatures, i)
		sig, err := decodeSig(s.Sig)
		if err != nil {
			return nil, fmt.Errorf("%s/sig: key %s: %v: %w", ptr, s.KeyID, err, ErrSignature)
		}
		if !ed25519.Verify(pub, d.Canonical, sig) {
			return nil, fmt.Errorf("%s/sig: key %s: signature does not verify over the canonical %s: %w", ptr, s.KeyID, d.Member, ErrSignature)
		}
		ok = append(ok, s.KeyID)
	}
	if len(ok) == 0 {
		ids := make([]string, len(d.Signatures))
		for i, s := range d.Signatures {
			ids[i] = s.KeyID
		}
		return nil, fmt.Errorf("/%s: no entry names a trusted key (signed by %s; trusted: %s): %w",
			SignedMemberSignatures, strings.Join(ids, ", "), strings.Join(trust.KeyIDs(), ", "), ErrSignature)
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
// each key in order and returns the signed file's bytes: the wrapper
// {member: <canonical>, "signatures": [{"keyid", "sig"}, …]} with keys sorted
// (JCS), 2-space indentation and a final newline (DESIGN "Signed
// documents"). It fails when member is empty, no key is given, a key is not
// 64 bytes, or canonical is not a JSON object already in JCS form (a
// signature over other bytes would not verify after parsing).
func Sign(member string, canonical []byte, keys ...ed25519.PrivateKey) ([]byte, error) {
	if member == "" || member == SignedMemberSignatures {
		return nil, fmt.Errorf("sign: invalid document member %q", member)
	}
	if len(keys) == 0 {
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
	sigs := make([]Signature, len(keys))
	for i, k := range keys {
		if len(k) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("sign: key %d is %d bytes, want %d", i, len(k), ed25519.PrivateKeySize)
		}
		sigs[i] = Signature{
			KeyID: KeyID(k.Public().(ed25519.PublicKey)),
			Sig:   base64.StdEncoding.EncodeToString(ed25519.Sign(k, canonical)),
		}
	}
	return encodeSigned(member, canonical, sigs)
}

// encodeSigned serializes a wrapper: JCS (sorted keys) then 2-space indent.
func encodeSigned(member string, inner []byte, sigs []Signature) ([]byte, error) {
	if sigs == nil {
		sigs = []Signature{} // an empty array, never null
	}
	raw, err := json.Marshal(map[string]any{
		member:                 json.RawMessage(inner),
		SignedMemberSignatures: sigs,
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

// Encode re-serializes d in the signed file form (as Sign writes it) from
// its canonical bytes and its signatures as parsed. It is the identity on
// files Sign wrote.
func (d *SignedDocument) Encode() ([]byte, error) {
	return encodeSigned(d.Member, d.Canonical, d.Signatures)
}

// SignManifestFile ingests the devcontainer.json at path with IngestFile
// and returns the signed manifest file over its canonical core (member
// "manifest"), signed by keys in order (see Sign). Ingestion errors are
// returned as IngestFile returns them (*RefusedError for a refused
// document).
func SignManifestFile(path string, opts Options, keys ...ed25519.PrivateKey) ([]byte, error) {
	m, err := IngestFile(path, opts)
	if err != nil {
		return nil, err
	}
	return Sign(SignedMemberManifest, m.Canonical, keys...)
}
