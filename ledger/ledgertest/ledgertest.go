// Package ledgertest is the one conformance suite of the run ledger
// (docs/design.md "The run ledger"): every backend — ledger/fake,
// ledger/bolt, ledger/etcd — runs Run against fresh instances of itself.
// The suite drives every row and every refusal of the transition table,
// in the design's order of precedence — the turn-3 rows too: run UIDs,
// purged runs never claimed, chain continuity, not-handed-off and copies,
// HandedOff, Received, Recalled, Unwound and Repinned — tombstones and
// purge, a gone holder, the fence only growing, retried Live, Release, and
// contended transitions from many goroutines; and it checks the backend
// against ledger.Apply over a long seeded walk of transitions.
//
// The suite needs one hook from the backend, MakeHolderGone: the backend's
// own meaning of "this resuming holder is gone" (the caller's judgement for
// ledger/bolt and ledger/fake; the claim lease's expiry for ledger/etcd).
package ledgertest

import (
	"testing"

	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// Backend is a ledger under test and its hook.
type Backend interface {
	ledger.Ledger

	// MakeHolderGone makes the holder of run's resuming record gone, as the
	// backend judges it, and returns the holder a claimer then passes as
	// ledger.ClaimRequest.GoneHolder. ledger/bolt and ledger/fake take the
	// caller's judgement: nothing changes in the ledger, and the hook
	// returns the record's holder (see CallerJudged). ledger/etcd expires
	// the claim's lease (and may return nil: it ignores GoneHolder).
	MakeHolderGone(t testing.TB, run string) *ledger.Holder
}

// CallerJudged returns a Backend over l whose MakeHolderGone is the
// caller's judgement of ledger/bolt and ledger/fake: it reads run's record
// and returns its holder (the suite fails when run is not resuming).
func CallerJudged(l ledger.Ledger) Backend { return callerJudged{l} }

type callerJudged struct{ ledger.Ledger }

func (b callerJudged) MakeHolderGone(t testing.TB, run string) *ledger.Holder {
	t.Helper()
	rec, err := b.Get(t.Context(), run)
	if err != nil {
		t.Fatalf("MakeHolderGone: %v", err)
	}
	if rec.State != ledger.StateResuming || rec.Holder == nil {
		t.Fatalf("MakeHolderGone: %s is not resuming", rec)
	}
	h := *rec.Holder
	return &h
}
