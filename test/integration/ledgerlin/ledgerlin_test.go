package ledgerlin

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/ledger/fake"
)

// drive runs clients workloads of transitions each on runs against l.
func drive(t *testing.T, l ledger.Ledger, clients, transitions int, runs []string) []Op {
	h := NewHistory(nil)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			Workload{Client: i, Runs: runs, Transitions: transitions, Seed: 17}.Run(context.Background(), l, h)
		})
	}
	wg.Wait()
	return h.Ops()
}

// TestFakeIsLinearizable: the in-memory fake, one mutex around Apply, is
// linearizable under the workload.
func TestFakeIsLinearizable(t *testing.T) {
	ops := drive(t, fake.New(), 8, 150, []string{"r0", "r1", "r2"})
	st := Count(ops)
	t.Logf("fake: %s", st)
	if st.Transitions < 1000 || st.Succeeded < 300 || st.Refused < 100 {
		t.Fatalf("the workload is too thin: %s", st)
	}
	res, path, err := Check(ops, time.Minute, t.TempDir())
	if res != porcupine.Ok {
		t.Fatalf("fake ledger: %s (%s %v)", res, path, err)
	}
}

// racy is a broken ledger: read, Apply and write without holding the lock
// across them (a compare-and-swap without the compare).
type racy struct {
	*fake.Ledger
	mu      sync.Mutex
	records map[string]ledger.Record
}

func (r *racy) apply(op ledger.Op) (ledger.Record, error) {
	r.mu.Lock()
	cur, ok := r.records[op.RunID()]
	r.mu.Unlock()
	var p *ledger.Record
	if ok {
		p = &cur
	}
	runtime.Gosched()
	next, changed, err := ledger.Apply(p, op, time.Now())
	if err == nil && changed {
		r.mu.Lock()
		r.records[op.RunID()] = next
		r.mu.Unlock()
	}
	return next, err
}

func (r *racy) Get(_ context.Context, run string) (ledger.Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.records[run]
	if !ok {
		return ledger.Record{}, ledger.ErrNotFound
	}
	return rec, nil
}

func (r *racy) Suspended(_ context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
	return r.apply(req)
}

func (r *racy) Claim(_ context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	rec, err := r.apply(ledger.ClaimOp{ClaimRequest: req})
	if err != nil {
		return nil, err
	}
	return ledger.NewClaim(r, rec, nil, nil), nil
}

func (r *racy) Live(_ context.Context, run string, fence uint64, c ledger.Container) (ledger.Record, error) {
	return r.apply(ledger.LiveOp{Run: run, Fence: fence, Container: c})
}

func (r *racy) Release(_ context.Context, run string, fence uint64) (ledger.Record, error) {
	return r.apply(ledger.ReleaseOp{Run: run, Fence: fence})
}

func (r *racy) Discard(_ context.Context, run string, force bool) (ledger.Record, error) {
	return r.apply(ledger.DiscardOp{Run: run, Force: force})
}

func (r *racy) Purge(_ context.Context, run string) (ledger.Record, error) {
	return r.apply(ledger.PurgeOp{Run: run})
}

// TestCheckerCatchesRacyLedger: the same workload on a ledger that skips
// the compare of its compare-and-swap is not linearizable.
func TestCheckerCatchesRacyLedger(t *testing.T) {
	for attempt := range 3 {
		ops := drive(t, &racy{Ledger: fake.New(), records: map[string]ledger.Record{}}, 8, 100, []string{"r0", "r1"})
		res, _, _ := Check(ops, time.Minute, "")
		t.Logf("attempt %d: %s: %s", attempt, Count(ops), res)
		if res == porcupine.Illegal {
			return
		}
	}
	t.Fatal("the checker did not catch a ledger that skips its compare")
}

// TestModelRejects checks the model on small hand-made histories.
func TestModelRejects(t *testing.T) {
	ref := digest.FromString("ref")
	ctr := ledger.Container{Host: "h", Namespace: "n", ID: "c"}
	sus := ledger.SuspendRequest{Run: "r", Generation: 1, Ref: ref, Container: ctr, Created: created}
	suspended := ledger.Record{Run: "r", Generation: 1, Ref: ref, State: ledger.StateSuspended, SuspendedBy: &ledger.SuspendedBy{Container: ctr, Created: created, Generation: 1}}
	claim := func(i int) *ledger.ClaimRequest {
		return &ledger.ClaimRequest{Run: "r", Generation: 1, Ref: ref, Holder: ledger.Holder{Container: ledger.Container{Host: "h", Namespace: "n", ID: fmt.Sprint("x", i)}, PID: i}}
	}
	claimed := func(i int, fence uint64) *ledger.Record {
		r := suspended.Clone()
		r.State, r.Holder, r.Fence = ledger.StateResuming, &claim(i).Holder, fence
		return &r
	}
	lived := func(i int, fence uint64) *ledger.Record {
		r := *claimed(i, fence)
		r.State, r.Holder = ledger.StateLive, &ledger.Holder{Container: claim(i).Holder.Container}
		return &r
	}
	judged := func(c *ledger.ClaimRequest, gone ledger.Holder) *ledger.ClaimRequest {
		c.GoneHolder = &gone
		return c
	}
	discarded := ledger.Record{Run: "r", Generation: 1, Ref: ref, State: ledger.StateDiscarded}
	purged := ledger.Record{Run: "r", Generation: 1, Ref: ref, State: ledger.StatePurged}
	op := func(client int, in Input, out Output, call, ret int64) Op {
		return Op{Client: client, Input: in, Output: out, Call: call, Return: ret}
	}
	for _, tc := range []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"one claim", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Record: &suspended}, 0, 1),
			op(1, Input{Kind: KindClaim, Run: "r", Claim: claim(1)}, Output{Record: claimed(1, 1)}, 2, 3),
		}, porcupine.Ok},
		{"two claims of one fence", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Record: &suspended}, 0, 1),
			op(1, Input{Kind: KindClaim, Run: "r", Claim: claim(1)}, Output{Record: claimed(1, 1)}, 2, 5),
			op(2, Input{Kind: KindClaim, Run: "r", Claim: claim(2)}, Output{Record: claimed(2, 1)}, 3, 6),
		}, porcupine.Illegal},
		// The judgement is in the history (turn 3): the caller's GoneHolder,
		// or the backend's own.
		{"a claim over a gone holder takes fence + 1", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Record: &suspended}, 0, 1),
			op(1, Input{Kind: KindClaim, Run: "r", Claim: claim(1)}, Output{Record: claimed(1, 1)}, 2, 3),
			op(2, Input{Kind: KindClaim, Run: "r", Claim: judged(claim(2), claim(1).Holder)}, Output{Record: claimed(2, 2)}, 4, 5),
		}, porcupine.Ok},
		{"a claim over a holder the backend judged gone", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Record: &suspended}, 0, 1),
			op(1, Input{Kind: KindClaim, Run: "r", Claim: claim(1)}, Output{Record: claimed(1, 1)}, 2, 3),
			op(2, Input{Kind: KindClaim, Run: "r", Claim: claim(2), Judged: JudgedByBackend}, Output{Record: claimed(2, 2)}, 4, 5),
		}, porcupine.Ok},
		{"a resuming holder replaced without a judgement", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Record: &suspended}, 0, 1),
			op(1, Input{Kind: KindClaim, Run: "r", Claim: claim(1)}, Output{Record: claimed(1, 1)}, 2, 3),
			op(2, Input{Kind: KindClaim, Run: "r", Claim: claim(2)}, Output{Record: claimed(2, 2)}, 4, 5),
		}, porcupine.Illegal},
		{"a live holder replaced without a take-over", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Record: &suspended}, 0, 1),
			op(1, Input{Kind: KindClaim, Run: "r", Claim: claim(1)}, Output{Record: claimed(1, 1)}, 2, 3),
			op(1, Input{Kind: KindLive, Run: "r", Fence: 1, Container: claim(1).Holder.Container}, Output{Record: lived(1, 1)}, 4, 5),
			op(2, Input{Kind: KindClaim, Run: "r", Claim: claim(2)}, Output{Record: claimed(2, 2)}, 6, 7),
		}, porcupine.Illegal},
		{"a purged run's generation claimed", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Record: &suspended}, 0, 1),
			op(0, Input{Kind: KindDiscard, Run: "r"}, Output{Record: &discarded}, 2, 3),
			op(0, Input{Kind: KindPurge, Run: "r"}, Output{Record: &purged}, 4, 5),
			op(1, Input{Kind: KindClaim, Run: "r", Claim: claim(1)}, Output{Record: claimed(1, 1)}, 6, 7),
		}, porcupine.Illegal},
		{"a purged run's claim refused", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Record: &suspended}, 0, 1),
			op(0, Input{Kind: KindDiscard, Run: "r"}, Output{Record: &discarded}, 2, 3),
			op(0, Input{Kind: KindPurge, Run: "r"}, Output{Record: &purged}, 4, 5),
			op(1, Input{Kind: KindClaim, Run: "r", Claim: claim(1)}, Output{Class: errdef.ErrSuperseded.Error(), Record: &purged}, 6, 7),
		}, porcupine.Ok},
		{"a stale read", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Record: &suspended}, 0, 1),
			op(1, Input{Kind: KindGet, Run: "r"}, Output{}, 2, 3),
		}, porcupine.Illegal},
		{"an unknown suspend seen later", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Unknown: true}, 0, 1),
			op(1, Input{Kind: KindGet, Run: "r"}, Output{}, 2, 3),
			op(1, Input{Kind: KindGet, Run: "r"}, Output{Found: true, Record: &suspended}, 4, 5),
		}, porcupine.Ok},
		{"an unknown suspend unseen, then seen, then unseen", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Unknown: true}, 0, 1),
			op(1, Input{Kind: KindGet, Run: "r"}, Output{Found: true, Record: &suspended}, 2, 3),
			op(1, Input{Kind: KindGet, Run: "r"}, Output{}, 4, 5),
		}, porcupine.Illegal},
		{"a refusal carrying another record", []Op{
			op(0, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Record: &suspended}, 0, 1),
			op(1, Input{Kind: KindSuspended, Run: "r", Suspend: &sus}, Output{Class: errdef.ErrClaimConflict.Error(), Record: claimed(1, 1)}, 2, 3),
		}, porcupine.Illegal},
	} {
		res, _, _ := Check(tc.ops, 10*time.Second, "")
		if res != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, res, tc.want)
		}
	}
}

// antiReplayOff is ledger.Apply with anti-replay turned off: a claim of a
// generation below the recorded one, or of a discarded or purged run, is
// applied as if the record were suspended at that generation.
func antiReplayOff(cur *ledger.Record, op ledger.Op, now time.Time) (ledger.Record, bool, error) {
	if c, ok := op.(ledger.ClaimOp); ok && cur != nil &&
		(cur.Generation > c.Generation || cur.State == ledger.StateDiscarded || cur.State == ledger.StatePurged) {
		r := cur.Clone()
		r.Generation, r.Ref, r.State, r.Holder = c.Generation, c.Ref, ledger.StateSuspended, nil
		return ledger.Apply(&r, op, now)
	}
	return ledger.Apply(cur, op, now)
}

// liveStolen is ledger.Apply with live claims stolen: every claim of a
// live record is applied as a take-over.
func liveStolen(cur *ledger.Record, op ledger.Op, now time.Time) (ledger.Record, bool, error) {
	if c, ok := op.(ledger.ClaimOp); ok && cur != nil && cur.State == ledger.StateLive {
		c.TakeOver = true
		op = c
	}
	return ledger.Apply(cur, op, now)
}

// TestCheckerCatchesMutatedApply: the fake ledger running a mutated
// transition table (injected through fake.WithApply, a test-only seam: the
// binary links neither) gives histories the model refuses, for both
// mutations the conformance suite catches — the model has a table and
// invariants of its own and does not step ledger.Apply. Each mutation is
// also refused by the invariants alone.
func TestCheckerCatchesMutatedApply(t *testing.T) {
	for name, mutated := range map[string]fake.ApplyFunc{"anti-replay off": antiReplayOff, "live claims stolen": liveStolen} {
		t.Run(name, func(t *testing.T) {
			caught := false
			for attempt := range 3 {
				ops := drive(t, fake.New(fake.WithApply(mutated)), 8, 150, []string{"r0", "r1", "r2"})
				res, _, _ := Check(ops, time.Minute, "")
				t.Logf("attempt %d: %s: %s", attempt, Count(ops), res)
				if res == porcupine.Illegal {
					caught = true
					break
				}
			}
			if !caught {
				t.Fatalf("the checker did not catch a ledger whose table has %s", name)
			}
			// The same mutation through the history, judged by the
			// invariants alone (no table): some success breaks one.
			n := 0
			for range 3 {
				if n = invariantBreaks(drive(t, fake.New(fake.WithApply(mutated)), 8, 150, []string{"r0", "r1", "r2"})); n > 0 {
					break
				}
			}
			if n == 0 {
				t.Fatalf("no success of the %s histories breaks an invariant", name)
			}
			t.Logf("%d successes break an invariant", n)
		})
	}
}

// TestApplyKeepsInvariants: the real table breaks no invariant in the
// workload's histories.
func TestApplyKeepsInvariants(t *testing.T) {
	for range 5 {
		if n := invariantBreaks(drive(t, fake.New(), 8, 150, []string{"r0", "r1", "r2"})); n != 0 {
			t.Fatalf("%d successes of ledger.Apply break an invariant", n)
		}
	}
}

// invariantBreaks replays the history's successes on the record known
// before each and counts those that break an invariant. It needs no table,
// only what the history says: a call that overlaps no other call of its
// run (sequential) reports the record after it (a success's record, the
// record a refusal carried, a Get's); a call that overlaps another makes
// the record unknown until the next sequential report.
func invariantBreaks(ops []Op) int {
	sorted := append([]Op(nil), ops...)
	slices.SortFunc(sorted, func(a, b Op) int { return cmp.Compare(a.Return, b.Return) })
	known := map[string]*ledger.Record{} // by run: the record now, nil when unknown
	n := 0
	for _, op := range sorted {
		run, out := op.Input.Run, op.Output
		if out.Unknown || !sequential(sorted, op) {
			known[run] = nil
			continue
		}
		switch {
		case op.Input.Kind == KindGet:
			known[run] = nil
			if out.Found {
				known[run] = out.Record
			}
			continue
		case out.Class != "":
			known[run] = out.Record
			continue
		}
		if cur := known[run]; cur != nil {
			if err := invariants(cur, op.Input, out.Record); err != nil {
				if testing.Verbose() {
					fmt.Printf("invariant broken by %s from %s: %v\n", describe(op.Input, out), cur, err)
				}
				n++
			}
		}
		known[run] = nil
		if out.Record != nil && out.Record.Run != "" {
			known[run] = out.Record
		}
	}
	return n
}

// sequential reports whether op overlaps no other call of its run, so that
// the record before it is the one the previous call of the run returned.
func sequential(ops []Op, op Op) bool {
	for _, o := range ops {
		if o.Input.Run == op.Input.Run && (o.Client != op.Client || o.Seq != op.Seq) && o.Call < op.Return && op.Call < o.Return {
			return false
		}
	}
	return true
}
