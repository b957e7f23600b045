package main

import (
	"errors"
	"io/fs"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
	"github.com/sandbox-resume/sandbox-resume/resume"
)

// classes maps each refusal class of the libraries (errdef; errdef.Class
// picks one when an error wraps several) to its class here
// (internal/exitcode), whose Code is the exit code.
var classes = map[error]exitcode.Class{
	errdef.ErrRefused:            exitcode.ClassRefused,
	errdef.ErrImageMetadata:      exitcode.ClassImageMetadata,
	errdef.ErrSuperseded:         exitcode.ClassSuperseded,
	errdef.ErrForked:             exitcode.ClassForked,
	errdef.ErrClaimConflict:      exitcode.ClassClaimConflict,
	errdef.ErrUntrusted:          exitcode.ClassUntrusted,
	errdef.ErrTampered:           exitcode.ClassTampered,
	errdef.ErrMismatch:           exitcode.ClassManifestMismatch,
	errdef.ErrImageUnresolved:    exitcode.ClassImageUnresolved,
	errdef.ErrBadInput:           exitcode.ClassBadInput,
	errdef.ErrSnapshotMissing:    exitcode.ClassSnapshotMissing,
	errdef.ErrMemoryIncompatible: exitcode.ClassMemoryIncompatible,
	errdef.ErrUsage:              exitcode.ClassUsage,
}

// classify maps an error to its class; its exit code is Class.Code. In
// order: a command-line mistake is usage; a failure a command already
// classified keeps its class; a failed check of resume has the check's
// class; an input file resume cannot read is bad-input whatever its cause;
// then the refusal class err wraps (classes); a file that does not exist,
// is over its cap or is a device (docs/design.md "Hardening", "Bounded
// reads") is bad-input; anything else (a locked or unreachable ledger
// included) is internal.
func classify(err error) exitcode.Class {
	var ue *usageError
	var ee *exitError
	var ce *resume.CheckError
	var ie *resume.InputError
	switch {
	case errors.As(err, &ue):
		return exitcode.ClassUsage
	case errors.As(err, &ee):
		return ee.class
	case errors.As(err, &ce):
		return ce.Class
	case errors.As(err, &ie):
		return exitcode.ClassBadInput
	}
	if c, ok := classes[errdef.Class(err)]; ok {
		return c
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, inputfile.ErrTooLarge) || errors.Is(err, inputfile.ErrNotRegular) {
		return exitcode.ClassBadInput
	}
	return exitcode.ClassInternal
}
