// Package errdef holds the refusal classes of sandbox-resume as sentinel
// errors (docs/design.md "CLI contract"): every package wraps one of these
// (fmt.Errorf("...: %w", errdef.ErrX), or a finer sentinel made with New),
// so a caller tells the classes apart with one errors.Is whatever package
// refused. Typed errors exist only where callers need fields (ledger.Error,
// envmanifest.RefusedError, ...); each unwraps to its class.
//
// The classes carry no exit codes: the CLI maps each class to one
// (internal/exitcode). A class's Error text is what a wrapped message ends
// with; it never changes.
package errdef

import "errors"

// The refusal classes.
var (
	// ErrUntrusted: a signature missing, invalid or untrusted.
	ErrUntrusted = errors.New("untrusted")
	// ErrTampered: a ref whose address or pinned flag disagrees with its
	// core.
	ErrTampered = errors.New("tampered")
	// ErrMismatch: the manifest drifted; at suspend, the declaration does
	// not describe the container.
	ErrMismatch = errors.New("manifest-mismatch")
	// ErrImageUnresolved: the image does not resolve, or its content is
	// not complete in the content store.
	ErrImageUnresolved = errors.New("image unresolved")
	// ErrSnapshotMissing: recorded snapshot content (a layer, the spec
	// blob, a ref blob) is missing or corrupt.
	ErrSnapshotMissing = errors.New("snapshot content missing")
	// ErrClaimConflict: the run is held or taken, the caller no longer
	// holds it (fenced out), or the record is in no state for the request.
	ErrClaimConflict = errors.New("claim-conflict")
	// ErrSuperseded: a newer generation is recorded, or the run was
	// discarded or purged.
	ErrSuperseded = errors.New("superseded")
	// ErrForked: the generation is recorded with another ref, or the ref's
	// chain does not reach the recorded one.
	ErrForked = errors.New("forked")
	// ErrMemoryIncompatible: a generation's memory cannot be restored
	// here (docs/design.md "Memory").
	ErrMemoryIncompatible = errors.New("memory-incompatible")
	// ErrRefused: a document (devcontainer.json, lockfile) that does not
	// ingest, or a file that must not be overwritten.
	ErrRefused = errors.New("refused")
	// ErrImageMetadata: the image's devcontainer.metadata label is
	// refused (docs/design.md "Image metadata").
	ErrImageMetadata = errors.New("image-metadata")
	// ErrBadInput: any other input that cannot be used whatever the state
	// (a missing container, a ref, spec or archive that does not decode, a
	// request the ledger cannot apply).
	ErrBadInput = errors.New("bad-input")
	// ErrUsage: a value a caller passed is malformed (an invalid run id).
	ErrUsage = errors.New("usage")
)

// New returns a finer sentinel of class: its Error is text and it matches
// class with errors.Is. Packages use it for the sentinels they export
// beside the class (e.g. snapshot.ErrDiffCorrupt, a snapshot-missing).
func New(class error, text string) error { return &sentinel{text: text, class: class} }

type sentinel struct {
	text  string
	class error
}

func (s *sentinel) Error() string { return s.text }
func (s *sentinel) Unwrap() error { return s.class }

// classes lists every class in the order Class tries them: when an error
// wraps several classes (a refused artifact whose diff is also corrupt),
// the earliest wins.
var classes = []error{
	ErrRefused, ErrImageMetadata,
	ErrSuperseded, ErrForked, ErrClaimConflict,
	ErrUntrusted, ErrTampered, ErrMismatch, ErrImageUnresolved,
	ErrBadInput, ErrSnapshotMissing, ErrMemoryIncompatible, ErrUsage,
}

// Class returns the refusal class err wraps (one of the Err* sentinels of
// this package), or nil when err wraps none. When err wraps several, the
// first of refused, image-metadata, superseded, forked, claim-conflict,
// untrusted, tampered, manifest-mismatch, image-unresolved, bad-input,
// snapshot-missing, memory-incompatible and usage wins.
func Class(err error) error {
	for _, c := range classes {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}
