package etcdledger

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	etcdledger "github.com/sandbox-resume/sandbox-resume/ledger/etcd"
	"github.com/sandbox-resume/sandbox-resume/test/integration/etcdharness"
	"github.com/sandbox-resume/sandbox-resume/test/integration/ledgerlin"
)

const (
	linClients     = 8
	linTransitions = 150 // per client: 1,200 in all
)

var linRuns = []string{"lin-0", "lin-1", "lin-2"}

// runClients runs the ledgerlin workload from linClients clients, each with
// its own ledger from open, and calls during once a third of the
// transitions are made (nil: never). It returns the history.
func runClients(t *testing.T, transitions int, open func(i int) ledger.Ledger, during func()) []ledgerlin.Op {
	t.Helper()
	h := ledgerlin.NewHistory(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i := range linClients {
		l := open(i)
		wg.Go(func() {
			ledgerlin.Workload{Client: i, Runs: linRuns, Transitions: transitions, Seed: 20261201}.Run(ctx, l, h)
		})
	}
	if during != nil {
		for h.Transitions() < linClients*transitions/3 && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		during()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the workload did not finish: %v", ctx.Err())
	}
	return h.Ops()
}

// check checks ops; keep writes the visualization of a failed check into a
// directory that outlives the test.
func check(t *testing.T, ops []ledgerlin.Op, keep bool) porcupine.CheckResult {
	t.Helper()
	start := time.Now()
	dir := ""
	if keep {
		dir, _ = os.MkdirTemp("", "ledgerlin-etcd-")
	}
	res, path, err := ledgerlin.Check(ops, 2*time.Minute, dir)
	if path == "" && dir != "" {
		os.RemoveAll(dir)
	}
	t.Logf("%s: %s in %s", ledgerlin.Count(ops), res, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Logf("visualization: %v", err)
	} else if path != "" {
		t.Logf("visualization: %s", path)
	}
	return res
}

// TestLinearizable records ≥ 1,000 concurrent transitions from 8 clients
// on 3 runs against a 3-member cluster, the leader killed and restarted
// once a third of them are made, and checks the history with porcupine
// against the ledger model (issue 17 item 5).
func TestLinearizable(t *testing.T) {
	c := etcdharness.Start(t)
	pfx := prefix()
	var killed int
	var killFrom, killTo int64
	ops := runClients(t, linTransitions, func(i int) ledger.Ledger {
		return open(t, c, etcdledger.Config{Prefix: pfx})
	}, func() {
		killFrom = ledgerlin.Now()
		defer func() { killTo = ledgerlin.Now() }()
		killed = c.Leader(t)
		if killed < 0 {
			killed = 0
		}
		t.Logf("killing member %d (the leader)", killed)
		c.Kill(t, killed)
		time.Sleep(1500 * time.Millisecond)
		c.Restart(t, killed)
		t.Logf("member %d restarted", killed)
	})
	st := ledgerlin.Count(ops)
	if st.Transitions < 1000 || st.Succeeded < 200 || st.Refused < 100 {
		t.Fatalf("the workload is too thin: %s", st)
	}
	if n := ledgerlin.InFlight(ops, killFrom, killTo); n == 0 {
		t.Fatal("no call was in flight while the leader was killed and restarted: the history says nothing about the kill")
	} else {
		t.Logf("%d calls in flight across the kill", n)
	}
	if res := check(t, ops, true); res != porcupine.Ok {
		t.Fatalf("the etcd ledger's history is %s", res)
	}
}

// TestLinearizabilityCatchesBrokenBackend runs the same workload against a
// deliberately broken etcd ledger — read, ledger.Apply, and an
// unconditional write, the mod-revision compare skipped — and requires the
// checker to find the history not linearizable.
func TestLinearizabilityCatchesBrokenBackend(t *testing.T) {
	c := etcdharness.Start(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for attempt := range 3 {
		b := &broken{cli: cli, prefix: prefix()}
		ops := runClients(t, 60, func(int) ledger.Ledger { return b }, nil)
		if res := check(t, ops, false); res == porcupine.Illegal {
			return
		}
		t.Logf("attempt %d: the broken backend's history passed", attempt)
	}
	t.Fatal("the checker did not catch a backend that skips the mod-revision compare")
}

// broken is an etcd ledger without the compare of its compare-and-swap:
// every transition reads the record, runs ledger.Apply and writes the
// result unconditionally. It has no claim keys (a resuming holder is never
// gone).
type broken struct {
	cli    *clientv3.Client
	prefix string
}

func (b *broken) key(run string) string { return b.prefix + "/runs/" + run }

func (b *broken) get(ctx context.Context, run string) (*ledger.Record, error) {
	resp, err := b.cli.Get(ctx, b.key(run))
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	var r ledger.Record
	if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (b *broken) apply(ctx context.Context, op ledger.Op) (ledger.Record, error) {
	cur, err := b.get(ctx, op.RunID())
	if err != nil {
		return ledger.Record{}, err
	}
	next, changed, err := ledger.Apply(cur, op, time.Now())
	if err != nil || !changed {
		return next, err
	}
	v, _ := json.Marshal(next)
	_, err = b.cli.Put(ctx, b.key(op.RunID()), string(v)) // no compare: the bug
	return next, err
}

func (b *broken) Get(ctx context.Context, run string) (ledger.Record, error) {
	r, err := b.get(ctx, run)
	if err == nil && r == nil {
		err = ledger.ErrNotFound
	}
	if r == nil {
		return ledger.Record{}, err
	}
	return *r, err
}

func (b *broken) List(context.Context) ([]ledger.Record, error) {
	return nil, errors.New("broken: List not implemented")
}

func (b *broken) Suspended(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
	return b.apply(ctx, req)
}

func (b *broken) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	rec, err := b.apply(ctx, ledger.ClaimOp{ClaimRequest: req})
	if err != nil {
		return nil, err
	}
	return ledger.NewClaim(b, rec, nil, nil), nil
}

func (b *broken) Live(ctx context.Context, run string, fence uint64, c ledger.Container) (ledger.Record, error) {
	return b.apply(ctx, ledger.LiveOp{Run: run, Fence: fence, Container: c})
}

func (b *broken) Release(ctx context.Context, run string, fence uint64) (ledger.Record, error) {
	return b.apply(ctx, ledger.ReleaseOp{Run: run, Fence: fence})
}

func (b *broken) Discard(ctx context.Context, run string, force bool) (ledger.Record, error) {
	return b.apply(ctx, ledger.DiscardOp{Run: run, Force: force})
}

func (b *broken) Purge(ctx context.Context, run string) (ledger.Record, error) {
	return b.apply(ctx, ledger.PurgeOp{Run: run})
}

func (b *broken) Close() error { return nil }

func (b *broken) HandedOff(ctx context.Context, req ledger.HandOffRequest) (ledger.Record, error) {
	return b.apply(ctx, req)
}

func (b *broken) Received(ctx context.Context, req ledger.ReceiveRequest) (ledger.Record, error) {
	return b.apply(ctx, req)
}

func (b *broken) Recalled(ctx context.Context, req ledger.RecallRequest) (ledger.Record, error) {
	return b.apply(ctx, req)
}

func (b *broken) Unwound(ctx context.Context, req ledger.UnwindRequest) (ledger.Record, error) {
	return b.apply(ctx, req)
}

func (b *broken) Repinned(ctx context.Context, req ledger.RepinRequest) (ledger.Record, error) {
	return b.apply(ctx, req)
}
