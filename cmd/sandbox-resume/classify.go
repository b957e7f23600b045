package main

import (
	"errors"
	"io/fs"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// sentinelClasses maps the sentinel errors of the libraries to their
// classes (internal/exitcode), checked in this order with errors.Is: the
// first that err wraps decides.
var sentinelClasses = []struct {
	err   error
	class exitcode.Class
}{
	{envelope.ErrSignature, exitcode.ClassUntrusted},
	{envelope.ErrKeyExists, exitcode.ClassRefused},
	{snapshot.ErrTampered, exitcode.ClassTampered},
	{suspend.ErrMismatch, exitcode.ClassManifestMismatch},
	{snapshot.ErrImageUnresolved, exitcode.ClassImageUnresolved},
	{suspend.ErrContainerNotFound, exitcode.ClassBadInput},
	{suspend.ErrRunConflict, exitcode.ClassClaimConflict},
	{suspend.ErrAlreadySuspended, exitcode.ClassClaimConflict},
	{suspend.ErrRunMismatch, exitcode.ClassBadInput},
	{suspend.ErrPolicyMismatch, exitcode.ClassBadInput},
	{suspend.ErrSnapshotMissing, exitcode.ClassSnapshotMissing},
	{migrate.ErrArtifactRefused, exitcode.ClassBadInput},
	{migrate.ErrSnapshotMissing, exitcode.ClassSnapshotMissing},
	{snapshot.ErrDiffCorrupt, exitcode.ClassSnapshotMissing},
	{snapshot.ErrBlobCorrupt, exitcode.ClassSnapshotMissing},
	{snapshot.ErrInvalidRun, exitcode.ClassUsage},
	// A workload file named like a whiteout, at suspend (docs/design.md
	// "Hardening", "Workload file names").
	{snapshot.ErrWhiteoutName, exitcode.ClassBadInput},
	// A config (or other input) file that does not exist is refused input.
	{fs.ErrNotExist, exitcode.ClassBadInput},
	// An input file over its cap, or a device (docs/design.md "Hardening",
	// "Bounded reads").
	{inputfile.ErrTooLarge, exitcode.ClassBadInput},
	{inputfile.ErrNotRegular, exitcode.ClassBadInput},
}

// classify maps an error to its class; its exit code is Class.Code. In
// order: a command-line mistake is usage; a failure a command already
// classified keeps its class; a document that does not ingest is refused;
// an image whose devcontainer.metadata label is refused is image-metadata;
// a failed check of resume has the check's class; an unreadable input file
// is bad-input; a ledger refusal has its class (ledger.ClassOf); then the
// first of sentinelClasses that err wraps; anything else (a locked or
// unreachable ledger included) is internal.
func classify(err error) exitcode.Class {
	var ue *usageError
	var ee *exitError
	var re *envmanifest.RefusedError
	var me *envmanifest.ImageMetadataError
	var ce *resume.CheckError
	var ie *resume.InputError
	switch {
	case errors.As(err, &ue):
		return exitcode.ClassUsage
	case errors.As(err, &ee):
		return ee.class
	case errors.As(err, &re):
		return exitcode.ClassRefused
	case errors.As(err, &me):
		return exitcode.ClassImageMetadata
	case errors.As(err, &ce):
		return ce.Class
	case errors.As(err, &ie):
		return exitcode.ClassBadInput
	}
	switch ledger.ClassOf(err) {
	case ledger.ClassSuperseded:
		return exitcode.ClassSuperseded
	case ledger.ClassForked:
		return exitcode.ClassForked
	case ledger.ClassClaimConflict:
		return exitcode.ClassClaimConflict
	case ledger.ClassBadInput:
		return exitcode.ClassBadInput
	}
	for _, s := range sentinelClasses {
		if errors.Is(err, s.err) {
			return s.class
		}
	}
	return exitcode.ClassInternal
}
