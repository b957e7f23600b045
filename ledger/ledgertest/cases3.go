package ledgertest

import (
	"fmt"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// The turn-3 rows of docs/design.md "The run ledger" and "Exactly once
// across hosts": run UIDs, purged runs, chain continuity, not-handed-off,
// HandedOff, Received, Recalled, Unwound and Repinned, each refusal in the
// design's order.
var cases3 = []testCase{
	{"SuspendedUID", testSuspendedUID},
	{"Suspended1PurgedUID", testSuspended1PurgedUID},
	{"SuspendedNextUIDRefused", testSuspendedNextUIDRefused},
	{"SuspendedForkedFrom", testSuspendedForkedFrom},
	{"PurgeKeepsUID", testPurgeKeepsUID},
	{"ClaimUID", testClaimUID},
	{"ClaimPurged", testClaimPurged},
	{"ClaimNotHandedOff", testClaimNotHandedOff},
	{"ClaimChain", testClaimChain},
	{"ClaimRefusalOrder3", testClaimRefusalOrder3},
	{"HandedOff", testHandedOff},
	{"HandedOffRefused", testHandedOffRefused},
	{"HandedOffTombstone", testHandedOffTombstone},
	{"Received", testReceived},
	{"ReceivedRefused", testReceivedRefused},
	{"Recalled", testRecalled},
	{"RecalledRefused", testRecalledRefused},
	{"Unwound", testUnwound},
	{"UnwoundRefused", testUnwoundRefused},
	{"Repinned", testRepinned},
	{"RepinnedRefused", testRepinnedRefused},
}

func init() { cases = append(cases, cases3...) }

// The run UIDs of the suite: uidA is the run's, uidB another run's under
// the same run id.
const (
	uidA = "ruid:0123456789abcdef0123456789abcdef"
	uidB = "ruid:fedcba9876543210fedcba9876543210"
)

// Hosts of the handoff cases: this host, the host handed to, a third.
const (
	hostHere  = "host-a"
	hostThere = "host-b"
	hostThird = "host-c"
)

// atSuspendedUID is atSuspended with every generation's ref carrying uid.
func (s *suite) atSuspendedUID(n uint64, uid string) ledger.Record {
	s.t.Helper()
	rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctr0, Created: created, Keep: n > 1, RunUID: uid})
	for g := uint64(2); g <= n; g++ {
		rec = s.suspended(ledger.SuspendRequest{Run: run, Generation: g, Ref: ref(g), Container: ctr0, Created: created, Fence: 1, Keep: g < n, RunUID: uid})
	}
	return rec
}

// atLiveUID brings the run of uid to live at n, held by ctrB.
func (s *suite) atLiveUID(n uint64, uid string) (ledger.Record, ledger.Claim) {
	s.t.Helper()
	s.atSuspendedUID(n, uid)
	c := s.claim(ledger.ClaimRequest{Run: run, Generation: n, Ref: ref(n), Holder: resumer("host-r", 1), RunUID: uid})
	return s.live(c, ctrB), c
}

// atHandedOff brings the run of uidA to handed-off at n, to hostThere.
func (s *suite) atHandedOff(n uint64) ledger.Record {
	s.t.Helper()
	s.atSuspendedUID(n, uidA)
	return s.handOff(ledger.HandOffRequest{Run: run, Generation: n, Ref: ref(n), RunUID: uidA, To: hostThere, Host: hostHere})
}

func (s *suite) handOff(req ledger.HandOffRequest) ledger.Record {
	s.t.Helper()
	rec, err := s.b.HandedOff(s.ctx(), req)
	if err != nil {
		s.t.Fatalf("HandedOff(%+v): %v", req, err)
	}
	s.sameAsStored(rec)
	return rec
}

func (s *suite) receive(req ledger.ReceiveRequest) ledger.Record {
	s.t.Helper()
	rec, err := s.b.Received(s.ctx(), req)
	if err != nil {
		s.t.Fatalf("Received(%+v): %v", req, err)
	}
	s.sameAsStored(rec)
	return rec
}

// receiveReq is the statement handing generation g of uidA from hostThere
// to hostHere with fence f, its ref chained.
func receiveReq(g, f uint64) ledger.ReceiveRequest {
	r := ledger.ReceiveRequest{Run: run, Generation: g, Ref: ref(g), RunUID: uidA, Ancestors: ancestors(g), From: hostThere, To: hostHere, Fence: f}
	if g > 1 {
		r.Parent = ref(g - 1)
	}
	return r
}

// claimUID is a claim of generation g of uid, the ref chained.
func claimUID(g uint64, uid string, i int) ledger.ClaimRequest {
	r := ledger.ClaimRequest{Run: run, Generation: g, Ref: ref(g), Holder: resumer("host-r", i), RunUID: uid, Ancestors: ancestors(g)}
	if g > 1 {
		r.Parent = ref(g - 1)
	}
	return r
}

func startSuspendedUID(n uint64) start {
	return start{fmt.Sprintf("suspended at %d (uid A)", n), func(s *suite) (ledger.Record, bool) { return s.atSuspendedUID(n, uidA), true }}
}

func startLiveUID(n uint64) start {
	return start{fmt.Sprintf("live at %d (uid A)", n), func(s *suite) (ledger.Record, bool) { r, _ := s.atLiveUID(n, uidA); return r, true }}
}

func startResumingUID(n uint64) start {
	return start{fmt.Sprintf("resuming at %d (uid A)", n), func(s *suite) (ledger.Record, bool) {
		s.atSuspendedUID(n, uidA)
		return s.claim(claimUID(n, uidA, 1)).Record(), true
	}}
}

func startDiscardedUID(n uint64) start {
	return start{fmt.Sprintf("discarded at %d (uid A)", n), func(s *suite) (ledger.Record, bool) {
		s.atSuspendedUID(n, uidA)
		return s.discard(false), true
	}}
}

func startPurgedUID(n uint64) start {
	return start{fmt.Sprintf("purged at %d (uid A)", n), func(s *suite) (ledger.Record, bool) {
		s.atSuspendedUID(n, uidA)
		s.discard(false)
		return s.purge(), true
	}}
}

func startHandedOff(n uint64) start {
	return start{fmt.Sprintf("handed off at %d to %s", n, hostThere), func(s *suite) (ledger.Record, bool) { return s.atHandedOff(n), true }}
}

func testSuspendedUID(t *testing.T, s *suite) {
	rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctr0, Created: created, Keep: true, RunUID: uidA})
	if rec.RunUID != uidA {
		t.Fatalf("Suspended(1) did not store the run UID: %s", js(rec))
	}
	rec = s.suspended(ledger.SuspendRequest{Run: run, Generation: 2, Ref: ref(2), Container: ctr0, Created: created, Fence: rec.Fence, RunUID: uidA})
	if rec.RunUID != uidA || rec.Generation != 2 {
		t.Fatalf("Suspended(2): %s", js(rec))
	}
	// A /3 child of a /2 parent mints a UID: Suspended(N+1) stores it.
	t.Run("minted over a /2 record", func(t *testing.T) {
		s := s.fresh(t)
		live, c := s.atLive(2)
		if live.RunUID != "" {
			t.Fatalf("setup: %s", js(live))
		}
		rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: 3, Ref: ref(3), Container: ctrB, Created: created, Fence: c.Fence(), RunUID: uidB})
		if rec.RunUID != uidB {
			t.Fatalf("the minted UID was not stored: %s", js(rec))
		}
		// From then on the run is that UID's: a /2 ref is another run.
		_, err := s.b.Claim(s.ctx(), ledger.ClaimRequest{Run: run, Generation: 3, Ref: ref(3), Holder: resumer("host-r", 2)})
		s.refusedCode(err, errdef.ErrSuperseded, ledger.ReasonAnotherRun, rec, true)
	})
}

func testSuspended1PurgedUID(t *testing.T, s *suite) {
	s.atSuspendedUID(3, uidA)
	s.discard(false)
	purged := s.purge()
	// The purged UID is refused (8); another one starts the run id again,
	// its fence continuing.
	_, err := s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctrB, Created: created, RunUID: uidA})
	s.refused(err, errdef.ErrClaimConflict, purged, true)
	rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctrB, Created: created, RunUID: uidB})
	want := ledger.Record{Run: run, Generation: 1, Ref: ref(1), RunUID: uidB, State: ledger.StateSuspended,
		SuspendedBy: &ledger.SuspendedBy{Container: ctrB, Created: created, Generation: 1}, Fence: purged.Fence, Updated: rec.Updated}
	if !Equal(rec, want) {
		t.Fatalf("got %s\nwant %s", js(rec), js(want))
	}
}

func testSuspendedNextUIDRefused(t *testing.T, s *suite) {
	for _, uid := range []string{uidB, ""} {
		t.Run("uid "+uidOr(uid), func(t *testing.T) {
			s := s.fresh(t)
			live, c := s.atLiveUID(2, uidA)
			_, err := s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: run, Generation: 3, Ref: ref(3), Container: ctrB, Created: created, Fence: c.Fence(), RunUID: uid})
			s.refused(err, errdef.ErrClaimConflict, live, true)
		})
	}
}

func uidOr(uid string) string {
	if uid == "" {
		return "none"
	}
	return uid[5:9]
}

func testSuspendedForkedFrom(t *testing.T, s *suite) {
	from := &ledger.ForkedFrom{Run: "src", RunUID: uidB, Generation: 4, Ref: digest.FromString("src g4")}
	rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctr0, Created: created, Keep: true, RunUID: uidA, ForkedFrom: from})
	if rec.ForkedFrom == nil || *rec.ForkedFrom != *from {
		t.Fatalf("forkedFrom not stored: %s", js(rec))
	}
	// The lineage stays with the run's later records.
	rec = s.suspended(ledger.SuspendRequest{Run: run, Generation: 2, Ref: ref(2), Container: ctr0, Created: created, Fence: rec.Fence, RunUID: uidA})
	c := s.claim(claimUID(2, uidA, 1))
	if c.Record().ForkedFrom == nil || *c.Record().ForkedFrom != *from || rec.ForkedFrom == nil {
		t.Fatalf("forkedFrom lost: %s, %s", js(rec), js(c.Record()))
	}
	_, err := s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: "other", Generation: 2, Ref: ref(2), Container: ctr0, Fence: 1, ForkedFrom: from})
	if err == nil || errdef.Class(err) != nil {
		t.Fatalf("forkedFrom at generation 2: want an invalid request, got %v", err)
	}
}

func testPurgeKeepsUID(t *testing.T, s *suite) {
	_, c := s.atLiveUID(2, uidA)
	d := s.discard(true)
	want := ledger.Record{Run: run, Generation: 2, Ref: ref(2), RunUID: uidA, State: ledger.StateDiscarded, Fence: c.Fence(), Updated: d.Updated}
	if !Equal(d, want) {
		t.Fatalf("Discard: got %s\nwant %s", js(d), js(want))
	}
	p := s.purge()
	want.State, want.Updated = ledger.StatePurged, p.Updated
	if !Equal(p, want) {
		t.Fatalf("Purge: got %s\nwant %s", js(p), js(want))
	}
}

func testClaimUID(t *testing.T, s *suite) {
	t.Run("a /3 ref over a /2 record", func(t *testing.T) {
		s := s.fresh(t)
		s.atSuspended(2)
		c := s.claim(claimUID(2, uidA, 1))
		if c.Record().RunUID != uidA {
			t.Fatalf("claim did not store the ref's UID: %s", js(c.Record()))
		}
	})
	for _, uid := range []string{"", uidB} {
		t.Run("ref uid "+uidOr(uid)+" over uid A", func(t *testing.T) {
			s := s.fresh(t)
			before := s.atSuspendedUID(2, uidA)
			_, err := s.b.Claim(s.ctx(), claimUID(2, uid, 1))
			e := s.refusedCode(err, errdef.ErrSuperseded, ledger.ReasonAnotherRun, before, true)
			if e.Record.RunUID != uidA {
				t.Fatalf("the refusal does not carry the record's UID: %v", err)
			}
		})
	}
}

func testClaimPurged(t *testing.T, s *suite) {
	// The old rule let an old generation replay over a purged run: every
	// claim of a purged run is 9, copy, take-over or chain notwithstanding.
	for _, st := range []start{startPurged(), startPurgedUID(3)} {
		for _, gen := range []uint64{1, 2, 3, 4} {
			t.Run(fmt.Sprintf("%s/generation %d", st.name, gen), func(t *testing.T) {
				s := s.fresh(t)
				before, _ := st.build(s)
				req := copyOf(claimUID(gen, before.RunUID, 1))
				req.TakeOver = true
				_, err := s.b.Claim(s.ctx(), req)
				s.refusedCode(err, errdef.ErrSuperseded, ledger.ReasonPurged, before, true)
			})
		}
	}
}

func testClaimNotHandedOff(t *testing.T, s *suite) {
	t.Run("no record", func(t *testing.T) {
		s := s.fresh(t)
		for _, gen := range []uint64{1, 3} {
			req := claimUID(gen, uidA, 1)
			_, err := s.b.Claim(s.ctx(), req)
			s.refusedCode(err, errdef.ErrSuperseded, ledger.ReasonNotHandedOff, ledger.Record{}, false)
		}
	})
	t.Run("a lower generation", func(t *testing.T) {
		s := s.fresh(t)
		before := s.atSuspendedUID(2, uidA)
		_, err := s.b.Claim(s.ctx(), claimUID(3, uidA, 1))
		s.refusedCode(err, errdef.ErrSuperseded, ledger.ReasonNotHandedOff, before, true)
		// As a copy it is claimed; released, the ledger has recorded it.
		req := claimUID(3, uidA, 1)
		req.Copy = true
		c := s.claim(req)
		if err := c.Release(s.ctx()); err != nil {
			t.Fatal(err)
		}
		s.claim(claimUID(3, uidA, 2))
	})
	t.Run("below a handoff", func(t *testing.T) {
		s := s.fresh(t)
		before := s.atHandedOff(2)
		_, err := s.b.Claim(s.ctx(), claimUID(3, uidA, 1))
		s.refusedCode(err, errdef.ErrSuperseded, ledger.ReasonNotHandedOff, before, true)
		req := claimUID(3, uidA, 1)
		req.Copy = true
		c := s.claim(req)
		if c.Fence() != before.Fence+1 || c.Record().HandedOff != nil {
			t.Fatalf("claim of a copy over a handed-off record: %s", js(c.Record()))
		}
	})
}

func testClaimChain(t *testing.T, s *suite) {
	type row struct {
		name string
		mut  func(r *ledger.ClaimRequest)
		ok   bool
	}
	rows := []row{
		{"N+1, parent = the record's ref", func(r *ledger.ClaimRequest) {}, true},
		{"N+1, another parent", func(r *ledger.ClaimRequest) { r.Parent = forkRef(2) }, false},
		{"N+1, no parent", func(r *ledger.ClaimRequest) { r.Parent = "" }, false},
		{"N+1, the record's ref only among the ancestors", func(r *ledger.ClaimRequest) { r.Parent = forkRef(2) }, false},
		{"N+3, the record's ref among the ancestors", func(r *ledger.ClaimRequest) { *r = claimUID(5, uidA, 1) }, true},
		{"N+3, ancestors without it", func(r *ledger.ClaimRequest) {
			*r = claimUID(5, uidA, 1)
			r.Ancestors = []digest.Digest{ref(1), forkRef(2), ref(3), ref(4)}
		}, false},
		{"N+3, no ancestors (a /2 ref)", func(r *ledger.ClaimRequest) { *r = claimUID(5, uidA, 1); r.Ancestors = nil }, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			before := s.atSuspendedUID(2, uidA)
			req := claimUID(3, uidA, 1)
			r.mut(&req)
			req.Copy = true
			if r.ok {
				s.claim(req)
				return
			}
			_, err := s.b.Claim(s.ctx(), req)
			s.refusedCode(err, errdef.ErrForked, ledger.ReasonBrokenChain, before, true)
		})
	}
}

// testClaimRefusalOrder3: each turn-3 refusal of Claim where a later rule
// would refuse too, so that the order of docs/design.md shows: another run
// or purged (9); newer, discarded or handed off at ≥ N (9); forked or a
// broken chain (6); not handed off (9); held (8).
func testClaimRefusalOrder3(t *testing.T, s *suite) {
	type row struct {
		name  string
		st    start
		req   ledger.ClaimRequest
		class error
		code  string
	}
	fork := func(r ledger.ClaimRequest) ledger.ClaimRequest { r.Ref = forkRef(r.Generation); return r }
	cp := func(r ledger.ClaimRequest) ledger.ClaimRequest { r.Copy = true; return r }
	noChain := func(r ledger.ClaimRequest) ledger.ClaimRequest { r.Parent, r.Ancestors = "", nil; return r }
	take := func(r ledger.ClaimRequest) ledger.ClaimRequest { r.TakeOver = true; return r }
	rows := []row{
		// another run beats discarded, newer, forked, not handed off, held.
		{"another run over discarded", startDiscardedUID(2), claimUID(2, uidB, 1), errdef.ErrSuperseded, ledger.ReasonAnotherRun},
		{"another run over newer", startSuspendedUID(3), claimUID(2, uidB, 1), errdef.ErrSuperseded, ledger.ReasonAnotherRun},
		{"another run over forked", startSuspendedUID(2), fork(claimUID(2, uidB, 1)), errdef.ErrSuperseded, ledger.ReasonAnotherRun},
		{"another run over held", startLiveUID(2), claimUID(2, uidB, 1), errdef.ErrSuperseded, ledger.ReasonAnotherRun},
		{"a /2 ref over held", startLiveUID(2), claimUID(2, "", 1), errdef.ErrSuperseded, ledger.ReasonAnotherRun},
		// purged beats a broken chain and not handed off.
		{"purged over broken chain", startPurgedUID(2), noChain(claimUID(4, uidA, 1)), errdef.ErrSuperseded, ledger.ReasonPurged},
		// handed off at ≥ N beats forked and held-conflict rules.
		{"handed off at N, another ref", startHandedOff(2), fork(claimUID(2, uidA, 1)), errdef.ErrSuperseded, ledger.ReasonHandedOff},
		{"handed off at N, as a copy taking over", startHandedOff(2), take(cp(claimUID(2, uidA, 1))), errdef.ErrSuperseded, ledger.ReasonHandedOff},
		{"handed off above N", startHandedOff(3), cp(claimUID(2, uidA, 1)), errdef.ErrSuperseded, ledger.ReasonNewerGeneration},
		// newer beats a broken chain (there is no chain to judge).
		{"newer, no copy", startSuspendedUID(3), fork(claimUID(2, uidA, 1)), errdef.ErrSuperseded, ledger.ReasonNewerGeneration},
		// a broken chain beats not handed off and held.
		{"broken chain, no copy", startSuspendedUID(2), noChain(claimUID(4, uidA, 1)), errdef.ErrForked, ledger.ReasonBrokenChain},
		{"broken chain, held", startLiveUID(2), noChain(claimUID(3, uidA, 1)), errdef.ErrForked, ledger.ReasonBrokenChain},
		{"forked at N, held", startLiveUID(2), fork(claimUID(2, uidA, 1)), errdef.ErrForked, ""},
		// not handed off beats held.
		{"not handed off, live", startLiveUID(2), claimUID(3, uidA, 1), errdef.ErrSuperseded, ledger.ReasonNotHandedOff},
		{"not handed off, resuming", startResumingUID(2), claimUID(3, uidA, 1), errdef.ErrSuperseded, ledger.ReasonNotHandedOff},
		// held, as a copy.
		{"copy, live", startLiveUID(2), cp(claimUID(3, uidA, 1)), errdef.ErrClaimConflict, ""},
		{"copy, resuming", startResumingUID(2), cp(claimUID(3, uidA, 1)), errdef.ErrClaimConflict, ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed := r.st.build(s)
			_, err := s.b.Claim(s.ctx(), r.req)
			s.refusedCode(err, r.class, r.code, before, existed)
		})
	}
}

func testHandedOff(t *testing.T, s *suite) {
	before := s.atSuspendedUID(2, uidA)
	req := ledger.HandOffRequest{Run: run, Generation: 2, Ref: ref(2), RunUID: uidA, To: hostThere, Host: hostHere}
	rec := s.handOff(req)
	want := ledger.Record{Run: run, Generation: 2, Ref: ref(2), RunUID: uidA, State: ledger.StateHandedOff,
		HandedOff: &ledger.HandedOff{To: hostThere, At: rec.Updated}, Fence: before.Fence, Updated: rec.Updated}
	if rec.HandedOff != nil {
		want.HandedOff.At = rec.HandedOff.At
	}
	if !Equal(rec, want) || rec.HandedOff.At.IsZero() {
		t.Fatalf("got %s\nwant %s", js(rec), js(want))
	}
	// A retried export: no change (the statement's created is the same).
	again := s.handOff(req)
	if !Equal(again, rec) {
		t.Fatalf("retried HandedOff changed %s to %s", js(rec), js(again))
	}
	// Every claim of ≤ N here is 9, naming the handoff.
	for _, g := range []uint64{1, 2} {
		req := copyOf(claimUID(g, uidA, 3))
		req.TakeOver = true
		_, err := s.b.Claim(s.ctx(), req)
		code := ledger.ReasonHandedOff
		if g < 2 {
			code = ledger.ReasonNewerGeneration
		}
		e := s.refusedCode(err, errdef.ErrSuperseded, code, rec, true)
		if g == 2 && e.Record.HandedOff.To != hostThere {
			t.Fatalf("refusal does not name the host handed to: %v", err)
		}
	}
}

// testHandedOffRefused: in the design's order — handed off to another host
// (8), live (8), to this host (2), a ref without a run UID (2), anything
// else (8).
func testHandedOffRefused(t *testing.T, s *suite) {
	type row struct {
		name  string
		st    start
		mut   func(r *ledger.HandOffRequest)
		class error
	}
	none := func(*ledger.HandOffRequest) {}
	toSelf := func(r *ledger.HandOffRequest) { r.To = hostHere }
	rows := []row{
		{"to another host", startHandedOff(2), func(r *ledger.HandOffRequest) { r.To = hostThird }, errdef.ErrClaimConflict},
		{"to another host, naming this one", startHandedOff(2), toSelf, errdef.ErrClaimConflict},
		{"another generation to the same host", startHandedOff(2), func(r *ledger.HandOffRequest) { r.Generation, r.Ref = 1, ref(1) }, errdef.ErrClaimConflict},
		{"live", startLiveUID(2), none, errdef.ErrClaimConflict},
		{"live, naming this host", startLiveUID(2), toSelf, errdef.ErrClaimConflict},
		{"to this host", startSuspendedUID(2), toSelf, errdef.ErrBadInput},
		{"a /2 ref", start{"suspended at 2 (/2)", func(s *suite) (ledger.Record, bool) { return s.atSuspended(2), true }}, func(r *ledger.HandOffRequest) { r.RunUID = "" }, errdef.ErrBadInput},
		{"to this host, no record", startNone(), toSelf, errdef.ErrBadInput},
		{"no record", startNone(), none, errdef.ErrClaimConflict},
		{"resuming", startResumingUID(2), none, errdef.ErrClaimConflict},
		{"discarded", startDiscardedUID(2), none, errdef.ErrClaimConflict},
		{"purged", startPurgedUID(2), none, errdef.ErrClaimConflict},
		{"a lower generation", startSuspendedUID(1), none, errdef.ErrClaimConflict},
		{"a higher generation", startSuspendedUID(3), none, errdef.ErrClaimConflict},
		{"another ref", startSuspendedUID(2), func(r *ledger.HandOffRequest) { r.Ref = forkRef(2) }, errdef.ErrClaimConflict},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed := r.st.build(s)
			req := ledger.HandOffRequest{Run: run, Generation: 2, Ref: ref(2), RunUID: uidA, To: hostThere, Host: hostHere}
			r.mut(&req)
			_, err := s.b.HandedOff(s.ctx(), req)
			s.refused(err, r.class, before, existed)
		})
	}
}

// testHandedOffTombstone: Discard leaves a handed-off record as it is;
// Purge, Live, Suspended and Release do not touch it.
func testHandedOffTombstone(t *testing.T, s *suite) {
	rec := s.atHandedOff(2)
	for _, force := range []bool{false, true} {
		if got := s.discard(force); !Equal(got, rec) {
			t.Fatalf("Discard(force %v) of a handed-off record: %s", force, js(got))
		}
	}
	_, err := s.b.Purge(s.ctx(), run)
	s.refused(err, errdef.ErrClaimConflict, rec, true)
	_, err = s.b.Live(s.ctx(), run, rec.Fence, ctrB)
	s.refused(err, errdef.ErrClaimConflict, rec, true)
	_, err = s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: run, Generation: 3, Ref: ref(3), Container: ctr0, Created: created, Fence: 1, RunUID: uidA})
	s.refused(err, errdef.ErrClaimConflict, rec, true)
	if got, err := s.b.Release(s.ctx(), run, rec.Fence); err != nil || !Equal(got, rec) {
		t.Fatalf("Release of a handed-off record: %s, %v", js(got), err)
	}
}

func testReceived(t *testing.T, s *suite) {
	type row struct {
		name string
		st   start
		req  ledger.ReceiveRequest
	}
	back := receiveReq(2, 7)
	back.From, back.To = hostThere, hostHere // handed to hostThere, handed back
	shared := receiveReq(2, 7)
	shared.From, shared.To = hostHere, hostThere // one ledger: hostThere receives
	rows := []row{
		{"no record", startNone(), receiveReq(3, 7)},
		{"purged of another run", start{"purged (uid B)", func(s *suite) (ledger.Record, bool) {
			s.atSuspendedUID(2, uidB)
			s.discard(false)
			return s.purge(), true
		}}, receiveReq(3, 0)},
		{"a lower generation, suspended", startSuspendedUID(2), receiveReq(3, 7)},
		{"a lower generation, further back", startSuspendedUID(2), receiveReq(5, 7)},
		{"a lower generation of a /2 record", startSuspended(2), receiveReq(3, 7)},
		{"a lower generation, handed off", startHandedOff(2), receiveReq(4, 7)},
		{"handed off at N, handed back", startHandedOff(2), back},
		{"handed off at N, one shared ledger", startHandedOff(2), shared},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed := r.st.build(s)
			rec := s.receive(r.req)
			want := ledger.Record{Run: run, Generation: r.req.Generation, Ref: r.req.Ref, RunUID: uidA, State: ledger.StateSuspended,
				Received: &ledger.Received{From: r.req.From}, Fence: max(before.Fence, r.req.Fence), Updated: rec.Updated}
			if rec.Received != nil {
				want.Received.At = rec.Received.At
			}
			if !Equal(rec, want) {
				t.Fatalf("from %s (exists %v): got %s\nwant %s", js(before), existed, js(rec), js(want))
			}
			// A retried import: no change.
			if again := s.receive(r.req); !Equal(again, rec) {
				t.Fatalf("retried Received changed %s to %s", js(rec), js(again))
			}
			// The received generation is recorded here: claimed without copy.
			req := claimUID(r.req.Generation, uidA, 4)
			c := s.claim(req)
			if c.Fence() != rec.Fence+1 {
				t.Fatalf("claim after Received: fence %d, want %d", c.Fence(), rec.Fence+1)
			}
		})
	}
	t.Run("the fence never goes back", func(t *testing.T) {
		s := s.fresh(t)
		_, c := s.atLiveUID(2, uidA) // fence 2
		s.suspended(ledger.SuspendRequest{Run: run, Generation: 3, Ref: ref(3), Container: ctrB, Created: created, Fence: c.Fence(), RunUID: uidA})
		rec := s.receive(receiveReq(4, 1))
		if rec.Fence != c.Fence() {
			t.Fatalf("Received with a lower statement fence: fence %d, want %d", rec.Fence, c.Fence())
		}
	})
}

// testReceivedRefused: in the design's order — another run, or purged of
// this run (9); newer, discarded, handed off at N to a third host (9); this
// generation with another ref, or a broken chain (6); live, resuming (8).
func testReceivedRefused(t *testing.T, s *suite) {
	type row struct {
		name  string
		st    start
		req   ledger.ReceiveRequest
		class error
		code  string
	}
	uidOf := func(r ledger.ReceiveRequest, uid string) ledger.ReceiveRequest { r.RunUID = uid; return r }
	fork := func(r ledger.ReceiveRequest) ledger.ReceiveRequest { r.Ref = forkRef(r.Generation); return r }
	noChain := func(r ledger.ReceiveRequest) ledger.ReceiveRequest {
		r.Parent, r.Ancestors = forkRef(r.Generation-1), nil
		return r
	}
	third := receiveReq(2, 7)
	third.From = hostThird // hostHere handed it to hostThere; hostThird hands it here
	rows := []row{
		{"another run", startSuspendedUID(2), uidOf(receiveReq(3, 7), uidB), errdef.ErrSuperseded, ledger.ReasonAnotherRun},
		{"another run over discarded", startDiscardedUID(2), uidOf(receiveReq(2, 7), uidB), errdef.ErrSuperseded, ledger.ReasonAnotherRun},
		{"another run over live", startLiveUID(2), uidOf(receiveReq(3, 7), uidB), errdef.ErrSuperseded, ledger.ReasonAnotherRun},
		{"purged of this run", startPurgedUID(2), receiveReq(3, 7), errdef.ErrSuperseded, ledger.ReasonPurged},
		{"purged of this run, broken chain", startPurgedUID(2), noChain(receiveReq(3, 7)), errdef.ErrSuperseded, ledger.ReasonPurged},
		{"newer", startSuspendedUID(3), receiveReq(2, 7), errdef.ErrSuperseded, ledger.ReasonNewerGeneration},
		{"newer, another ref", startSuspendedUID(3), fork(receiveReq(2, 7)), errdef.ErrSuperseded, ledger.ReasonNewerGeneration},
		{"discarded", startDiscardedUID(2), receiveReq(3, 7), errdef.ErrSuperseded, ledger.ReasonDiscarded},
		{"discarded, another ref", startDiscardedUID(2), fork(receiveReq(2, 7)), errdef.ErrSuperseded, ledger.ReasonDiscarded},
		{"handed off at N to a third host", startHandedOff(2), third, errdef.ErrSuperseded, ledger.ReasonHandedOff},
		{"handed off at N to a third host, another ref", startHandedOff(2), fork(third), errdef.ErrSuperseded, ledger.ReasonHandedOff},
		{"another ref at N", startSuspendedUID(2), fork(receiveReq(2, 7)), errdef.ErrForked, ""},
		{"another ref at N, live", startLiveUID(2), fork(receiveReq(2, 7)), errdef.ErrForked, ""},
		{"another ref at N, handed off", startHandedOff(2), fork(receiveReq(2, 7)), errdef.ErrForked, ""},
		{"broken chain", startSuspendedUID(2), noChain(receiveReq(3, 7)), errdef.ErrForked, ledger.ReasonBrokenChain},
		{"broken chain further back", startSuspendedUID(2), noChain(receiveReq(5, 7)), errdef.ErrForked, ledger.ReasonBrokenChain},
		{"broken chain, live", startLiveUID(2), noChain(receiveReq(3, 7)), errdef.ErrForked, ledger.ReasonBrokenChain},
		{"live", startLiveUID(2), receiveReq(3, 7), errdef.ErrClaimConflict, ""},
		{"live at N", startLiveUID(2), receiveReq(2, 7), errdef.ErrClaimConflict, ""},
		{"resuming", startResumingUID(2), receiveReq(3, 7), errdef.ErrClaimConflict, ""},
		{"suspended at N, recorded here", startSuspendedUID(2), receiveReq(2, 7), errdef.ErrClaimConflict, ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed := r.st.build(s)
			_, err := s.b.Received(s.ctx(), r.req)
			s.refusedCode(err, r.class, r.code, before, existed)
		})
	}
}

func testRecalled(t *testing.T, s *suite) {
	h := s.atHandedOff(2)
	rec, err := s.b.Recalled(s.ctx(), ledger.RecallRequest{Run: run, Generation: 2, Ref: ref(2)})
	if err != nil {
		t.Fatal(err)
	}
	s.sameAsStored(rec)
	want := ledger.Record{Run: run, Generation: 2, Ref: ref(2), RunUID: uidA, State: ledger.StateSuspended, Fence: h.Fence + 1, Updated: rec.Updated}
	if !Equal(rec, want) {
		t.Fatalf("got %s\nwant %s", js(rec), js(want))
	}
	s.claim(claimUID(2, uidA, 1))
}

func testRecalledRefused(t *testing.T, s *suite) {
	type row struct {
		name string
		st   start
		req  ledger.RecallRequest
	}
	req := ledger.RecallRequest{Run: run, Generation: 2, Ref: ref(2)}
	rows := []row{
		{"no record", startNone(), req},
		{"suspended", startSuspendedUID(2), req},
		{"live", startLiveUID(2), req},
		{"discarded", startDiscardedUID(2), req},
		{"another generation", startHandedOff(3), req},
		{"another ref", startHandedOff(2), ledger.RecallRequest{Run: run, Generation: 2, Ref: forkRef(2)}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed := r.st.build(s)
			_, err := s.b.Recalled(s.ctx(), r.req)
			s.refused(err, errdef.ErrClaimConflict, before, existed)
		})
	}
}

func testUnwound(t *testing.T, s *suite) {
	live, c := s.atLiveUID(2, uidA)
	rec, err := s.b.Unwound(s.ctx(), ledger.UnwindRequest{Run: run, Fence: c.Fence(), Container: ctrB})
	if err != nil {
		t.Fatal(err)
	}
	s.sameAsStored(rec)
	want := live
	want.State, want.Holder, want.Updated = ledger.StateSuspended, nil, rec.Updated
	if !Equal(rec, want) {
		t.Fatalf("got %s\nwant %s", js(rec), js(want))
	}
	// The unwound holder is fenced out of nothing but holds nothing: its
	// Suspended is 8; the generation is claimed again with fence + 1.
	_, err = s.b.Suspended(s.ctx(), ledger.SuspendRequest{Run: run, Generation: 3, Ref: ref(3), Container: ctrB, Created: created, Fence: c.Fence(), RunUID: uidA})
	s.refused(err, errdef.ErrClaimConflict, rec, true)
	if c2 := s.claim(claimUID(2, uidA, 2)); c2.Fence() != c.Fence()+1 {
		t.Fatalf("claim after Unwound: fence %d", c2.Fence())
	}
}

func testUnwoundRefused(t *testing.T, s *suite) {
	type row struct {
		name  string
		build func(s *suite) (ledger.Record, bool, ledger.UnwindRequest)
	}
	rows := []row{
		{"no record", func(*suite) (ledger.Record, bool, ledger.UnwindRequest) {
			return ledger.Record{}, false, ledger.UnwindRequest{Run: run, Fence: 1, Container: ctrB}
		}},
		{"another fence", func(s *suite) (ledger.Record, bool, ledger.UnwindRequest) {
			rec, c := s.atLiveUID(2, uidA)
			return rec, true, ledger.UnwindRequest{Run: run, Fence: c.Fence() + 1, Container: ctrB}
		}},
		{"another container", func(s *suite) (ledger.Record, bool, ledger.UnwindRequest) {
			rec, c := s.atLiveUID(2, uidA)
			return rec, true, ledger.UnwindRequest{Run: run, Fence: c.Fence(), Container: ctr0}
		}},
		{"resuming", func(s *suite) (ledger.Record, bool, ledger.UnwindRequest) {
			s.atSuspendedUID(2, uidA)
			c := s.claim(claimUID(2, uidA, 1))
			return c.Record(), true, ledger.UnwindRequest{Run: run, Fence: c.Fence(), Container: c.Record().Holder.Container}
		}},
		{"suspended", func(s *suite) (ledger.Record, bool, ledger.UnwindRequest) {
			_, c := s.atLiveUID(2, uidA)
			rec, err := s.b.Unwound(s.ctx(), ledger.UnwindRequest{Run: run, Fence: c.Fence(), Container: ctrB})
			if err != nil {
				s.t.Fatal(err)
			}
			return rec, true, ledger.UnwindRequest{Run: run, Fence: c.Fence(), Container: ctrB}
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed, req := r.build(s)
			_, err := s.b.Unwound(s.ctx(), req)
			s.refused(err, errdef.ErrClaimConflict, before, existed)
		})
	}
}

func testRepinned(t *testing.T, s *suite) {
	before := s.atSuspendedUID(2, uidA)
	rec, err := s.b.Repinned(s.ctx(), ledger.RepinRequest{Run: run, Generation: 3, Ref: ref(3), Parent: ref(2), RunUID: uidA})
	if err != nil {
		t.Fatal(err)
	}
	s.sameAsStored(rec)
	want := ledger.Record{Run: run, Generation: 3, Ref: ref(3), RunUID: uidA, State: ledger.StateSuspended, Fence: before.Fence, Updated: rec.Updated}
	if !Equal(rec, want) {
		t.Fatalf("got %s\nwant %s", js(rec), js(want))
	}
	// The repinned generation is recorded: claimed without copy.
	s.claim(claimUID(3, uidA, 1))
}

func testRepinnedRefused(t *testing.T, s *suite) {
	type row struct {
		name string
		st   start
		mut  func(r *ledger.RepinRequest)
	}
	none := func(*ledger.RepinRequest) {}
	rows := []row{
		{"no record", startNone(), none},
		{"live", startLiveUID(2), none},
		{"resuming", startResumingUID(2), none},
		{"discarded", startDiscardedUID(2), none},
		{"handed off", startHandedOff(2), none},
		{"another parent", startSuspendedUID(2), func(r *ledger.RepinRequest) { r.Parent = forkRef(2) }},
		{"another run UID", startSuspendedUID(2), func(r *ledger.RepinRequest) { r.RunUID = uidB }},
		{"not the next generation", startSuspendedUID(2), func(r *ledger.RepinRequest) { r.Generation, r.Ref = 4, ref(4) }},
		{"the same generation", startSuspendedUID(3), none},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := s.fresh(t)
			before, existed := r.st.build(s)
			req := ledger.RepinRequest{Run: run, Generation: 3, Ref: ref(3), Parent: ref(2), RunUID: uidA}
			r.mut(&req)
			_, err := s.b.Repinned(s.ctx(), req)
			s.refused(err, errdef.ErrClaimConflict, before, existed)
		})
	}
}
