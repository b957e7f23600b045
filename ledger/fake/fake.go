// Package fake is an in-memory ledger.Ledger for tests of the packages that
// use the run ledger (resume, suspend, cmd). It runs the one
// transition table, ledger.Apply, under a mutex, takes the caller's
// judgement of a gone holder as ledger/bolt does (docs/design.md "The run
// ledger"), and passes the conformance suite of ledger/ledgertest.
//
// Unlike ledger/bolt, it observes lost claims: a Claim's Lost channel is
// closed when a later transition changes the run's fence or discards or
// purges it before the claim went Live or was released.
package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// Option configures a Ledger.
type Option func(*Ledger)

// WithClock sets the clock stamping each record's Updated; the default is
// time.Now.
func WithClock(now func() time.Time) Option {
	return func(l *Ledger) { l.now = now }
}

// ApplyFunc is the signature of ledger.Apply.
type ApplyFunc func(cur *ledger.Record, op ledger.Op, now time.Time) (ledger.Record, bool, error)

// WithApply replaces the transition table the ledger runs (default
// ledger.Apply): the seam through which a test injects a mutated table, to
// see that a check over the ledger's history catches it (the
// linearizability check's mutation test). The binary never links this
// package.
func WithApply(apply ApplyFunc) Option {
	return func(l *Ledger) { l.applyFn = apply }
}

// Ledger is an in-memory ledger.Ledger, safe for concurrent use. The zero
// value is not usable; call New.
type Ledger struct {
	now     func() time.Time
	applyFn ApplyFunc

	mu      sync.Mutex
	closed  bool
	records map[string]ledger.Record
	claims  map[string][]pending // outstanding claims per run
}

type pending struct {
	fence uint64
	lost  chan struct{}
}

var _ ledger.Ledger = (*Ledger)(nil)

// New returns an empty in-memory ledger.
func New(opts ...Option) *Ledger {
	l := &Ledger{now: time.Now, applyFn: ledger.Apply, records: map[string]ledger.Record{}, claims: map[string][]pending{}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// errClosed is returned by every call after Close.
var errClosed = errors.New("fake ledger: closed")

func (l *Ledger) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake ledger: %w", err)
	}
	if l.closed {
		return errClosed
	}
	return nil
}

// apply runs op under l.mu, stores the result and returns the record after
// the transition.
func (l *Ledger) apply(ctx context.Context, op ledger.Op) (ledger.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.begin(ctx); err != nil {
		return ledger.Record{}, err
	}
	var before *ledger.Record
	if r, ok := l.records[op.RunID()]; ok {
		before = &r
	}
	next, changed, err := l.applyFn(before, op, l.now())
	if err != nil || !changed {
		return next, err
	}
	l.records[op.RunID()] = next.Clone()
	l.settleClaims(op, next)
	return next, nil
}

// settleClaims closes the Lost channel of every outstanding claim of the run
// that next fences out, and forgets the claims next ends (Live, Release).
func (l *Ledger) settleClaims(op ledger.Op, next ledger.Record) {
	run := op.RunID()
	var keep []pending
	for _, p := range l.claims[run] {
		switch {
		case p.fence != next.Fence || next.State == ledger.StateDiscarded || next.State == ledger.StatePurged:
			close(p.lost)
		case next.State == ledger.StateResuming:
			keep = append(keep, p)
		}
		// live or suspended with the claim's fence: the claim ended by its
		// own Live or Release.
	}
	if len(keep) == 0 {
		delete(l.claims, run)
	} else {
		l.claims[run] = keep
	}
}

// Get returns run's record; ledger.ErrNotFound when there is none.
func (l *Ledger) Get(ctx context.Context, run string) (ledger.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.begin(ctx); err != nil {
		return ledger.Record{}, err
	}
	r, ok := l.records[run]
	if !ok {
		return ledger.Record{}, fmt.Errorf("fake ledger: run %q: %w", run, ledger.ErrNotFound)
	}
	return r.Clone(), nil
}

// List returns every record, purged ones included, sorted by run id.
func (l *Ledger) List(ctx context.Context) ([]ledger.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.begin(ctx); err != nil {
		return nil, err
	}
	out := make([]ledger.Record, 0, len(l.records))
	for _, r := range l.records {
		out = append(out, r.Clone())
	}
	slices.SortFunc(out, func(a, b ledger.Record) int { return strings.Compare(a.Run, b.Run) })
	return out, nil
}

// Suspended is ledger.Ledger.Suspended.
func (l *Ledger) Suspended(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Claim is ledger.Ledger.Claim; req.GoneHolder is the caller's judgement,
// compared with the record's holder under the lock.
func (l *Ledger) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.begin(ctx); err != nil {
		return nil, err
	}
	var before *ledger.Record
	if r, ok := l.records[req.Run]; ok {
		before = &r
	}
	op := ledger.ClaimOp{ClaimRequest: req, HolderGone: ledger.JudgedGone(req.GoneHolder, before)}
	next, _, err := l.applyFn(before, op, l.now())
	if err != nil {
		return nil, err
	}
	l.records[req.Run] = next.Clone()
	l.settleClaims(op, next)
	lost := make(chan struct{})
	l.claims[req.Run] = append(l.claims[req.Run], pending{fence: next.Fence, lost: lost})
	return ledger.NewClaim(l, next, ledger.Replaced(before), lost), nil
}

// Live is ledger.Ledger.Live.
func (l *Ledger) Live(ctx context.Context, run string, fence uint64, container ledger.Container) (ledger.Record, error) {
	return l.apply(ctx, ledger.LiveOp{Run: run, Fence: fence, Container: container})
}

// Release is ledger.Ledger.Release.
func (l *Ledger) Release(ctx context.Context, run string, fence uint64) (ledger.Record, error) {
	return l.apply(ctx, ledger.ReleaseOp{Run: run, Fence: fence})
}

// Discard is ledger.Ledger.Discard.
func (l *Ledger) Discard(ctx context.Context, run string, force bool) (ledger.Record, error) {
	return l.apply(ctx, ledger.DiscardOp{Run: run, Force: force})
}

// Purge is ledger.Ledger.Purge.
func (l *Ledger) Purge(ctx context.Context, run string) (ledger.Record, error) {
	return l.apply(ctx, ledger.PurgeOp{Run: run})
}

// HandedOff is ledger.Ledger.HandedOff.
func (l *Ledger) HandedOff(ctx context.Context, req ledger.HandOffRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Received is ledger.Ledger.Received.
func (l *Ledger) Received(ctx context.Context, req ledger.ReceiveRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Recalled is ledger.Ledger.Recalled.
func (l *Ledger) Recalled(ctx context.Context, req ledger.RecallRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Unwound is ledger.Ledger.Unwound.
func (l *Ledger) Unwound(ctx context.Context, req ledger.UnwindRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Repinned is ledger.Ledger.Repinned.
func (l *Ledger) Repinned(ctx context.Context, req ledger.RepinRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Close makes every later call fail; records are dropped.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return nil
}
