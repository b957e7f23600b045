package snapshot

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/errdefs"
)

// ErrRunNotFound is returned when neither the run lease nor the claim
// lease of the run exists. Class "bad-input" (internal/exitcode).
var ErrRunNotFound = errors.New("run not found")

// LeaseDeleter deletes leases.
type LeaseDeleter interface {
	// DeleteLease deletes a lease and waits for the garbage collection it
	// triggers (leases.SynchronousDelete). An absent lease is an error
	// wrapping errdefs.ErrNotFound.
	DeleteLease(ctx context.Context, id string) error
}

// Discard ends a run (docs/design.md "Materialize"): it
// deletes the run lease RunLease(run) and the claim lease ClaimLease(run),
// each synchronously, so the diff, the ref blob and the base content they
// alone held are collected when it returns. It returns the ids of the
// leases it deleted; when neither exists the error wraps ErrRunNotFound.
// An invalid run id wraps ErrInvalidRun.
func Discard(ctx context.Context, d LeaseDeleter, run string) ([]string, error) {
	if !ValidRunID(run) {
		return nil, fmt.Errorf("discard: run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters: %w", run, MaxRunIDLen, ErrInvalidRun)
	}
	var deleted []string
	for _, id := range []string{RunLease(run), ClaimLease(run)} {
		err := d.DeleteLease(ctx, id)
		switch {
		case err == nil:
			deleted = append(deleted, id)
		case errdefs.IsNotFound(err):
		default:
			return deleted, fmt.Errorf("discard: %w", err)
		}
	}
	if len(deleted) == 0 {
		return nil, fmt.Errorf("discard: no lease %s or %s: %w", RunLease(run), ClaimLease(run), ErrRunNotFound)
	}
	return deleted, nil
}
