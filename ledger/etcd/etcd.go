// Package etcd is the fleet's run ledger (docs/design.md "The run ledger"):
// ledger.Ledger on an etcd v3.6 cluster, so every host of a fleet agrees on
// who holds each run.
//
// # Keys
//
// A run's record is stored as the JSON of ledger.Record at
// <prefix>/runs/<run>; while the record is resuming, the claim key
// <prefix>/claims/<run> holds the claim's fence and is bound to an etcd lease
// of the claim (TTL Config.ClaimTTL, 30 s by default) that the Claim handle
// keeps alive until Live or Release. The prefix (default /sandbox-resume)
// keeps tenants of one cluster apart.
//
// # Transitions
//
// Every transition reads the record and the claim key in one linearizable
// read, runs the one transition table, ledger.Apply, and writes the result
// in one etcd transaction that compares the mod revisions of both keys with
// those it read — the compare-and-swap; when another writer came first, it
// reads again and retries, within Config.Timeout. No read is ever
// serializable: a member cut off from the quorum answers nothing, so the
// ledger fails closed.
//
// A resuming record's holder is gone exactly when its claim key is gone:
// the lease expired (the resumer stopped keeping it alive for a TTL) or was
// revoked. ClaimRequest.GoneHolder is ignored. The transaction that leaves
// resuming (Live, Release, Discard with force, a Claim from a gone holder)
// deletes the claim key, and the lease is then revoked in the background
// (Close waits for it); Claim writes the key with the new lease, granted
// while the record is read. A Live whose claim key is gone is refused
// (errdef.ErrClaimConflict): the claim was lost and another host may claim
// the run. A Claim handle's Live is one transaction that compares both mod
// revisions with the revision its Claim wrote, and reads only when they
// changed.
//
// Fences are as in every backend: each Claim writes the record's fence + 1
// (ledger.Apply).
//
// # Failures
//
// A call that gets no answer within Config.Timeout (the cluster is
// unreachable, has no quorum, or refuses the TLS client) returns an error
// naming the endpoints and what a fresh connection to each finds (refused,
// a TLS refusal, or reachable: no quorum); it is never a refusal, and its
// outcome is unknown (the write may have been committed). A Claim whose
// outcome is unknown holds no keep-alive, so its claim key expires within
// the TTL.
//
// Answers of a cluster that keeps its quorum but is changing leader, or
// whose member this client talks to is down or restarting (gRPC
// Unavailable: "leader changed", "no leader", a reset connection), are
// tried again within Config.Timeout; a transaction of unknown outcome is
// recognised by the value it wrote when a fresh read finds it (retry.go),
// so a Claim committed during a leader change is returned as the caller's
// claim rather than refused as someone else's.
package etcd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Ledger is a ledger.Ledger on an etcd cluster, safe for concurrent use.
// Make one with Open; Close it.
type Ledger struct {
	cfg    Config
	cli    *clientv3.Client
	tls    *tls.Config // nil: plain text
	runs   string      // <prefix>/runs/
	claims string      // <prefix>/claims/
	ttl    int64       // claim lease TTL in seconds
	now    func() time.Time

	base   context.Context // cancelled by Close: ends every keep-alive
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	bg     sync.WaitGroup // background lease revocations
}

var _ ledger.Ledger = (*Ledger)(nil)

// Open returns a ledger on the cluster cfg names. It does not wait for the
// cluster: an unreachable one fails the first call within cfg.Timeout.
// Errors wrap ErrConfig for an invalid configuration; unreadable TLS files
// are named.
func Open(cfg Config) (*Ledger, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tc, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		TLS:         tc,
		DialTimeout: cfg.Timeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd ledger %s: %w", cfg, err)
	}
	base, cancel := context.WithCancel(context.Background())
	return &Ledger{
		cfg:    cfg,
		cli:    cli,
		tls:    tc,
		runs:   cfg.Prefix + "/runs/",
		claims: cfg.Prefix + "/claims/",
		ttl:    cfg.ttlSeconds(),
		now:    time.Now,
		base:   base,
		cancel: cancel,
	}, nil
}

// Config returns the ledger's configuration with its defaults filled in.
func (l *Ledger) Config() Config { return l.cfg }

// RunKey returns the key of run's record: <prefix>/runs/<run>.
func (l *Ledger) RunKey(run string) string { return l.runs + run }

// ClaimKey returns the key of run's claim: <prefix>/claims/<run>, present
// while a resumer holds a claim on the run.
func (l *Ledger) ClaimKey(run string) string { return l.claims + run }

var errClosed = errors.New("closed")

// fail wraps a storage error with the ledger's URL, the transition and the
// run; a deadline becomes an explicit fail-closed message.
func (l *Ledger) fail(op, run string, err error) error {
	where := fmt.Sprintf("etcd ledger %s", l.cfg)
	if run != "" {
		where += fmt.Sprintf(": %s of run %q", op, run)
	} else {
		where += ": " + op
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer within %s (the cluster is unreachable, has no quorum, or refuses this client; %s): %w",
			where, l.cfg.Timeout, l.diagnose(diagnoseBudget(l.cfg.Timeout)), err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// begin bounds ctx by the ledger's timeout, less the part kept to diagnose
// a call that got no answer.
func (l *Ledger) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, nil, errClosed
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout-diagnoseBudget(l.cfg.Timeout))
	return ctx, cancel, nil
}

// snapshot is what one linearizable read saw of a run.
type snapshot struct {
	rec      *ledger.Record // nil: no record
	raw      []byte         // the record key's value as stored
	recRev   int64          // the record key's mod revision; 0: absent
	claimRev int64          // the claim key's mod revision; 0: absent
	claim    claimValue     // the claim key's value, when present
	lease    clientv3.LeaseID
}

// claimValue is the JSON stored at the claim key.
type claimValue struct {
	Fence uint64 `json:"fence"`
}

// read reads run's record and claim key at one revision (a linearizable
// read-only transaction, tried again on transient errors).
func (l *Ledger) read(ctx context.Context, run string) (snapshot, error) {
	resp, err := retrying(ctx, func() (*clientv3.TxnResponse, error) {
		return l.cli.Txn(ctx).Then(
			clientv3.OpGet(l.RunKey(run)),
			clientv3.OpGet(l.ClaimKey(run)),
		).Commit()
	})
	if err != nil {
		return snapshot{}, err
	}
	var s snapshot
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		rec, err := l.decode(run, kvs[0].Value)
		if err != nil {
			return snapshot{}, err
		}
		s.rec, s.raw, s.recRev = &rec, kvs[0].Value, kvs[0].ModRevision
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		s.claimRev, s.lease = kvs[0].ModRevision, clientv3.LeaseID(kvs[0].Lease)
		if err := json.Unmarshal(kvs[0].Value, &s.claim); err != nil {
			return snapshot{}, fmt.Errorf("claim key %s holds no claim: %v", l.ClaimKey(run), err)
		}
	}
	return s, nil
}

func (l *Ledger) decode(run string, b []byte) (ledger.Record, error) {
	var rec ledger.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("record %s: %v", l.RunKey(run), err)
	}
	if rec.Run != run || !rec.State.Valid() {
		return rec, fmt.Errorf("record %s: names run %q in state %q", l.RunKey(run), rec.Run, rec.State)
	}
	return rec, nil
}

// holderGone is the etcd judgement of a resuming record's holder: gone when
// no claim key of its fence exists (the lease expired or was revoked).
func (s snapshot) holderGone() bool {
	return s.rec != nil && s.rec.State == ledger.StateResuming && (s.claimRev == 0 || s.claim.Fence != s.rec.Fence)
}

// result is a committed transition.
type result struct {
	before   snapshot
	next     ledger.Record
	changed  bool
	rev      int64            // the revision of the write (the record's new mod revision)
	revoke   clientv3.LeaseID // the lease of a claim key the write deleted
	newLease clientv3.LeaseID // the lease the write bound the claim key to
}

// transition runs op on run: read, ledger.Apply, and a transaction comparing
// both keys' mod revisions, retried while another writer came first. prepare
// turns the snapshot into the op (Claim's judgement of a gone holder, Live's
// check of its claim key); lease returns the lease a resuming next binds the
// claim key to (nil: the op never makes one). A transaction that got a
// transient error is tried again from a fresh read, unless that read shows
// the value it wrote: then it was committed (retry.go).
func (l *Ledger) transition(ctx context.Context, run string, prepare func(snapshot) (ledger.Op, error), lease func() (clientv3.LeaseID, error)) (result, error) {
	var b backoff
	var unknown map[string]result // transactions of unknown outcome, by the record value they wrote
	for {
		s, err := l.read(ctx, run)
		if err != nil {
			return result{}, err
		}
		if res, ok := unknown[string(s.raw)]; ok && s.raw != nil {
			res.rev = s.recRev // committed after all
			return res, nil
		}
		op, err := prepare(s)
		if err != nil {
			return result{before: s}, err
		}
		next, changed, err := ledger.Apply(s.rec, op, l.now())
		if err != nil || !changed {
			return result{before: s, next: next}, err
		}
		val, err := json.Marshal(next)
		if err != nil {
			return result{}, err
		}
		runKey, claimKey := l.RunKey(run), l.ClaimKey(run)
		ops := []clientv3.Op{clientv3.OpPut(runKey, string(val))}
		res := result{before: s, next: next, changed: true}
		if s.claimRev != 0 {
			// The claim key exists only while resuming: whatever leaves
			// (or re-enters) resuming deletes it.
			ops = append(ops, clientv3.OpDelete(claimKey))
			res.revoke = s.lease
		}
		if next.State == ledger.StateResuming {
			id, err := lease()
			if err != nil {
				return result{}, err
			}
			cv, _ := json.Marshal(claimValue{Fence: next.Fence})
			ops = append(ops, clientv3.OpPut(claimKey, string(cv), clientv3.WithLease(id)))
			res.newLease = id
		}
		resp, err := l.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(runKey), "=", s.recRev),
			clientv3.Compare(clientv3.ModRevision(claimKey), "=", s.claimRev),
		).Then(ops...).Commit()
		if err != nil {
			if err := b.again(ctx, err); err != nil {
				return result{}, err
			}
			if unknown == nil {
				unknown = map[string]result{}
			}
			unknown[string(val)] = res
			continue
		}
		if resp.Succeeded {
			res.rev = resp.Header.Revision
			return res, nil
		}
		// Another writer came first (or the claim lease expired): again.
	}
}

// revoke revokes a lease in the background, best effort: its claim key is
// gone already (or was never written), and the lease would expire within
// its TTL anyway. Close waits for it (at most Config.Timeout).
func (l *Ledger) revoke(id clientv3.LeaseID) {
	if id == clientv3.NoLease {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
		defer cancel()
		_, _ = l.cli.Revoke(ctx, id)
	})
}

// apply runs a transition that needs no lease and returns the record after
// it.
func (l *Ledger) apply(ctx context.Context, op ledger.Op) (ledger.Record, error) {
	res, err := l.applyResult(ctx, op)
	return res.next, err
}

// applyResult is apply returning the whole result; the lease of a claim key
// the transition deleted is revoked.
func (l *Ledger) applyResult(ctx context.Context, op ledger.Op) (result, error) {
	ctx, cancel, err := l.begin(ctx)
	if err != nil {
		return result{}, l.fail(ledger.OpName(op), op.RunID(), err)
	}
	defer cancel()
	res, err := l.transition(ctx, op.RunID(), func(snapshot) (ledger.Op, error) { return op, nil }, nil)
	if err != nil {
		return res, l.classify(ledger.OpName(op), op.RunID(), err)
	}
	l.revoke(res.revoke)
	return res, nil
}

func (l *Ledger) release(ctx context.Context, run string, fence uint64) (result, error) {
	return l.applyResult(ctx, ledger.ReleaseOp{Run: run, Fence: fence})
}

// classify passes refusals and invalid requests through and wraps storage
// errors.
func (l *Ledger) classify(op, run string, err error) error {
	var le *ledger.Error
	if errors.As(err, &le) || errors.Is(err, ledger.ErrInvalid) {
		return err
	}
	return l.fail(op, run, err)
}

// Get returns run's record (purged included), read linearizably; a run
// without a record is an error matching ledger.ErrNotFound. Other errors
// name the endpoints.
func (l *Ledger) Get(ctx context.Context, run string) (ledger.Record, error) {
	if !ledger.ValidRun(run) {
		return ledger.Record{}, fmt.Errorf("%w: get of run %q: not a run id", ledger.ErrInvalid, run)
	}
	ctx, cancel, err := l.begin(ctx)
	if err != nil {
		return ledger.Record{}, l.fail("get", run, err)
	}
	defer cancel()
	resp, err := retrying(ctx, func() (*clientv3.GetResponse, error) { return l.cli.Get(ctx, l.RunKey(run)) })
	if err != nil {
		return ledger.Record{}, l.fail("get", run, err)
	}
	if len(resp.Kvs) == 0 {
		return ledger.Record{}, fmt.Errorf("etcd ledger %s: run %q: %w", l.cfg, run, ledger.ErrNotFound)
	}
	rec, err := l.decode(run, resp.Kvs[0].Value)
	if err != nil {
		return ledger.Record{}, l.fail("get", run, err)
	}
	return rec, nil
}

// List returns every record under the prefix, purged ones included, sorted
// by run id, read linearizably at one revision.
func (l *Ledger) List(ctx context.Context) ([]ledger.Record, error) {
	ctx, cancel, err := l.begin(ctx)
	if err != nil {
		return nil, l.fail("list", "", err)
	}
	defer cancel()
	resp, err := retrying(ctx, func() (*clientv3.GetResponse, error) {
		return l.cli.Get(ctx, l.runs, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	})
	if err != nil {
		return nil, l.fail("list", "", err)
	}
	out := make([]ledger.Record, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		run := strings.TrimPrefix(string(kv.Key), l.runs)
		rec, err := l.decode(run, kv.Value)
		if err != nil {
			return nil, l.fail("list", "", err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// Suspended is ledger.Ledger.Suspended: one compare-and-swap of the record.
func (l *Ledger) Suspended(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Claim is ledger.Ledger.Claim. It grants a lease of Config.ClaimTTL
// (while it reads the record), and in one transaction moves the record to
// resuming with fence + 1 and writes the claim key bound to that lease; the
// returned handle keeps the lease alive until Live or Release, and closes
// Lost when it expires. A resuming record is taken only when its claim key
// is gone (req.GoneHolder is ignored). Refusals are those of ledger.Apply;
// the lease of a refused Claim is revoked.
func (l *Ledger) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	ctx, cancel, err := l.begin(ctx)
	if err != nil {
		return nil, l.fail("claim", req.Run, err)
	}
	defer cancel()
	if _, _, err := ledger.Apply(nil, ledger.ClaimOp{ClaimRequest: req}, l.now()); errors.Is(err, ledger.ErrInvalid) {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		g := l.grant(ctx)
		res, err := l.transition(ctx, req.Run, func(s snapshot) (ledger.Op, error) {
			return ledger.ClaimOp{ClaimRequest: req, HolderGone: s.holderGone()}, nil
		}, g.wait)
		if err == nil {
			return l.newClaim(res), nil
		}
		var le *ledger.Error
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt < 2:
			continue // the lease expired before the transaction: a new one
		case errors.As(err, &le):
			g.discard()
		}
		// On a storage error the outcome is unknown: the lease, never kept
		// alive, expires within the TTL.
		return nil, l.classify("claim", req.Run, err)
	}
}

var _ ledger.HolderJudge = (*Ledger)(nil)

// HolderGone is ledger.HolderJudge: the resuming holder of rec is gone
// exactly when no claim key of rec's fence exists (its lease expired or was
// revoked), read linearizably. Errors name the endpoints.
func (l *Ledger) HolderGone(ctx context.Context, rec ledger.Record) (bool, error) {
	ctx, cancel, err := l.begin(ctx)
	if err != nil {
		return false, l.fail("judge the holder", rec.Run, err)
	}
	defer cancel()
	s, err := l.read(ctx, rec.Run)
	if err != nil {
		return false, l.fail("judge the holder", rec.Run, err)
	}
	return s.claimRev == 0 || s.claim.Fence != rec.Fence, nil
}

// pendingLease is a lease being granted while the record is read.
type pendingLease struct {
	l    *Ledger
	done chan struct{}
	id   clientv3.LeaseID
	err  error
}

func (l *Ledger) grant(ctx context.Context) *pendingLease {
	g := &pendingLease{l: l, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		resp, err := retrying(ctx, func() (*clientv3.LeaseGrantResponse, error) { return l.cli.Grant(ctx, l.ttl) })
		if err != nil {
			g.err = fmt.Errorf("grant a lease of %d s: %w", l.ttl, err)
			return
		}
		g.id = resp.ID
	}()
	return g
}

func (g *pendingLease) wait() (clientv3.LeaseID, error) {
	<-g.done
	return g.id, g.err
}

// discard revokes the lease once granted (in the background).
func (g *pendingLease) discard() {
	go func() {
		if id, err := g.wait(); err == nil {
			g.l.revoke(id)
		}
	}()
}

// Live is ledger.Ledger.Live. Beyond ledger.Apply's rows, a resuming record
// whose claim key is gone (the lease expired or was revoked: the claim is
// lost) is refused with errdef.ErrClaimConflict. The transaction deletes the
// claim key; its lease is then revoked.
func (l *Ledger) Live(ctx context.Context, run string, fence uint64, container ledger.Container) (ledger.Record, error) {
	res, err := l.live(ctx, run, fence, container)
	return res.next, err
}

// live runs Live and revokes the lease of the claim key it deleted (the
// result's revoke).
func (l *Ledger) live(ctx context.Context, run string, fence uint64, container ledger.Container) (result, error) {
	ctx, cancel, err := l.begin(ctx)
	if err != nil {
		return result{}, l.fail("live", run, err)
	}
	defer cancel()
	op := ledger.LiveOp{Run: run, Fence: fence, Container: container}
	res, err := l.transition(ctx, run, func(s snapshot) (ledger.Op, error) {
		if s.rec != nil && s.rec.State == ledger.StateResuming && s.rec.Fence == fence && s.holderGone() {
			c := s.rec.Clone()
			return nil, &ledger.Error{
				Class: errdef.ErrClaimConflict, Op: "live", Run: run, Record: &c,
				Reason: fmt.Sprintf("fence %d no longer claims the run for %s: the claim is lost (its lease expired or was revoked: claim key %s is gone)", fence, container, l.ClaimKey(run)),
			}
		}
		return op, nil
	}, nil)
	if err != nil {
		return res, l.classify("live", run, err)
	}
	l.revoke(res.revoke)
	return res, nil
}

// liveFast is the Live of a claim that knows the revision its Claim wrote:
// while the record and the claim key are unchanged since (both mod
// revisions equal rev), the record is the claim's and Live needs no read —
// one transaction. Otherwise it is live.
func (l *Ledger) liveFast(ctx context.Context, claimed ledger.Record, rev int64, container ledger.Container) (result, error) {
	op := ledger.LiveOp{Run: claimed.Run, Fence: claimed.Fence, Container: container}
	next, changed, err := ledger.Apply(&claimed, op, l.now())
	if err == nil && changed && rev != 0 {
		cctx, cancel, err := l.begin(ctx)
		if err != nil {
			return result{}, l.fail("live", claimed.Run, err)
		}
		defer cancel()
		val, err := json.Marshal(next)
		if err != nil {
			return result{}, err
		}
		runKey, claimKey := l.RunKey(claimed.Run), l.ClaimKey(claimed.Run)
		resp, err := l.cli.Txn(cctx).If(
			clientv3.Compare(clientv3.ModRevision(runKey), "=", rev),
			clientv3.Compare(clientv3.ModRevision(claimKey), "=", rev),
		).Then(clientv3.OpPut(runKey, string(val)), clientv3.OpDelete(claimKey)).Commit()
		switch {
		case err != nil && transient(err):
			// Unknown outcome: live reads the record (committed: live with
			// this fence and container, no change).
			return l.live(ctx, claimed.Run, claimed.Fence, container)
		case err != nil:
			return result{}, l.fail("live", claimed.Run, err)
		}
		if resp.Succeeded {
			return result{next: next, changed: true, rev: resp.Header.Revision}, nil
		}
	}
	return l.live(ctx, claimed.Run, claimed.Fence, container)
}

// Release is ledger.Ledger.Release: a resuming record with this fence goes
// back to suspended, its claim key deleted and its lease revoked; otherwise
// nothing changes.
func (l *Ledger) Release(ctx context.Context, run string, fence uint64) (ledger.Record, error) {
	return l.apply(ctx, ledger.ReleaseOp{Run: run, Fence: fence})
}

// Discard is ledger.Ledger.Discard. Discarding a resuming record (force)
// also deletes its claim key and revokes its lease, so the resumer's handle
// reports the claim lost.
func (l *Ledger) Discard(ctx context.Context, run string, force bool) (ledger.Record, error) {
	return l.apply(ctx, ledger.DiscardOp{Run: run, Force: force})
}

// Purge is ledger.Ledger.Purge.
func (l *Ledger) Purge(ctx context.Context, run string) (ledger.Record, error) {
	return l.apply(ctx, ledger.PurgeOp{Run: run})
}

// HandedOff is ledger.Ledger.HandedOff: one compare-and-swap of the record.
func (l *Ledger) HandedOff(ctx context.Context, req ledger.HandOffRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Received is ledger.Ledger.Received: one compare-and-swap of the record.
func (l *Ledger) Received(ctx context.Context, req ledger.ReceiveRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Recalled is ledger.Ledger.Recalled: one compare-and-swap of the record.
func (l *Ledger) Recalled(ctx context.Context, req ledger.RecallRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Unwound is ledger.Ledger.Unwound: one compare-and-swap of the record.
func (l *Ledger) Unwound(ctx context.Context, req ledger.UnwindRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Repinned is ledger.Ledger.Repinned: one compare-and-swap of the record.
func (l *Ledger) Repinned(ctx context.Context, req ledger.RepinRequest) (ledger.Record, error) {
	return l.apply(ctx, req)
}

// Close waits for the lease revocations still in flight (each at most
// Config.Timeout), stops every claim's keep-alive (their leases then expire
// within the TTL: Release claims before Close) and closes the client; later
// calls fail.
func (l *Ledger) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.bg.Wait()
	l.cancel()
	return l.cli.Close()
}
