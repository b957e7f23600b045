package errdef_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/errdef"
)

// TestNew checks that a finer sentinel keeps its text and matches its class
// only.
func TestNew(t *testing.T) {
	err := errdef.New(errdef.ErrSnapshotMissing, "rootfs diff corrupt")
	if err.Error() != "rootfs diff corrupt" {
		t.Errorf("Error() = %q", err)
	}
	if !errors.Is(fmt.Errorf("x: %w", err), errdef.ErrSnapshotMissing) || errors.Is(err, errdef.ErrBadInput) {
		t.Errorf("%v matches the wrong classes", err)
	}
	if got := errdef.Class(fmt.Errorf("x: %w", err)); !errors.Is(got, errdef.ErrSnapshotMissing) {
		t.Errorf("Class = %v, want snapshot-missing", got)
	}
}

// TestClassPrecedence pins which class wins when an error wraps several.
func TestClassPrecedence(t *testing.T) {
	tests := []struct {
		err  error
		want error
	}{
		{errors.New("plain"), nil},
		{nil, nil},
		{fmt.Errorf("%w: %w", errdef.ErrSnapshotMissing, errdef.ErrBadInput), errdef.ErrBadInput},
		{fmt.Errorf("%w: %w", errdef.ErrBadInput, errdef.ErrUntrusted), errdef.ErrUntrusted},
		{fmt.Errorf("%w: %w", errdef.ErrClaimConflict, errdef.ErrSuperseded), errdef.ErrSuperseded},
		{fmt.Errorf("%w: %w", errdef.ErrUntrusted, errdef.ErrRefused), errdef.ErrRefused},
		{fmt.Errorf("%w", errdef.ErrUsage), errdef.ErrUsage},
	}
	for _, tt := range tests {
		if got := errdef.Class(tt.err); !errors.Is(got, tt.want) {
			t.Errorf("Class(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A package wraps a class with context, or exports a finer sentinel of a
// class with New; a caller tells the classes apart with errors.Is, and
// Class names the one an error carries.
func ExampleClass() {
	errDiffCorrupt := errdef.New(errdef.ErrSnapshotMissing, "rootfs diff corrupt")
	err := fmt.Errorf("layer sha256:abc: %w", errDiffCorrupt)
	fmt.Println(err)
	fmt.Println(errors.Is(err, errdef.ErrSnapshotMissing), errdef.Class(err))
	// Output:
	// layer sha256:abc: rootfs diff corrupt
	// true snapshot content missing
}
