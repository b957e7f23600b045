package etcdledger

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	etcdledger "github.com/sandbox-resume/sandbox-resume/ledger/etcd"
	"github.com/sandbox-resume/sandbox-resume/test/integration/etcdharness"
)

const shortTTL = 2 * time.Second

// waitLost waits for c's Lost channel to close, at most within.
func waitLost(t testing.TB, c ledger.Claim, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-c.Lost():
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("claim with fence %d: Lost not closed after %s", c.Fence(), within)
		return 0
	}
}

func notLost(t testing.TB, c ledger.Claim) {
	t.Helper()
	select {
	case <-c.Lost():
		t.Fatalf("claim with fence %d reports lost", c.Fence())
	default:
	}
}

// refusedLive checks that a lost claim's Live is a claim-conflict and
// changes nothing.
func refusedLive(t testing.TB, l ledger.Ledger, c ledger.Claim) *ledger.Error {
	t.Helper()
	run := c.Record().Run
	before, err := l.Get(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Live(context.Background(), c.Record().Holder.Container)
	var le *ledger.Error
	if !errors.As(err, &le) || !errors.Is(err, errdef.ErrClaimConflict) {
		t.Fatalf("Live of a lost claim: want claim-conflict, got %v", err)
	}
	after, err := l.Get(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if after.String() != before.String() {
		t.Fatalf("a refused Live changed %s to %s", before, after)
	}
	return le
}

// TestClaimKeptAlive: a claim held for several TTLs keeps its claim key,
// is not lost, and goes live; Live removes the claim key.
func TestClaimKeptAlive(t *testing.T) {
	c := etcdharness.Start(t)
	l := open(t, c, etcdledger.Config{ClaimTTL: shortTTL})
	suspend(t, l, "alive-1")
	cl, err := l.Claim(context.Background(), claimReq("alive-1", resumerOn("host-a", 1)))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * shortTTL)
	notLost(t, cl)
	other := open(t, c, etcdledger.Config{ClaimTTL: shortTTL, Prefix: l.Config().Prefix})
	if _, err := other.Claim(context.Background(), claimReq("alive-1", resumerOn("host-b", 2))); !errors.Is(err, errdef.ErrClaimConflict) {
		t.Fatalf("claim of a run whose claim is kept alive: want claim-conflict, got %v", err)
	}
	rec, err := cl.Live(context.Background(), cl.Record().Holder.Container)
	if err != nil || rec.State != ledger.StateLive {
		t.Fatalf("Live: %s, %v", rec, err)
	}
	notLost(t, cl)
	if n := claimKeys(t, c, l, "alive-1"); n != 0 {
		t.Fatalf("claim key after Live: %d", n)
	}
	time.Sleep(shortTTL)
	notLost(t, cl) // the end of the keep-alive is no loss
}

// claimKeys counts run's claim keys (0 or 1).
func claimKeys(t testing.TB, c *etcdharness.Cluster, l *etcdledger.Ledger, run string) int {
	t.Helper()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(context.Background(), l.ClaimKey(run))
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Kvs)
}

// TestLostClaimRevoked: the claim's lease revoked (as its expiry would)
// closes Lost; the claim's Live is then refused even though nobody claimed
// since; another host claims the run (the holder is gone), and the lost
// claim's Release changes nothing.
func TestLostClaimRevoked(t *testing.T) {
	c := etcdharness.Start(t)
	l := open(t, c, etcdledger.Config{ClaimTTL: shortTTL})
	const run = "lost-1"
	suspend(t, l, run)
	a, err := l.Claim(context.Background(), claimReq(run, resumerOn("host-a", 1)))
	if err != nil {
		t.Fatal(err)
	}
	expireClaim(t, c, l, run)
	t.Logf("Lost closed %s after the revocation", waitLost(t, a, 5*time.Second))
	le := refusedLive(t, l, a)
	if !strings.Contains(le.Error(), "lost") || le.Record == nil || le.Record.Fence != a.Fence() {
		t.Fatalf("refusal of a lost claim's Live: %v", le)
	}
	b, err := l.Claim(context.Background(), claimReq(run, resumerOn("host-b", 2)))
	if err != nil {
		t.Fatalf("claim over a gone holder: %v", err)
	}
	if r := b.Replaced(); r == nil || *r != resumerOn("host-a", 1) {
		t.Fatalf("Replaced() = %v, want host-a's resumer", r)
	}
	if b.Fence() != a.Fence()+1 {
		t.Fatalf("fence %d after %d", b.Fence(), a.Fence())
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatalf("Release of a lost claim: %v", err)
	}
	if rec, err := l.Get(context.Background(), run); err != nil || rec.State != ledger.StateResuming || rec.Fence != b.Fence() {
		t.Fatalf("after the lost claim's Release: %s, %v", rec, err)
	}
	if _, err := b.Live(context.Background(), b.Record().Holder.Container); err != nil {
		t.Fatalf("Live of the new claim: %v", err)
	}
}

// TestLostClaimKeepAliveStopped is the ledger half of issue 17's fencing
// race: host A's ledger reaches one member only, which is paused (SIGSTOP)
// after A's claim, so A's keep-alives stop. Past the TTL, A's Lost closes
// and host B, through the other members, claims the run; with the member
// continued, A's Live is refused and B's goes through.
func TestLostClaimKeepAliveStopped(t *testing.T) {
	c := etcdharness.Start(t)
	pfx := prefix()
	pinned := 0
	if c.Leader(t) == 0 {
		pinned = 1 // keep the leader: the test is about A's keep-alives, not an election
	}
	var others []string
	for i, ep := range c.Endpoints() {
		if i != pinned {
			others = append(others, ep)
		}
	}
	a := open(t, c, etcdledger.Config{Endpoints: []string{c.Endpoints()[pinned]}, Prefix: pfx, ClaimTTL: shortTTL, Timeout: 3 * time.Second})
	b := open(t, c, etcdledger.Config{Endpoints: others, Prefix: pfx, ClaimTTL: shortTTL})
	const run = "stopped-1"
	suspend(t, b, run)
	ca, err := a.Claim(context.Background(), claimReq(run, resumerOn("host-a", 1)))
	if err != nil {
		t.Fatal(err)
	}

	c.Pause(t, pinned)
	paused := time.Now()
	var cb ledger.Claim
	for {
		cb, err = b.Claim(context.Background(), claimReq(run, resumerOn("host-b", 2)))
		if err == nil {
			break
		}
		if !errors.Is(err, errdef.ErrClaimConflict) {
			c.Resume(t, pinned)
			t.Fatalf("B's claim: %v", err)
		}
		if time.Since(paused) > 5*shortTTL {
			c.Resume(t, pinned)
			t.Fatalf("B could not claim %s after A stopped its keep-alives: %v", time.Since(paused), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("B claimed %s after A's member was paused", time.Since(paused).Round(time.Millisecond))
	// A's last keep-alive came at most TTL/3 before the pause: its claim
	// holds for at least about two thirds of the TTL after it.
	if since := time.Since(paused); since < shortTTL/2 {
		t.Fatalf("B claimed %s after the pause, while A's lease (TTL %s) was alive", since, shortTTL)
	}
	t.Logf("A's Lost closed %s later", waitLost(t, ca, 3*shortTTL))
	c.Resume(t, pinned)

	le := refusedLive(t, a, ca)
	if le.Record == nil || le.Record.Fence != cb.Fence() {
		t.Fatalf("A's refusal: %v", le)
	}
	if _, err := cb.Live(context.Background(), cb.Record().Holder.Container); err != nil {
		t.Fatalf("B's Live: %v", err)
	}
	notLost(t, cb)
}

// TestDiscardForceOfResuming: a forced Discard of a resuming run deletes the
// claim key, and the claim is reported lost.
func TestDiscardForceOfResuming(t *testing.T) {
	c := etcdharness.Start(t)
	l := open(t, c, etcdledger.Config{ClaimTTL: shortTTL})
	const run = "discard-1"
	suspend(t, l, run)
	cl, err := l.Claim(context.Background(), claimReq(run, resumerOn("host-a", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Discard(context.Background(), run, false); !errors.Is(err, errdef.ErrClaimConflict) {
		t.Fatalf("Discard of a resuming run without force: %v", err)
	}
	if n := claimKeys(t, c, l, run); n != 1 {
		t.Fatalf("claim keys while resuming: %d", n)
	}
	rec, err := l.Discard(context.Background(), run, true)
	if err != nil || rec.State != ledger.StateDiscarded || rec.Fence != cl.Fence() {
		t.Fatalf("Discard with force: %s, %v", rec, err)
	}
	if n := claimKeys(t, c, l, run); n != 0 {
		t.Fatalf("claim key after a forced Discard: %d", n)
	}
	waitLost(t, cl, 5*time.Second)
	refusedLive(t, l, cl)
}
