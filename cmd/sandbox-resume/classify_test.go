package main

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// TestClassify pins how library errors map to classes and exit codes
// (docs/design.md "CLI contract"; written from the table, not the code).
func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("context: %w", err) }
	tests := []struct {
		name  string
		err   error
		class exitcode.Class
		code  int
	}{
		{"usage", usageErrorf("bad flag"), exitcode.ClassUsage, 64},
		{"classified by the command", &exitError{class: exitcode.ClassSnapshotMissing, err: errors.New("x")}, exitcode.ClassSnapshotMissing, 7},
		{"refused document", wrap(&envmanifest.RefusedError{}), exitcode.ClassRefused, 2},
		{"image metadata", wrap(&envmanifest.ImageMetadataError{Image: "busybox:1"}), exitcode.ClassImageMetadata, 2},
		{"image metadata check", &resume.CheckError{Check: "image", Class: resume.ClassImageMetadata, Err: errors.New("x")}, exitcode.ClassImageMetadata, 2},
		{"check error", wrap(&resume.CheckError{Check: "image", Class: resume.ClassImageDrifted, Err: errors.New("x")}), exitcode.ClassImageDrifted, 5},
		{"internal check error", &resume.CheckError{Check: "host", Class: resume.ClassInternal, Err: errors.New("x")}, exitcode.ClassInternal, 1},
		{"input file", &resume.InputError{Path: "p", Err: errors.New("x")}, exitcode.ClassBadInput, 2},
		{"signature", wrap(envelope.ErrSignature), exitcode.ClassUntrusted, 6},
		{"key exists", wrap(envelope.ErrKeyExists), exitcode.ClassRefused, 2},
		{"tampered", wrap(snapshot.ErrTampered), exitcode.ClassTampered, 6},
		{"mismatch", wrap(suspend.ErrMismatch), exitcode.ClassManifestMismatch, 3},
		{"image unresolved", wrap(errdef.ErrImageUnresolved), exitcode.ClassImageUnresolved, 5},
		{"no container", wrap(suspend.ErrContainerNotFound), exitcode.ClassBadInput, 2},
		{"run taken", wrap(suspend.ErrRunConflict), exitcode.ClassClaimConflict, 8},
		{"already suspended", wrap(suspend.ErrAlreadySuspended), exitcode.ClassClaimConflict, 8},
		{"policy other than the run's", wrap(suspend.ErrPolicyMismatch), exitcode.ClassBadInput, 2},
		{"run other than the label", wrap(suspend.ErrRunMismatch), exitcode.ClassBadInput, 2},
		{"recorded ref blob missing", wrap(errdef.ErrSnapshotMissing), exitcode.ClassSnapshotMissing, 7},
		{"outcome unknown", wrap(suspend.ErrOutcomeUnknown), exitcode.ClassInternal, 1},
		{"artifact refused", wrap(migrate.ErrArtifactRefused), exitcode.ClassBadInput, 2},
		{"snapshot missing", wrap(errdef.ErrSnapshotMissing), exitcode.ClassSnapshotMissing, 7},
		{"diff corrupt", wrap(snapshot.ErrDiffCorrupt), exitcode.ClassSnapshotMissing, 7},
		{"diff corrupt in a refused artifact", fmt.Errorf("%w: %w", wrap(snapshot.ErrDiffCorrupt), migrate.ErrArtifactRefused), exitcode.ClassBadInput, 2},
		{"invalid run", wrap(snapshot.ErrInvalidRun), exitcode.ClassUsage, 64},
		{"missing file", wrap(fs.ErrNotExist), exitcode.ClassBadInput, 2},
		{"ledger superseded", wrap(&ledger.Error{Class: errdef.ErrSuperseded, Op: "claim", Run: "r"}), exitcode.ClassSuperseded, 9},
		{"ledger forked", wrap(&ledger.Error{Class: errdef.ErrForked, Op: "claim", Run: "r"}), exitcode.ClassForked, 6},
		{"ledger claim conflict", wrap(&ledger.Error{Class: errdef.ErrClaimConflict, Op: "claim", Run: "r"}), exitcode.ClassClaimConflict, 8},
		{"ledger bad input", wrap(&ledger.Error{Class: errdef.ErrBadInput, Op: "handed-off", Run: "r"}), exitcode.ClassBadInput, 2},
		{"ledger locked", wrap(errors.New("ledger file locked")), exitcode.ClassInternal, 1},
		{"memory incompatible", wrap(errdef.ErrMemoryIncompatible), exitcode.ClassMemoryIncompatible, 10},
		{"anything else", errors.New("boom"), exitcode.ClassInternal, 1},
	}
	for _, tt := range tests {
		c := classify(tt.err)
		if c != tt.class || c.Code() != tt.code {
			t.Errorf("%s: classify(%v) = %s (exit %d), want %s (exit %d)", tt.name, tt.err, c, c.Code(), tt.class, tt.code)
		}
	}
}
