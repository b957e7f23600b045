package envmanifest

import (
	"crypto"
	"errors"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// ParseSigned parses data as a signed wrapper whose document member is
// member (envelope.MemberManifest or envelope.MemberRef) with
// envelope.Parse, and reports a wrapper that does not parse as a
// *RefusedError (class "refused" or "bad-input" in the CLI) listing every
// problem with its JSON Pointer, sorted by pointer: the strict decoder's
// problems with their classes (syntax, encoding, limit, number,
// duplicate-key), a missing document member or signature-entry member
// ("missing"), a member of the wrong type ("invalid-value"), an unknown
// wrapper or entry member ("unknown-property"). A missing or empty
// "signatures" array is not a parse error: Document.Verify reports it
// (envelope.ErrSignature). Source of the error is empty; ReadSigned fills
// it with the file name. When data is not a signed document at all (it
// does not decode, or it lacks the document member) NotA says so ("a
// signed manifest", "a signed ref").
func ParseSigned(data []byte, member string) (*envelope.Document, error) {
	doc, err := envelope.Parse(data, member)
	var pe *envelope.ParseError
	if errors.As(err, &pe) {
		re := refusedFromEnvelope(pe)
		for _, p := range pe.Problems {
			if p.Kind == envelope.Malformed || (p.Kind == envelope.Missing && p.Pointer == "/"+member) {
				re.NotA = "a signed " + member
				break
			}
		}
		return nil, re
	}
	return doc, err
}

// refusedFromEnvelope maps the problems of envelope.Parse to refusals.
func refusedFromEnvelope(pe *envelope.ParseError) *RefusedError {
	rs := make([]Refusal, len(pe.Problems))
	for i, p := range pe.Problems {
		r := Refusal{Pointer: p.Pointer, Message: p.Message}
		switch p.Kind {
		case envelope.Malformed:
			if p.JSONKind != "" {
				r.Class = kindClass(strictjson.ErrorKind(p.JSONKind))
			} else {
				r.Class = ClassSyntax
			}
		case envelope.Missing:
			r.Class = ClassMissing
		case envelope.UnknownMember:
			r.Class = ClassUnknownProperty
		default:
			r.Class = ClassInvalidValue
		}
		rs[i] = r
	}
	SortRefusals(rs)
	return &RefusedError{Refusals: rs}
}

// ReadSigned reads the file at path and parses it with ParseSigned; a
// *RefusedError carries path as its Source, and a read error (a missing
// file too) is returned as a *RefusedError at pointer "" as well (a file
// that does not exist is refused input).
func ReadSigned(path, member string) (*envelope.Document, error) {
	data, err := inputfile.Read(path, inputfile.MaxJSON)
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

// SignManifestFile ingests the devcontainer.json at path with IngestFile
// and returns the signed manifest file over its canonical core (member
// "manifest"), signed by each signer in order (envelope.Sign: any
// crypto.Signer holding an Ed25519 key). Ingestion errors are returned as
// IngestFile returns them (*RefusedError for a refused document).
func SignManifestFile(path string, opts Options, signers ...crypto.Signer) ([]byte, error) {
	m, err := IngestFile(path, opts)
	if err != nil {
		return nil, err
	}
	return envelope.Sign(envelope.MemberManifest, m.Canonical, signers...)
}
