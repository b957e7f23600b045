package snapshot

import (
	"github.com/sandbox-resume/sandbox-resume/envelope"
)

// The steps of OpenRef, named as the resume decision names its checks 1–4
// (docs/design.md "Resume decision").
const (
	// StepParse: the strict decoder reads a signed "ref" wrapper.
	StepParse = "ref-parse"
	// StepSignature: the signatures verify against the trusted keys.
	StepSignature = "signature"
	// StepSchema: "ref" has exactly the SnapshotRef members, with the
	// right types.
	StepSchema = "ref-schema"
	// StepIntegrity: manifest is the address of core, pinned its
	// pinned-ness.
	StepIntegrity = "ref-integrity"
)

// Provenance is what opening a SnapshotRef file established about its
// signatures: Signatures is the number of entries of its "signatures" list
// (known once StepParse passed), SignedBy the keyids of the trusted entries
// that verified, in file order (known once StepSignature passed; nil for
// OpenRefUnsafe).
type Provenance struct {
	Signatures int
	SignedBy   []string
}

// OpenError is a SnapshotRef file that OpenRef refused: Step names the
// step that failed (StepParse, StepSignature, StepSchema or
// StepIntegrity), Provenance what the steps before it established, and Err
// the cause: a *envmanifest.RefusedError for StepParse and StepSchema
// (every problem at its JSON Pointer), an error wrapping
// envelope.ErrSignature for StepSignature, one wrapping ErrTampered for
// StepIntegrity.
type OpenError struct {
	Step       string
	Provenance Provenance
	Err        error
}

var _ error = (*OpenError)(nil)

// Error is the cause's message.
func (e *OpenError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *OpenError) Unwrap() error { return e.Err }

// OpenRef is the way to open a SnapshotRef file: it runs checks 1–4 of
// the resume decision in order (docs/design.md "Resume decision") —
// parse the signed wrapper with the strict decoder, verify its signatures
// against trust, decode the ref with exactly its members and types, and
// check that its manifest address and pinned flag are those of its core —
// and returns the verified ref. No field of the ref is used before its
// signature verifies. The ref's Provenance records the signatures.
//
// Errors are *OpenError naming the step that failed (see OpenError for the
// cause of each).
func OpenRef(data []byte, trust *envelope.KeyRing) (*Ref, error) {
	return openRef(data, trust, true)
}

// OpenRefUnsafe opens a SnapshotRef file WITHOUT verifying its signatures:
// parse, schema and integrity (OpenRef's steps but StepSignature). A
// signature that does not verify, an untrusted key or no signature at all
// go unnoticed, so nothing it returns may be trusted: it serves only to
// find what a run consists of before sending it elsewhere (export, push),
// where the receiving side opens the ref with OpenRef. Errors are OpenRef's.
func OpenRefUnsafe(data []byte) (*Ref, error) {
	return openRef(data, nil, false)
}

func openRef(data []byte, trust *envelope.KeyRing, verify bool) (*Ref, error) {
	var prov Provenance
	doc, err := parseRefFile(data)
	if err != nil {
		return nil, &OpenError{Step: StepParse, Err: err}
	}
	prov.Signatures = len(doc.Signatures)
	if verify {
		ids, err := doc.VerifiedBy(trust)
		if err != nil {
			return nil, &OpenError{Step: StepSignature, Provenance: prov, Err: err}
		}
		prov.SignedBy = ids
	}
	// The core's canonical bytes are a part of doc.Canonical (the JCS of
	// the whole ref, computed once by the parse): not canonicalized again.
	// When they cannot be found there, the core is canonicalized from its
	// own text as before.
	coreCanonical, cerr := doc.CanonicalMember("core")
	if cerr != nil {
		coreCanonical = nil
	}
	r, err := decodeRefCanonical(doc.Inner, coreCanonical)
	if err != nil {
		return nil, &OpenError{Step: StepSchema, Provenance: prov, Err: err}
	}
	if err := checkIntegrity(r, doc.Inner); err != nil {
		return nil, &OpenError{Step: StepIntegrity, Provenance: prov, Err: err}
	}
	r.provenance = prov
	return r, nil
}

// Provenance returns what OpenRef (or OpenRefUnsafe) established about the
// signatures of the file r was opened from; the zero Provenance for a Ref
// built in code.
func (r *Ref) Provenance() Provenance { return r.provenance }
