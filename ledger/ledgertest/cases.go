package ledgertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// cases are the suite's subtests, in the order of the design's table.
var cases = []testCase{
	{"Empty", testEmpty},
	{"Invalid", testInvalid},
	{"Suspended1", testSuspended1},
	{"Suspended1Keep", testSuspended1Keep},
	{"Suspended1Taken", testSuspended1Taken},
	{"Suspended1Purged", testSuspended1Purged},
	{"SuspendedNext", testSuspendedNext},
	{"SuspendedNextKeep", testSuspendedNextKeep},
	{"SuspendedNextRefused", testSuspendedNextRefused},
	{"Claim", testClaim},
	{"ClaimRefusalOrder", testClaimRefusalOrder},
	{"ClaimGoneHolder", testClaimGoneHolder},
	{"ClaimGoneHolderStale", testClaimGoneHolderStale},
	{"ClaimTakeOver", testClaimTakeOver},
	{"Live", testLive},
	{"LiveRefused", testLiveRefused},
	{"Release", testRelease},
	{"ReleaseNoChange", testReleaseNoChange},
	{"Discard", testDiscard},
	{"DiscardForce", testDiscardForce},
	{"Purge", testPurge},
	{"PurgeRefused", testPurgeRefused},
	{"PurgedRunIDIsFree", testPurgedRunIDIsFree},
	{"List", testList},
	{"FenceOnlyGrows", testFenceOnlyGrows},
	{"Walk", testWalk},
	{"ContendedClaim", testContendedClaim},
	{"ContendedSuspended1", testContendedSuspended1},
	{"ContendedTakeOver", testContendedTakeOver},
	{"ContendedRuns", testContendedRuns},
}

func testEmpty(t *testing.T, s *suite) {
	_, err := s.b.Get(s.ctx(), run)
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Get of an empty ledger: want ErrNotFound, got %v", err)
	}
	recs, err := s.b.List(s.ctx())
	if err != nil || len(recs) != 0 {
		t.Fatalf("List of an empty ledger: %v, %v", recs, err)
	}
	if _, err := s.b.Release(s.ctx(), run, 1); err != nil {
		t.Fatalf("Release without a record: %v", err)
	}
	if _, ok := s.get(); ok {
		t.Fatal("Release created a record")
	}
}

func testInvalid(t *testing.T, s *suite) {
	s.atSuspended(1)
	before := s.mustGet()
	h := resumer("host-r", 1)
	for name, call := range map[string]func() error{
		"claim with no run": func() error {
			_, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Generation: 1, Ref: ref(1), Holder: h})
			return err
		},
		"claim of generation 0": func() error {
			_, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Run: run, Ref: ref(1), Holder: h})
			return err
		},
		"claim with no ref": func() error {
			_, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Run: run, Generation: 1, Holder: h})
			return err
		},
		"claim with no holder container": func() error {
			_, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Run: run, Generation: 1, Ref: ref(1), Holder: ledger.Holder{PID: 1}})
			return err
		},
		"suspended of generation 0": func() error {
			_, err := s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: run, Ref: ref(1), Container: ctr0})
			return err
		},
		"suspended with a slash in the run": func() error {
			_, err := s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: "a/b", Generation: 1, Ref: ref(1), Container: ctr0})
			return err
		},
		"live with fence 0": func() error {
			_, err := s.b.Live(s.ctx(), run, 0, ctrB)
			return err
		},
	} {
		err := call()
		if !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", name, err)
		}
	}
	if got := s.mustGet(); !Equal(got, before) {
		t.Fatalf("invalid requests changed the record: %s", js(got))
	}
	ctx, cancel := contextCanceled(s)
	defer cancel()
	if _, err := s.b.Discard(ctx, run, true); err == nil {
		t.Fatal("Discard with a canceled context: no error")
	}
	if got := s.mustGet(); !Equal(got, before) {
		t.Fatalf("a canceled Discard changed the record: %s", js(got))
	}
}

func testSuspended1(t *testing.T, s *suite) {
	rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctr0, Created: created})
	want := ledger.Record{
		Run: run, Generation: 1, Ref: ref(1), State: ledger.StateSuspended,
		SuspendedBy: &ledger.SuspendedBy{Container: ctr0, Created: created, Generation: 1},
		Fence:       0, Updated: rec.Updated,
	}
	if !Equal(rec, want) {
		t.Fatalf("got %s\nwant %s", js(rec), js(want))
	}
	if rec.Updated.IsZero() {
		t.Fatal("updated not set")
	}
}

func testSuspended1Keep(t *testing.T, s *suite) {
	rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctr0, Created: created, Keep: true})
	want := ledger.Record{
		Run: run, Generation: 1, Ref: ref(1), State: ledger.StateLive,
		Holder:      &ledger.Holder{Container: ctr0},
		SuspendedBy: &ledger.SuspendedBy{Container: ctr0, Created: created, Generation: 1},
		Fence:       1, Updated: rec.Updated,
	}
	if !Equal(rec, want) {
		t.Fatalf("got %s\nwant %s", js(rec), js(want))
	}
}

func testSuspended1Taken(t *testing.T, s *suite) {
	for _, st := range []start{startSuspended(1), startSuspended(3), startResuming(2), startLive(1), startDiscarded(2), startTombstone()} {
		t.Run(st.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed := st.build(s)
			// The same container again (a rerun) and another one: both 8.
			for _, c := range []ledger.Container{ctr0, {Host: "host-z", Namespace: "ns", ID: "other"}} {
				_, err := s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: c, Created: created})
				s.refused(err, errdef.ErrClaimConflict, before, existed)
			}
		})
	}
}

func testSuspended1Purged(t *testing.T, s *suite) {
	purged := s.atPurged(3)
	if purged.Fence == 0 {
		t.Fatalf("setup: purged record with fence 0: %s", js(purged))
	}
	rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctrB, Created: created})
	if rec.Generation != 1 || rec.State != ledger.StateSuspended || rec.Fence != purged.Fence {
		t.Fatalf("Suspended(1) from purged %s: got %s, want suspended at 1 with fence %d", js(purged), js(rec), purged.Fence)
	}
	s.discard(false)
	s.purge()
	rec = s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctrB, Created: created, Keep: true})
	if rec.State != ledger.StateLive || rec.Fence != purged.Fence+1 || rec.Holder == nil || rec.Holder.Container != ctrB {
		t.Fatalf("Suspended(1, keep) from purged: got %s, want live held by %s with fence %d", js(rec), ctrB, purged.Fence+1)
	}
}

func testSuspendedNext(t *testing.T, s *suite) {
	live, c := s.atLive(1)
	rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: 2, Ref: ref(2), Container: ctrB, Created: created, Fence: c.Fence()})
	want := ledger.Record{
		Run: run, Generation: 2, Ref: ref(2), State: ledger.StateSuspended,
		SuspendedBy: &ledger.SuspendedBy{Container: ctrB, Created: created, Fence: c.Fence(), Generation: 2},
		Fence:       live.Fence, Updated: rec.Updated,
	}
	if !Equal(rec, want) {
		t.Fatalf("got %s\nwant %s", js(rec), js(want))
	}
}

func testSuspendedNextKeep(t *testing.T, s *suite) {
	live, c := s.atLive(2)
	for g := uint64(3); g <= 5; g++ {
		rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: g, Ref: ref(g), Container: ctrB, Created: created, Fence: c.Fence(), Keep: true})
		want := ledger.Record{
			Run: run, Generation: g, Ref: ref(g), State: ledger.StateLive, Holder: live.Holder,
			SuspendedBy: &ledger.SuspendedBy{Container: ctrB, Created: created, Fence: c.Fence(), Generation: g},
			Fence:       live.Fence, Updated: rec.Updated,
		}
		if !Equal(rec, want) {
			t.Fatalf("generation %d: got %s\nwant %s", g, js(rec), js(want))
		}
	}
}

func testSuspendedNextRefused(t *testing.T, s *suite) {
	req := func(fence uint64) ledger.SuspendRequest {
		return ledger.SuspendRequest{Run: run, Generation: 3, Ref: ref(3), Container: ctrB, Created: created, Fence: fence}
	}
	type row struct {
		name  string
		build func(s *suite) (ledger.Record, bool, ledger.SuspendRequest)
	}
	liveAt2 := func(mut func(r *ledger.SuspendRequest)) func(s *suite) (ledger.Record, bool, ledger.SuspendRequest) {
		return func(s *suite) (ledger.Record, bool, ledger.SuspendRequest) {
			rec, c := s.atLive(2)
			r := req(c.Fence())
			mut(&r)
			return rec, true, r
		}
	}
	rows := []row{
		{"another fence", liveAt2(func(r *ledger.SuspendRequest) { r.Fence++ })},
		{"another host", liveAt2(func(r *ledger.SuspendRequest) { r.Container.Host = "host-z" })},
		{"another namespace", liveAt2(func(r *ledger.SuspendRequest) { r.Container.Namespace = "ns2" })},
		{"another container id", liveAt2(func(r *ledger.SuspendRequest) { r.Container.ID = "inc-z" })},
		{"generation N+2", liveAt2(func(r *ledger.SuspendRequest) { r.Generation, r.Ref = 4, ref(4) })},
		{"generation N", liveAt2(func(r *ledger.SuspendRequest) { r.Generation, r.Ref = 2, ref(2) })},
		{"no record", func(*suite) (ledger.Record, bool, ledger.SuspendRequest) { return ledger.Record{}, false, req(1) }},
		{"suspended", func(s *suite) (ledger.Record, bool, ledger.SuspendRequest) { return s.atSuspended(2), true, req(1) }},
		{"resuming", func(s *suite) (ledger.Record, bool, ledger.SuspendRequest) {
			rec, c := s.atResuming(2)
			r := req(c.Fence())
			r.Container = rec.Holder.Container
			return rec, true, r
		}},
		{"discarded", func(s *suite) (ledger.Record, bool, ledger.SuspendRequest) {
			_, c := s.atLive(2)
			return s.discard(true), true, req(c.Fence())
		}},
		{"purged", func(s *suite) (ledger.Record, bool, ledger.SuspendRequest) {
			_, c := s.atLive(2)
			s.discard(true)
			return s.purge(), true, req(c.Fence())
		}},
		{"fenced out by a take-over", func(s *suite) (ledger.Record, bool, ledger.SuspendRequest) {
			_, c := s.atLive(2)
			t2 := s.claim(ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-t", 1), TakeOver: true})
			return s.live(t2, ledger.Container{Host: "host-t", Namespace: "ns", ID: "inc-t"}), true, req(c.Fence())
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed, rq := r.build(s)
			_, err := s.b.Suspended(s.ctx(), rq)
			s.refused(err, errdef.ErrClaimConflict, before, existed)
		})
	}
}

func testClaim(t *testing.T, s *suite) {
	h := resumer("host-r", 7)
	type row struct {
		st       start
		gen      uint64
		takeOver bool
	}
	// A generation this ledger never recorded is claimed as a copy, with
	// its chain (turn 3: a purged run is never claimed, ClaimPurged).
	rows := []row{
		{startNone(), 1, false},
		{startNone(), 3, false}, // came back from another ledger
		{startSuspended(2), 2, false},
		{startSuspended(2), 3, false},
		{startSuspended(2), 3, true},
		{startSuspended(2), 4, false},
		{startLive(2), 2, true},
		{startLive(2), 3, true},
	}
	for _, r := range rows {
		t.Run(fmt.Sprintf("%s/generation %d/takeOver %v", r.st.name, r.gen, r.takeOver), func(t *testing.T) {
			s := s.fresh(t)
			before, existed := r.st.build(s)
			req := ledger.ClaimRequest{Run: run, Generation: r.gen, Ref: ref(r.gen), Holder: h, TakeOver: r.takeOver}
			if !existed || before.Generation != r.gen {
				req = copyOf(req)
			}
			c := s.claim(req)
			rec := c.Record()
			want := ledger.Record{Run: run, Generation: r.gen, Ref: ref(r.gen), State: ledger.StateResuming, Holder: &h, Fence: before.Fence + 1, Updated: rec.Updated}
			if existed && before.Generation == r.gen {
				want.SuspendedBy = before.SuspendedBy
			}
			if !Equal(rec, want) {
				t.Fatalf("from %s: got %s\nwant %s", js(before), js(rec), js(want))
			}
			var wantReplaced *ledger.Holder
			if before.State == ledger.StateLive {
				wantReplaced = before.Holder
			}
			if got := c.Replaced(); fmt.Sprint(got) != fmt.Sprint(wantReplaced) {
				t.Fatalf("Replaced() = %v, want %v", got, wantReplaced)
			}
			s.notLost(c)
		})
	}
}

// testClaimRefusalOrder: in the design's order — a newer generation or a
// discarded run is superseded; this generation with another ref is forked;
// live or resuming with a live holder is claim-conflict — each checked
// where a later rule would also apply.
func testClaimRefusalOrder(t *testing.T, s *suite) {
	type row struct {
		st    start
		req   ledger.ClaimRequest
		class error
	}
	h := resumer("host-x", 9)
	var rows []row
	for _, takeOver := range []bool{false, true} {
		req := func(gen uint64, fork bool) ledger.ClaimRequest {
			r := ref(gen)
			if fork {
				r = forkRef(gen)
			}
			return ledger.ClaimRequest{Run: run, Generation: gen, Ref: r, Holder: h, TakeOver: takeOver}
		}
		// ahead is a claim of a generation beyond the record's: a copy
		// with its chain, so that only the rule under test refuses it.
		ahead := func(gen uint64) ledger.ClaimRequest { return copyOf(req(gen, false)) }
		rows = append(rows,
			// superseded: a newer generation, in every state that has one,
			// even with another ref (there is no generation N to fork).
			row{startSuspended(3), req(2, false), errdef.ErrSuperseded},
			row{startSuspended(3), req(2, true), errdef.ErrSuperseded},
			row{startResuming(3), req(1, true), errdef.ErrSuperseded},
			row{startLive(3), req(2, false), errdef.ErrSuperseded},
			// superseded: discarded, whatever the generation or ref.
			row{startDiscarded(2), req(2, false), errdef.ErrSuperseded},
			row{startDiscarded(2), req(2, true), errdef.ErrSuperseded},
			row{startDiscarded(2), req(3, false), errdef.ErrSuperseded},
			row{startDiscarded(2), req(1, false), errdef.ErrSuperseded},
			row{startTombstone(), req(1, false), errdef.ErrSuperseded},
			// forked: generation N with another ref, before claim-conflict.
			row{startSuspended(2), req(2, true), errdef.ErrForked},
			row{startResuming(2), req(2, true), errdef.ErrForked},
			row{startLive(2), req(2, true), errdef.ErrForked},
			// claim-conflict: resuming with a live holder (take-over or not),
			// at N and below.
			row{startResuming(2), req(2, false), errdef.ErrClaimConflict},
			row{startResuming(2), ahead(3), errdef.ErrClaimConflict},
		)
		if !takeOver {
			rows = append(rows,
				row{startLive(2), req(2, false), errdef.ErrClaimConflict},
				row{startLive(2), ahead(3), errdef.ErrClaimConflict},
			)
		}
	}
	for _, r := range rows {
		t.Run(fmt.Sprintf("%s/generation %d/ref %s/takeOver %v", r.st.name, r.req.Generation, r.req.Ref.Encoded()[:8], r.req.TakeOver), func(t *testing.T) {
			s := s.fresh(t)
			before, existed := r.st.build(s)
			_, err := s.b.Claim(s.ctx(), r.req)
			e := s.refused(err, r.class, before, existed)
			if errors.Is(r.class, errdef.ErrSuperseded) && e.Record.State != ledger.StateDiscarded && e.Record.Generation <= r.req.Generation {
				t.Fatalf("superseded names %s, neither a discard nor a newer generation", js(*e.Record))
			}
		})
	}
}

func testClaimGoneHolder(t *testing.T, s *suite) {
	for _, gen := range []uint64{2, 3} { // the same generation, and a newer one
		t.Run(fmt.Sprintf("generation %d", gen), func(t *testing.T) {
			s := s.fresh(t)
			resuming, a := s.atResuming(2)
			gone := s.b.MakeHolderGone(t, run)
			h := resumer("host-b", 2)
			req := ledger.ClaimRequest{Run: run, Generation: gen, Ref: ref(gen), Holder: h, GoneHolder: gone}
			if gen != 2 {
				req = copyOf(req)
			}
			b := s.claim(req)
			if b.Fence() != resuming.Fence+1 || b.Record().State != ledger.StateResuming || *b.Record().Holder != h {
				t.Fatalf("claim over a gone holder: %s", js(b.Record()))
			}
			if got := b.Replaced(); got == nil || *got != *resuming.Holder {
				t.Fatalf("Replaced() = %v, want the gone holder %s", got, resuming.Holder)
			}
			// The gone holder is fenced out: its Live is 8, its Release
			// changes nothing.
			before := s.mustGet()
			_, err := a.Live(s.ctx(), resuming.Holder.Container)
			s.refused(err, errdef.ErrClaimConflict, before, true)
			if err := a.Release(s.ctx()); err != nil {
				t.Fatalf("Release of a fenced-out claim: %v", err)
			}
			if got := s.mustGet(); !Equal(got, before) {
				t.Fatalf("Release of a fenced-out claim changed %s to %s", js(before), js(got))
			}
			s.live(b, h.Container)
		})
	}
}

func testClaimGoneHolderStale(t *testing.T, s *suite) {
	// A judgement of a holder that is not the record's: 8.
	resuming, _ := s.atResuming(2)
	for name, mut := range map[string]func(h *ledger.Holder){
		"pid":       func(h *ledger.Holder) { h.PID++ },
		"start":     func(h *ledger.Holder) { h.Start += "x" },
		"boot":      func(h *ledger.Holder) { h.Boot += "x" },
		"host":      func(h *ledger.Holder) { h.Host += "x" },
		"container": func(h *ledger.Holder) { h.ID += "x" },
	} {
		gone := *resuming.Holder
		mut(&gone)
		_, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-b", 3), GoneHolder: &gone})
		t.Logf("gone holder differing in %s", name)
		s.refused(err, errdef.ErrClaimConflict, resuming, true)
	}
	// A judgement that was right but is stale: another claimer replaced
	// the gone holder first; the record now names that claimer.
	gone := s.b.MakeHolderGone(t, run)
	b := s.claim(ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-b", 4), GoneHolder: gone})
	_, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-c", 5), GoneHolder: gone})
	s.refused(err, errdef.ErrClaimConflict, b.Record(), true)
}

func testClaimTakeOver(t *testing.T, s *suite) {
	live, old := s.atLive(2)
	tk := s.claim(ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-t", 1), TakeOver: true})
	if tk.Fence() != live.Fence+1 {
		t.Fatalf("take-over fence %d, want %d", tk.Fence(), live.Fence+1)
	}
	if got := tk.Replaced(); got == nil || *got != *live.Holder {
		t.Fatalf("Replaced() = %v, want the live holder %s", got, live.Holder)
	}
	// The old holder is fenced out of Live and Suspended.
	before := s.mustGet()
	_, err := old.Live(s.ctx(), ctrB)
	s.refused(err, errdef.ErrClaimConflict, before, true)
	_, err = s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: run, Generation: 3, Ref: ref(3), Container: ctrB, Created: created, Fence: old.Fence()})
	s.refused(err, errdef.ErrClaimConflict, before, true)
	// Released, the take-over's fenced-out holder stays fenced out.
	if err := tk.Release(s.ctx()); err != nil {
		t.Fatal(err)
	}
	rel := s.mustGet()
	if rel.State != ledger.StateSuspended || rel.Fence != tk.Fence() {
		t.Fatalf("after Release: %s", js(rel))
	}
	_, err = s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: run, Generation: 3, Ref: ref(3), Container: ctrB, Created: created, Fence: old.Fence()})
	s.refused(err, errdef.ErrClaimConflict, rel, true)
}

func testLive(t *testing.T, s *suite) {
	resuming, c := s.atResuming(2)
	rec := s.live(c, ctrB)
	want := resuming
	want.State, want.Holder, want.Updated = ledger.StateLive, &ledger.Holder{Container: ctrB}, rec.Updated
	if !Equal(rec, want) {
		t.Fatalf("got %s\nwant %s", js(rec), js(want))
	}
	// A retried Live: no change, no error (Updated included).
	for range 3 {
		again, err := c.Live(s.ctx(), ctrB)
		if err != nil {
			t.Fatalf("retried Live: %v", err)
		}
		if !Equal(again, rec) || !Equal(s.mustGet(), rec) {
			t.Fatalf("retried Live changed %s to %s", js(rec), js(again))
		}
	}
	// Through the Ledger method as well (a rerun without the handle).
	again, err := s.b.Live(s.ctx(), run, c.Fence(), ctrB)
	if err != nil || !Equal(again, rec) {
		t.Fatalf("Ledger.Live retried: %s, %v", js(again), err)
	}
}

func testLiveRefused(t *testing.T, s *suite) {
	type row struct {
		name  string
		build func(s *suite) (ledger.Record, bool, uint64, ledger.Container)
	}
	other := ledger.Container{Host: "host-z", Namespace: "ns", ID: "inc-z"}
	rows := []row{
		{"no record", func(*suite) (ledger.Record, bool, uint64, ledger.Container) { return ledger.Record{}, false, 1, ctrB }},
		{"another fence", func(s *suite) (ledger.Record, bool, uint64, ledger.Container) {
			rec, c := s.atResuming(2)
			return rec, true, c.Fence() + 1, ctrB
		}},
		{"an older fence", func(s *suite) (ledger.Record, bool, uint64, ledger.Container) {
			rec, c := s.atResuming(2)
			return rec, true, c.Fence() - 1, ctrB
		}},
		{"live with this fence, another container", func(s *suite) (ledger.Record, bool, uint64, ledger.Container) {
			rec, c := s.atLive(2)
			return rec, true, c.Fence(), other
		}},
		{"released", func(s *suite) (ledger.Record, bool, uint64, ledger.Container) {
			_, c := s.atResuming(2)
			if err := c.Release(s.ctx()); err != nil {
				s.t.Fatal(err)
			}
			return s.mustGet(), true, c.Fence(), ctrB
		}},
		{"discarded with force", func(s *suite) (ledger.Record, bool, uint64, ledger.Container) {
			_, c := s.atResuming(2)
			return s.discard(true), true, c.Fence(), ctrB
		}},
		{"purged", func(s *suite) (ledger.Record, bool, uint64, ledger.Container) {
			_, c := s.atResuming(2)
			s.discard(true)
			return s.purge(), true, c.Fence(), ctrB
		}},
		{"suspended by the holder", func(s *suite) (ledger.Record, bool, uint64, ledger.Container) {
			_, c := s.atLive(2)
			return s.suspended(ledger.SuspendRequest{Run: run, Generation: 3, Ref: ref(3), Container: ctrB, Created: created, Fence: c.Fence()}), true, c.Fence(), ctrB
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed, fence, ctr := r.build(s)
			_, err := s.b.Live(s.ctx(), run, fence, ctr)
			s.refused(err, errdef.ErrClaimConflict, before, existed)
		})
	}
}

func testRelease(t *testing.T, s *suite) {
	for _, gen := range []uint64{2, 4} { // the recorded generation, and one from another ledger
		t.Run(fmt.Sprintf("generation %d", gen), func(t *testing.T) {
			s := s.fresh(t)
			s.atSuspended(2)
			req := ledger.ClaimRequest{Run: run, Generation: gen, Ref: ref(gen), Holder: resumer("host-r", 1)}
			if gen != 2 {
				req = copyOf(req)
			}
			c := s.claim(req)
			if err := c.Release(s.ctx()); err != nil {
				t.Fatal(err)
			}
			rec := s.mustGet()
			want := c.Record()
			want.State, want.Holder, want.Updated = ledger.StateSuspended, nil, rec.Updated
			if !Equal(rec, want) {
				t.Fatalf("got %s\nwant %s", js(rec), js(want))
			}
			// The released generation can be claimed again, with a higher
			// fence, and no longer as a copy: the ledger recorded it.
			c2 := s.claim(ledger.ClaimRequest{Run: run, Generation: gen, Ref: ref(gen), Holder: resumer("host-r", 2)})
			if c2.Fence() != c.Fence()+1 {
				t.Fatalf("claim after Release: fence %d, want %d", c2.Fence(), c.Fence()+1)
			}
		})
	}
}

func testReleaseNoChange(t *testing.T, s *suite) {
	type row struct {
		name  string
		build func(s *suite) (uint64, bool)
	}
	rows := []row{
		{"no record", func(*suite) (uint64, bool) { return 1, false }},
		{"suspended", func(s *suite) (uint64, bool) { return s.atSuspended(2).Fence, true }},
		{"resuming with another fence", func(s *suite) (uint64, bool) { _, c := s.atResuming(2); return c.Fence() + 1, true }},
		{"live with this fence", func(s *suite) (uint64, bool) { _, c := s.atLive(2); return c.Fence(), true }},
		{"discarded", func(s *suite) (uint64, bool) { _, c := s.atResuming(2); s.discard(true); return c.Fence(), true }},
		{"released twice", func(s *suite) (uint64, bool) {
			_, c := s.atResuming(2)
			if err := c.Release(s.ctx()); err != nil {
				s.t.Fatal(err)
			}
			return c.Fence(), true
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			fence, existed := r.build(s)
			before, _ := s.get()
			got, err := s.b.Release(s.ctx(), run, fence)
			if err != nil {
				t.Fatalf("Release: %v", err)
			}
			after, ok := s.get()
			if ok != existed || !Equal(after, before) || (existed && !Equal(got, before)) {
				t.Fatalf("Release(fence %d) changed %s to %s (returned %s)", fence, js(before), js(after), js(got))
			}
		})
	}
}

func testDiscard(t *testing.T, s *suite) {
	t.Run("suspended", func(t *testing.T) {
		s := s.fresh(t)
		before := s.atSuspended(3)
		rec := s.discard(false)
		want := ledger.Record{Run: run, Generation: 3, Ref: ref(3), State: ledger.StateDiscarded, Fence: before.Fence, Updated: rec.Updated}
		if !Equal(rec, want) {
			t.Fatalf("got %s\nwant %s", js(rec), js(want))
		}
		// Discarded again: no change.
		again := s.discard(false)
		if !Equal(again, rec) {
			t.Fatalf("second Discard changed %s to %s", js(rec), js(again))
		}
		again = s.discard(true)
		if !Equal(again, rec) {
			t.Fatalf("Discard --force of a discarded run changed %s to %s", js(rec), js(again))
		}
	})
	t.Run("no record", func(t *testing.T) {
		s := s.fresh(t)
		rec := s.discard(false)
		want := ledger.Record{Run: run, State: ledger.StateDiscarded, Updated: rec.Updated}
		if !Equal(rec, want) {
			t.Fatalf("got %s\nwant %s", js(rec), js(want))
		}
	})
	t.Run("purged", func(t *testing.T) {
		s := s.fresh(t)
		p := s.atPurged(2)
		rec := s.discard(false)
		// Turn 3: a purged record keeps its last generation and ref, and so
		// does its tombstone.
		want := ledger.Record{Run: run, Generation: 2, Ref: ref(2), State: ledger.StateDiscarded, Fence: p.Fence, Updated: rec.Updated}
		if !Equal(rec, want) {
			t.Fatalf("got %s\nwant %s", js(rec), js(want))
		}
	})
	for _, st := range []start{startResuming(2), startLive(2)} {
		t.Run(st.name+" without force", func(t *testing.T) {
			s := s.fresh(t)
			before, existed := st.build(s)
			_, err := s.b.Discard(s.ctx(), run, false)
			s.refused(err, errdef.ErrClaimConflict, before, existed)
		})
	}
}

func testDiscardForce(t *testing.T, s *suite) {
	for _, st := range []start{startResuming(2), startLive(2), startSuspended(2)} {
		t.Run(st.name, func(t *testing.T) {
			s := s.fresh(t)
			before, _ := st.build(s)
			rec := s.discard(true)
			want := ledger.Record{Run: run, Generation: 2, Ref: ref(2), State: ledger.StateDiscarded, Fence: before.Fence, Updated: rec.Updated}
			if !Equal(rec, want) {
				t.Fatalf("got %s\nwant %s", js(rec), js(want))
			}
			// The discarded generation never resumes again.
			_, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-r", 9), TakeOver: true})
			s.refused(err, errdef.ErrSuperseded, rec, true)
		})
	}
}

func testPurge(t *testing.T, s *suite) {
	d := s.atDiscarded(3)
	rec := s.purge()
	// Turn 3: run, fence, the last generation and its ref are kept (and the
	// run UID: PurgeKeepsUID).
	want := ledger.Record{Run: run, Generation: 3, Ref: ref(3), State: ledger.StatePurged, Fence: d.Fence, Updated: rec.Updated}
	if !Equal(rec, want) {
		t.Fatalf("got %s\nwant %s", js(rec), js(want))
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if k != "run" && k != "state" && k != "fence" && k != "updated" && k != "generation" && k != "ref" {
			t.Errorf("a purged record keeps %q: %s", k, b)
		}
	}
}

func testPurgeRefused(t *testing.T, s *suite) {
	for _, st := range []start{startNone(), startSuspended(2), startResuming(2), startLive(2), startPurged()} {
		t.Run(st.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed := st.build(s)
			_, err := s.b.Purge(s.ctx(), run)
			s.refused(err, errdef.ErrClaimConflict, before, existed)
		})
	}
}

func testPurgedRunIDIsFree(t *testing.T, s *suite) {
	_, c := s.atLive(3) // fence 2
	s.discard(true)
	p := s.purge()
	if p.Fence != c.Fence() {
		t.Fatalf("purge lost the fence: %s, want fence %d", js(p), c.Fence())
	}
	// A new generation 1, then its claim: a higher fence than any before.
	s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctrB, Created: created})
	c1 := s.claim(ledger.ClaimRequest{Run: run, Generation: 1, Ref: ref(1), Holder: resumer("host-r", 3)})
	if c1.Fence() <= c.Fence() {
		t.Fatalf("claim of a new generation 1 after purge: fence %d, not above %d", c1.Fence(), c.Fence())
	}
	// The fenced-out holder of before the purge stays fenced out.
	before := s.mustGet()
	_, err := c.Live(s.ctx(), ctrB)
	s.refused(err, errdef.ErrClaimConflict, before, true)
}

func testList(t *testing.T, s *suite) {
	runs := []string{"r-c", "r-a", "r-b", "r-d"}
	for _, r := range runs {
		if _, err := s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: r, Generation: 1, Ref: ref(1), Container: ctr0, Created: created}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.b.Discard(s.ctx(), "r-d", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.b.Purge(s.ctx(), "r-d"); err != nil {
		t.Fatal(err)
	}
	recs, err := s.b.List(s.ctx())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s:%s", r.Run, r.State))
		one, err := s.b.Get(s.ctx(), r.Run)
		if err != nil || !Equal(one, r) {
			t.Errorf("List has %s, Get has %s (%v)", js(r), js(one), err)
		}
	}
	want := "[r-a:suspended r-b:suspended r-c:suspended r-d:purged]"
	if fmt.Sprint(got) != want {
		t.Fatalf("List: %v, want %s", got, want)
	}
}

// testFenceOnlyGrows walks the run through every kind of transition and
// checks the fence after each one, Discard and Purge included.
func testFenceOnlyGrows(t *testing.T, s *suite) {
	var last uint64
	check := func(step string) {
		t.Helper()
		rec, ok := s.get()
		if !ok {
			return
		}
		if rec.Fence < last {
			t.Fatalf("after %s the fence went back from %d to %d", step, last, rec.Fence)
		}
		last = rec.Fence
	}
	for round := range 3 {
		step := func(name string) string { return fmt.Sprintf("round %d: %s", round, name) }
		s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctr0, Created: created, Keep: true})
		check(step("Suspended(1, keep)"))
		s.suspended(ledger.SuspendRequest{Run: run, Generation: 2, Ref: ref(2), Container: ctr0, Created: created, Fence: s.mustGet().Fence})
		check(step("Suspended(2)"))
		c := s.claim(ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-r", round)})
		check(step("Claim"))
		s.live(c, ctrB)
		check(step("Live"))
		tk := s.claim(ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-t", round), TakeOver: true})
		check(step("Claim take-over"))
		if err := tk.Release(s.ctx()); err != nil {
			t.Fatal(err)
		}
		check(step("Release"))
		s.claim(ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-u", round)})
		check(step("Claim"))
		s.discard(true)
		check(step("Discard --force"))
		s.purge()
		check(step("Purge"))
	}
	if last < 9 {
		t.Fatalf("final fence %d, want at least 9 (three hand-overs a round)", last)
	}
}

// testWalk drives a seeded random walk of transitions over three runs and
// checks every result against ledger.Apply over a model of the records, and
// that no fence goes back. Claims pass no gone holder (the model cannot
// know a backend's judgement), so resuming records are left by Release,
// Live or a forced Discard only.
func testWalk(t *testing.T, s *suite) {
	sd := seed(t)
	rng := rand.New(rand.NewPCG(sd, sd^0x5eed))
	runs := []string{"w-0", "w-1", "w-2"}
	model := map[string]ledger.Record{}
	holders := []ledger.Container{ctr0, ctrB, {Host: "host-z", Namespace: "ns", ID: "inc-z"}}
	steps := 300
	if testing.Short() {
		steps = 100
	}
	for i := range steps {
		r := runs[rng.IntN(len(runs))]
		var cur *ledger.Record
		if m, ok := model[r]; ok {
			cur = &m
		}
		gen := uint64(1 + rng.IntN(3))
		rf := digest.FromString(fmt.Sprintf("walk %s %d %d", r, gen, rng.IntN(4)/3)) // sometimes a fork
		fence := uint64(1)
		if cur != nil && cur.Fence > 0 {
			fence = cur.Fence
			if fence > 1 && rng.IntN(3) == 0 {
				fence-- // a stale fence
			}
		}
		ctr := holders[rng.IntN(len(holders))]
		if cur != nil && cur.Holder != nil && rng.IntN(2) == 0 {
			ctr = cur.Holder.Container
		}
		var op ledger.Op
		switch k := rng.IntN(7); k {
		case 0:
			g := gen
			if cur != nil && rng.IntN(2) == 0 {
				g = cur.Generation + 1
			}
			req := ledger.SuspendRequest{Run: r, Generation: g, Ref: rf, Container: ctr, Created: created, Fence: fence, Keep: rng.IntN(2) == 0}
			if g == 1 {
				req.Fence = 0
			}
			op = req
		case 1, 2:
			g := gen
			if cur != nil && cur.Generation > 0 && rng.IntN(2) == 0 {
				g = cur.Generation
				if rng.IntN(4) != 0 {
					rf = cur.Ref
				}
			}
			req := ledger.ClaimRequest{Run: r, Generation: g, Ref: rf, Holder: resumer(ctr.Host, i), TakeOver: rng.IntN(3) == 0, Copy: rng.IntN(2) == 0}
			if cur != nil && cur.Generation+1 == g && rng.IntN(3) != 0 {
				req.Parent = cur.Ref // a chained claim of the next generation
			}
			op = ledger.ClaimOp{ClaimRequest: req}
		case 3:
			op = ledger.LiveOp{Run: r, Fence: fence, Container: ctr}
		case 4:
			op = ledger.ReleaseOp{Run: r, Fence: fence}
		case 5:
			op = ledger.DiscardOp{Run: r, Force: rng.IntN(2) == 0}
		case 6:
			op = ledger.PurgeOp{Run: r}
		}
		want, changed, wantErr := ledger.Apply(cur, op, time.Now())
		var got ledger.Record
		var err error
		switch op := op.(type) {
		case ledger.SuspendRequest:
			got, err = s.b.Suspended(s.ctx(), op)
		case ledger.ClaimOp:
			var c ledger.Claim
			c, err = s.b.Claim(s.ctx(), op.ClaimRequest)
			if err == nil {
				got = c.Record()
				if rng.IntN(2) == 0 { // and, half the time, end it at once
					if rng.IntN(2) == 0 {
						got, err = c.Live(s.ctx(), op.Holder.Container)
						want, _, wantErr = ledger.Apply(&want, ledger.LiveOp{Run: r, Fence: want.Fence, Container: op.Holder.Container}, time.Now())
					} else {
						err = c.Release(s.ctx())
						want, _, wantErr = ledger.Apply(&want, ledger.ReleaseOp{Run: r, Fence: want.Fence}, time.Now())
						got = s.getRun(r)
					}
				}
			}
		case ledger.LiveOp:
			got, err = s.b.Live(s.ctx(), op.Run, op.Fence, op.Container)
		case ledger.ReleaseOp:
			got, err = s.b.Release(s.ctx(), op.Run, op.Fence)
		case ledger.DiscardOp:
			got, err = s.b.Discard(s.ctx(), op.Run, op.Force)
		case ledger.PurgeOp:
			got, err = s.b.Purge(s.ctx(), op.Run)
		}
		desc := fmt.Sprintf("seed %d step %d: %s %+v on %v", sd, i, ledger.OpName(op), op, cur)
		if !errors.Is(errdef.Class(err), errdef.Class(wantErr)) || (err == nil) != (wantErr == nil) {
			t.Fatalf("%s: error %v, the table says %v", desc, err, wantErr)
		}
		expect := ledger.Record{}
		if cur != nil {
			expect = *cur
		}
		if wantErr == nil && changed {
			expect = want
		}
		after := s.getRun(r)
		if cur != nil && after.Fence < cur.Fence {
			t.Fatalf("%s: the fence went back to %d", desc, after.Fence)
		}
		expect.Updated = after.Updated // the backend stamps Updated with its own clock
		if !Equal(after, expect) {
			t.Fatalf("%s:\n  stored %s\n  table  %s", desc, js(after), js(expect))
		}
		if err == nil {
			got.Updated = after.Updated
			if !Equal(got, expect) {
				t.Fatalf("%s: returned %s, table %s", desc, js(got), js(expect))
			}
		}
		if after.Run == "" {
			delete(model, r)
		} else {
			model[r] = after
		}
	}
}

// getRun returns r's record, the zero Record when there is none.
func (s *suite) getRun(r string) ledger.Record {
	s.t.Helper()
	rec, err := s.b.Get(s.ctx(), r)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Record{}
	}
	if err != nil {
		s.t.Fatalf("Get(%q): %v", r, err)
	}
	return rec
}

// Contended is how many goroutines race in the contended subtests.
const Contended = 16

func testContendedClaim(t *testing.T, s *suite) {
	before := s.atSuspended(2)
	claims := make([]ledger.Claim, Contended)
	errs := race(Contended, func(i int) error {
		c, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-r", i)})
		claims[i] = c
		return err
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("two claims won: %d (fence %d) and %d (fence %d)", winner, claims[winner].Fence(), i, claims[i].Fence())
			}
			winner = i
		case !errors.Is(err, errdef.ErrClaimConflict):
			t.Fatalf("claim %d: want claim-conflict, got %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no claim won")
	}
	rec := s.mustGet()
	if rec.Fence != before.Fence+1 || rec.Holder == nil || *rec.Holder != resumer("host-r", winner) {
		t.Fatalf("record after the race: %s, want claimed by %d with fence %d", js(rec), winner, before.Fence+1)
	}
	// The losers' conflict names the winner and its host.
	for i, err := range errs {
		if i != winner {
			var e *ledger.Error
			if !errors.As(err, &e) || e.Record == nil || e.Record.Holder == nil || *e.Record.Holder != resumer("host-r", winner) {
				t.Fatalf("claim %d: conflict does not carry the winner's record: %v", i, err)
			}
		}
	}
	s.live(claims[winner], ctrB)
}

func testContendedSuspended1(t *testing.T, s *suite) {
	errs := race(Contended, func(i int) error {
		_, err := s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1),
			Container: ledger.Container{Host: "host-a", Namespace: "ns", ID: fmt.Sprintf("c-%d", i)}, Created: created, Keep: i%2 == 0})
		return err
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("two suspends of generation 1 won: %d and %d", winner, i)
			}
			winner = i
		case !errors.Is(err, errdef.ErrClaimConflict):
			t.Fatalf("suspend %d: want claim-conflict, got %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no suspend won")
	}
	if rec := s.mustGet(); rec.SuspendedBy == nil || rec.SuspendedBy.ID != fmt.Sprintf("c-%d", winner) {
		t.Fatalf("record after the race: %s, want suspended by c-%d", js(rec), winner)
	}
}

func testContendedTakeOver(t *testing.T, s *suite) {
	live, _ := s.atLive(2)
	claims := make([]ledger.Claim, Contended)
	errs := race(Contended, func(i int) error {
		c, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Run: run, Generation: 2, Ref: ref(2), Holder: resumer("host-t", i), TakeOver: true})
		claims[i] = c
		return err
	})
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
			if claims[i].Fence() != live.Fence+1 {
				t.Fatalf("take-over %d: fence %d, want %d", i, claims[i].Fence(), live.Fence+1)
			}
		case !errors.Is(err, errdef.ErrClaimConflict):
			t.Fatalf("take-over %d: want claim-conflict, got %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d take-overs won, want exactly 1", won)
	}
}

// testContendedRuns: goroutines each cycle their own run through claim,
// Live, suspend and discard while others race for the same runs; every
// run ends consistent and its fence counts its hand-overs.
func testContendedRuns(t *testing.T, s *suite) {
	const runs, rounds = 4, 5
	errs := race(Contended, func(i int) error {
		r := fmt.Sprintf("c-%d", i%runs)
		me := resumer(fmt.Sprintf("host-%d", i), i)
		if _, err := s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: r, Generation: 1, Ref: ref(1), Container: me.Container, Created: created}); err != nil && !errors.Is(err, errdef.ErrClaimConflict) {
			return err
		}
		for range rounds {
			rec, err := s.b.Get(s.ctx(), r)
			if err != nil {
				return err
			}
			c, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Run: r, Generation: rec.Generation, Ref: rec.Ref, Holder: me})
			if err != nil {
				if errdef.Class(err) == nil {
					return err
				}
				continue
			}
			if _, err := c.Live(s.ctx(), me.Container); err != nil {
				return fmt.Errorf("live of a claim nobody took over: %w", err)
			}
			g := rec.Generation + 1
			if _, err := s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: r, Generation: g, Ref: ref(g), Container: me.Container, Created: created, Fence: c.Fence()}); err != nil {
				return fmt.Errorf("suspended by the live holder: %w", err)
			}
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: %v", i, err)
		}
	}
	for i := range runs {
		rec := s.getRun(fmt.Sprintf("c-%d", i))
		if rec.State != ledger.StateSuspended || rec.Holder != nil || rec.Generation != rec.Fence+1 || rec.Ref != ref(rec.Generation) {
			t.Fatalf("run c-%d after the race: %s, want suspended at generation fence+1", i, js(rec))
		}
	}
}
