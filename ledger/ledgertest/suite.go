package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// Run runs the conformance suite. newBackend returns a fresh, empty backend
// for one subtest (it registers its own cleanup with t.Cleanup); subtests
// run in parallel, each with its own backend.
//
// SANDBOX_RESUME_TEST_SEED sets the seed of the random walk (default: a
// fixed seed); a failing walk names its seed.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, &suite{t: t, b: newBackend(t), newBackend: newBackend})
		})
	}
}

type testCase struct {
	name string
	fn   func(t *testing.T, s *suite)
}

// suite holds the backend of one subtest and helpers that fail it.
type suite struct {
	t          *testing.T
	b          Backend
	newBackend func(t *testing.T) Backend
}

// fresh returns a suite over a new backend for the subtest t.
func (s *suite) fresh(t *testing.T) *suite {
	return &suite{t: t, b: s.newBackend(t), newBackend: s.newBackend}
}

// contextCanceled returns a canceled context.
func contextCanceled(s *suite) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(s.ctx())
	cancel()
	return ctx, cancel
}

const run = "demo-1"

var (
	created = time.Date(2026, 11, 30, 17, 0, 0, 0, time.UTC)
	ctr0    = ledger.Container{Host: "host-a", Namespace: "ns", ID: "runtime-0"}
	ctrB    = ledger.Container{Host: "host-b", Namespace: "ns", ID: "inc-b"}
)

// ancestors are the refs of generations 1 … g−1 of the run, oldest first
// (a `/3` ref's ancestors).
func ancestors(g uint64) []digest.Digest {
	var out []digest.Digest
	for i := uint64(1); i < g; i++ {
		out = append(out, ref(i))
	}
	return out
}

// copyOf makes req a claim of a generation this ledger may never have
// recorded: Copy, with the ref's chain (parent and ancestors).
func copyOf(req ledger.ClaimRequest) ledger.ClaimRequest {
	req.Copy = true
	if req.Generation > 1 {
		req.Parent = ref(req.Generation - 1)
	}
	req.Ancestors = ancestors(req.Generation)
	return req
}

// ref is the ref digest of generation g of the run.
func ref(g uint64) digest.Digest {
	return digest.FromString(fmt.Sprintf("ref of %s generation %d", run, g))
}

// forkRef is another ref for generation g (a re-signed copy).
func forkRef(g uint64) digest.Digest {
	return digest.FromString(fmt.Sprintf("fork of %s generation %d", run, g))
}

// resumer returns a distinct resuming holder: process i on host.
func resumer(host string, i int) ledger.Holder {
	return ledger.Holder{
		Container: ledger.Container{Host: host, Namespace: "ns", ID: fmt.Sprintf("inc-%s-%d", host, i)},
		PID:       1000 + i, Start: fmt.Sprintf("start-%d", i), Boot: "boot-" + host,
	}
}

func (s *suite) ctx() context.Context { return s.t.Context() }

func (s *suite) get() (ledger.Record, bool) {
	s.t.Helper()
	rec, err := s.b.Get(s.ctx(), run)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Record{}, false
	}
	if err != nil {
		s.t.Fatalf("Get(%q): %v", run, err)
	}
	return rec, true
}

func (s *suite) mustGet() ledger.Record {
	s.t.Helper()
	rec, ok := s.get()
	if !ok {
		s.t.Fatalf("Get(%q): no record", run)
	}
	return rec
}

func (s *suite) suspended(req ledger.SuspendRequest) ledger.Record {
	s.t.Helper()
	rec, err := s.b.Suspended(s.ctx(), req)
	if err != nil {
		s.t.Fatalf("Suspended(%+v): %v", req, err)
	}
	s.sameAsStored(rec)
	return rec
}

func (s *suite) claim(req ledger.ClaimRequest) ledger.Claim {
	s.t.Helper()
	c, err := s.b.Claim(s.ctx(), req)
	if err != nil {
		s.t.Fatalf("Claim(generation %d, holder %s): %v", req.Generation, req.Holder, err)
	}
	s.sameAsStored(c.Record())
	if c.Fence() != c.Record().Fence {
		s.t.Fatalf("Claim: Fence() %d, Record().Fence %d", c.Fence(), c.Record().Fence)
	}
	return c
}

func (s *suite) live(c ledger.Claim, ctr ledger.Container) ledger.Record {
	s.t.Helper()
	rec, err := c.Live(s.ctx(), ctr)
	if err != nil {
		s.t.Fatalf("Live(fence %d, %s): %v", c.Fence(), ctr, err)
	}
	s.sameAsStored(rec)
	return rec
}

func (s *suite) discard(force bool) ledger.Record {
	s.t.Helper()
	rec, err := s.b.Discard(s.ctx(), run, force)
	if err != nil {
		s.t.Fatalf("Discard(force %v): %v", force, err)
	}
	s.sameAsStored(rec)
	return rec
}

func (s *suite) purge() ledger.Record {
	s.t.Helper()
	rec, err := s.b.Purge(s.ctx(), run)
	if err != nil {
		s.t.Fatalf("Purge: %v", err)
	}
	s.sameAsStored(rec)
	return rec
}

// sameAsStored checks that a transition returned the record now stored.
func (s *suite) sameAsStored(rec ledger.Record) {
	s.t.Helper()
	if got := s.mustGet(); !Equal(got, rec) {
		s.t.Fatalf("transition returned\n  %s\nGet returns\n  %s", js(rec), js(got))
	}
}

// Equal reports whether two records are the same (times compared as
// instants).
func Equal(a, b ledger.Record) bool { return js(a) == js(b) }

func js(r ledger.Record) string {
	r.Updated = r.Updated.UTC()
	if r.SuspendedBy != nil {
		c := *r.SuspendedBy
		c.Created = c.Created.UTC()
		r.SuspendedBy = &c
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// refused checks that err is a refusal of class with the ledger's detail,
// and that the record did not change (before: the record before the
// transition; ok false: there was none).
func (s *suite) refused(err error, class error, before ledger.Record, existed bool) *ledger.Error {
	s.t.Helper()
	if err == nil {
		s.t.Fatalf("want a %s refusal, got none; record now %s", class, js(s.mustGet()))
	}
	var e *ledger.Error
	if !errors.As(err, &e) {
		s.t.Fatalf("want *ledger.Error of class %s, got %T: %v", class, err, err)
	}
	if !errors.Is(e.Class, class) || !errors.Is(err, class) || !errors.Is(errdef.Class(err), class) {
		s.t.Fatalf("want class %s, got %s: %v", class, e.Class, err)
	}
	for _, other := range sentinels {
		if !errors.Is(other, class) && errors.Is(err, other) {
			s.t.Fatalf("%v matches %s too", err, other)
		}
	}
	if e.Run != run || !strings.Contains(err.Error(), strconv.Quote(run)) {
		s.t.Fatalf("refusal does not name run %q: %v", run, err)
	}
	if existed {
		if e.Record == nil || !Equal(*e.Record, before) {
			s.t.Fatalf("refusal carries record %v, want %s", e.Record, js(before))
		}
		if h := before.Holder; h != nil && errors.Is(class, errdef.ErrClaimConflict) &&
			(!strings.Contains(err.Error(), strconv.Quote(h.Host)) || !strings.Contains(err.Error(), strconv.Quote(h.ID))) {
			s.t.Fatalf("claim-conflict does not name the holder %s and its host: %v", h, err)
		}
	} else if e.Record != nil && e.Record.State != ledger.StatePurged {
		s.t.Fatalf("refusal carries record %s, want none", js(*e.Record))
	}
	after, ok := s.get()
	if ok != existed || (ok && !Equal(after, before)) {
		s.t.Fatalf("a refused transition changed the record:\n  before %s (exists %v)\n  after  %s (exists %v)", js(before), existed, js(after), ok)
	}
	return e
}

// sentinels are the refusal classes of the ledger.
var sentinels = []error{errdef.ErrClaimConflict, errdef.ErrSuperseded, errdef.ErrForked, errdef.ErrBadInput}

// refusedCode is refused, and checks the refusal's finer reason too.
func (s *suite) refusedCode(err error, class error, code string, before ledger.Record, existed bool) *ledger.Error {
	s.t.Helper()
	e := s.refused(err, class, before, existed)
	if e.Code != code || ledger.CodeOf(err) != code {
		s.t.Fatalf("want reason %q, got %q: %v", code, e.Code, err)
	}
	return e
}

// notLost checks that c's Lost channel is not closed.
func (s *suite) notLost(c ledger.Claim) {
	s.t.Helper()
	select {
	case <-c.Lost():
		s.t.Fatalf("claim with fence %d reports lost", c.Fence())
	default:
	}
}

// The states the table starts from, built by transitions only.

// atSuspended brings the run to suspended at generation n (n ≥ 1): a
// runtime container suspends generation 1 keeping running, then
// generations 2…n, the last one stopping. Fence 1 from then on.
func (s *suite) atSuspended(n uint64) ledger.Record {
	s.t.Helper()
	rec := s.suspended(ledger.SuspendRequest{Run: run, Generation: 1, Ref: ref(1), Container: ctr0, Created: created, Keep: n > 1})
	for g := uint64(2); g <= n; g++ {
		rec = s.suspended(ledger.SuspendRequest{Run: run, Generation: g, Ref: ref(g), Container: ctr0, Created: created, Fence: 1, Keep: g < n})
	}
	return rec
}

// atResuming brings the run to resuming at generation n, claimed by
// resumer("host-r", 1).
func (s *suite) atResuming(n uint64) (ledger.Record, ledger.Claim) {
	s.t.Helper()
	s.atSuspended(n)
	c := s.claim(ledger.ClaimRequest{Run: run, Generation: n, Ref: ref(n), Holder: resumer("host-r", 1)})
	return c.Record(), c
}

// atLive brings the run to live at generation n, held by ctrB.
func (s *suite) atLive(n uint64) (ledger.Record, ledger.Claim) {
	s.t.Helper()
	_, c := s.atResuming(n)
	return s.live(c, ctrB), c
}

func (s *suite) atDiscarded(n uint64) ledger.Record {
	s.t.Helper()
	s.atSuspended(n)
	return s.discard(false)
}

func (s *suite) atPurged(n uint64) ledger.Record {
	s.t.Helper()
	s.atDiscarded(n)
	return s.purge()
}

// start names a starting state of the table.
type start struct {
	name  string
	build func(s *suite) (ledger.Record, bool)
}

func startNone() start {
	return start{"no record", func(*suite) (ledger.Record, bool) { return ledger.Record{}, false }}
}

func startSuspended(n uint64) start {
	return start{fmt.Sprintf("suspended at %d", n), func(s *suite) (ledger.Record, bool) { return s.atSuspended(n), true }}
}

func startResuming(n uint64) start {
	return start{fmt.Sprintf("resuming at %d", n), func(s *suite) (ledger.Record, bool) { r, _ := s.atResuming(n); return r, true }}
}

func startLive(n uint64) start {
	return start{fmt.Sprintf("live at %d", n), func(s *suite) (ledger.Record, bool) { r, _ := s.atLive(n); return r, true }}
}

func startDiscarded(n uint64) start {
	return start{fmt.Sprintf("discarded at %d", n), func(s *suite) (ledger.Record, bool) { return s.atDiscarded(n), true }}
}

func startTombstone() start {
	return start{"discarded tombstone of no record", func(s *suite) (ledger.Record, bool) { return s.discard(false), true }}
}

func startPurged() start {
	return start{"purged", func(s *suite) (ledger.Record, bool) { return s.atPurged(2), true }}
}

// seed is the random walk's seed: SANDBOX_RESUME_TEST_SEED or a fixed one
// (internal/testenv; logged).
func seed(t *testing.T) uint64 { return testenv.Seed(t, 20261201) }

// race runs fn(i) for i in [0, n) from n goroutines released together and
// returns their errors by i.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			errs[i] = fn(i)
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
	return errs
}
