package resume

import (
	"errors"
	"io/fs"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Exit codes of the sandbox-resume CLI (DESIGN "CLI contract"). This is the
// one table in the code; the README and docs/ are generated or checked from
// ExitCodes.
const (
	ExitOK        = 0  // ok / resume accepted
	ExitInternal  = 1  // internal or daemon error
	ExitRefused   = 2  // refused input: devcontainer.json, lockfile, SnapshotRef or archive does not ingest
	ExitMismatch  = 3  // manifest mismatch (drift); at suspend, the declaration does not describe the container
	ExitCrossHost = 4  // unpinned cross-host claim
	ExitImage     = 5  // image unresolved or drifted in the content store
	ExitUntrusted = 6  // signature missing, invalid or untrusted; or ref tampered
	ExitSnapshot  = 7  // snapshot content missing or corrupt
	ExitClaim     = 8  // claim conflict: the run is being or was resumed, or the container id exists
	ExitUsage     = 64 // usage error
)

// ExitCodeInfo documents one exit code.
type ExitCodeInfo struct {
	Code    int
	Meaning string
}

// ExitCodes lists every exit code with its meaning, in ascending order.
var ExitCodes = []ExitCodeInfo{
	{ExitOK, "ok / resume accepted"},
	{ExitInternal, "internal or daemon error"},
	{ExitRefused, "refused input: devcontainer.json, lockfile, SnapshotRef or archive does not ingest (also a config file or container that does not exist)"},
	{ExitMismatch, "manifest mismatch (drift); at suspend, the declaration does not describe the container"},
	{ExitCrossHost, "unpinned cross-host claim"},
	{ExitImage, "image unresolved or drifted in the content store"},
	{ExitUntrusted, "signature missing, invalid or untrusted; or ref tampered"},
	{ExitSnapshot, "snapshot content missing or corrupt"},
	{ExitClaim, "claim conflict: the run is being or was resumed, or the container id exists"},
	{ExitUsage, "usage error"},
}

// Classify maps errors of the library packages to an exit code and the
// JSON error class. ok is false for errors it does not know (exit 1,
// class "internal").
func Classify(err error) (code int, class string, ok bool) {
	if err == nil {
		return ExitOK, "", true
	}
	if ce := checkError(err); ce != nil {
		return ce.Class.ExitCode(), string(ce.Class), ce.Class != ClassInternal
	}
	var ie *InputError
	if errors.As(err, &ie) {
		return ExitRefused, string(ClassBadInput), true
	}
	switch {
	case errors.Is(err, envmanifest.ErrSignature):
		return ExitUntrusted, "untrusted", true
	case errors.Is(err, envmanifest.ErrKeyExists):
		return ExitRefused, "refused", true
	case errors.Is(err, snapshot.ErrTampered):
		return ExitUntrusted, string(ClassTampered), true
	case errors.Is(err, snapshot.ErrMismatch):
		return ExitMismatch, string(ClassManifestMismatch), true
	case errors.Is(err, snapshot.ErrImageUnresolved):
		return ExitImage, string(ClassImageUnresolved), true
	case errors.Is(err, snapshot.ErrContainerNotFound), errors.Is(err, snapshot.ErrRunNotFound):
		return ExitRefused, string(ClassBadInput), true
	case errors.Is(err, snapshot.ErrRunConflict):
		return ExitClaim, string(ClassClaimConflict), true
	case errors.Is(err, snapshot.ErrArtifactRefused):
		return ExitRefused, string(ClassBadInput), true
	case errors.Is(err, snapshot.ErrSnapshotMissing):
		return ExitSnapshot, string(ClassSnapshotMissing), true
	case errors.Is(err, snapshot.ErrInvalidRun):
		return ExitUsage, "usage", true
	case errors.Is(err, fs.ErrNotExist):
		// a config (or other input) file that does not exist is refused input
		return ExitRefused, string(ClassBadInput), true
	}
	return ExitInternal, "internal", false
}
