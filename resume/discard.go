package resume

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// RunHost is what Discard deletes a run's remains with on this host (one
// containerd namespace), as host's roles: Leases.DeleteLease and
// LegacyClaim, Containers.RunContainers and DeleteContainer.
// runtime/containerd implements it.
type RunHost interface {
	host.Leases
	host.Containers
}

// DiscardOptions are the options of Discard: Force discards a live or
// resuming run too; Purge then purges the tombstone.
type DiscardOptions struct {
	Force bool
	Purge bool
}

// DiscardResult is what Discard did: the run, the state of its record
// afterwards (discarded, or purged) and what it deleted on this host (lease
// ids and container ids, in the order deleted). Its JSON form is the output
// of `discard --output json` (docs/design.md "CLI contract").
type DiscardResult struct {
	Run     string       `json:"run"`
	State   ledger.State `json:"state"`
	Deleted []string     `json:"deleted"`
	// Kept lists incarnations of the run left because their task runs
	// (not part of the JSON output).
	Kept []string `json:"-"`
}

// Discard ends run (docs/design.md "The run ledger"): the ledger's Discard
// transition (a tombstone keeping generation, ref and fence; a live or
// resuming run only with opt.Force), then with opt.Purge its Purge; then
// it deletes what the run holds on this host — its run lease (the layers,
// refs and base it alone held are collected), the previous release's claim
// lease, and every stopped incarnation of the run (a container labelled
// with the run that carries a generation label or that the claim lease
// names, and has no running task). A running incarnation is kept (a forced
// discard has fenced it out: it can no longer record a generation) and
// listed in Kept.
//
// Errors: an invalid run id wraps snapshot.ErrInvalidRun; a ledger refusal
// is its *ledger.Error (claim-conflict: live or resuming without Force);
// anything else is a ledger or daemon error naming the run. Nothing on the
// host is deleted unless the ledger transitions succeeded.
func Discard(ctx context.Context, l ledger.Ledger, h RunHost, run string, opt DiscardOptions) (*DiscardResult, error) {
	if !snapshot.ValidRunID(run) {
		return nil, fmt.Errorf("discard: run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters: %w", run, snapshot.MaxRunIDLen, snapshot.ErrInvalidRun)
	}
	rec, err := l.Discard(ctx, run, opt.Force)
	if err != nil {
		return nil, fmt.Errorf("discard run %q: %w", run, err)
	}
	if opt.Purge {
		if rec, err = l.Purge(ctx, run); err != nil {
			return nil, fmt.Errorf("discard run %q: purge: %w", run, err)
		}
	}
	res := &DiscardResult{Run: run, State: rec.State, Deleted: []string{}}

	lc, err := h.LegacyClaim(ctx, run)
	if err != nil {
		return res, fmt.Errorf("discard run %q: %w", run, err)
	}
	cs, err := h.RunContainers(ctx, run)
	if err != nil {
		return res, fmt.Errorf("discard run %q: %w", run, err)
	}
	for _, c := range cs {
		_, incarnation := c.Labels[snapshot.LabelGeneration]
		if !incarnation && (lc == nil || lc.Container != c.ID) {
			continue
		}
		if c.Running {
			res.Kept = append(res.Kept, c.ID)
			continue
		}
		if err := h.DeleteContainer(ctx, c.ID); err != nil {
			return res, fmt.Errorf("discard run %q: %w", run, err)
		}
		res.Deleted = append(res.Deleted, c.ID)
	}
	for _, id := range []string{snapshot.RunLease(run), snapshot.ClaimLease(run)} {
		err := h.DeleteLease(ctx, id)
		switch {
		case err == nil:
			res.Deleted = append(res.Deleted, id)
		case errors.Is(err, errdefs.ErrNotFound):
		default:
			return res, fmt.Errorf("discard run %q: %w", run, err)
		}
	}
	return res, nil
}
