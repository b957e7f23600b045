package etcd

import (
	"context"
	"errors"
	"sync"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// claim is the ledger.Claim of a Claim: the resuming record it wrote and the
// lease bound to its claim key, kept alive until Live or Release.
type claim struct {
	l        *Ledger
	rec      ledger.Record
	replaced *ledger.Holder
	lease    clientv3.LeaseID
	stop     context.CancelFunc // ends the keep-alive
	lost     chan struct{}

	mu       sync.Mutex // serializes Live, Release and the keep-alive's end
	ended    bool       // Live or Release succeeded: the lease is not ours to watch
	lostOnce sync.Once
}

var _ ledger.Claim = (*claim)(nil)

// newClaim starts keeping res's lease alive. The keep-alive channel closes
// when the lease expires, is revoked, or can no longer be renewed within
// its TTL (the cluster unreachable or quorum-less): the claim is then lost,
// unless Live or Release ended it first.
func (l *Ledger) newClaim(res result, lease clientv3.LeaseID) *claim {
	c := &claim{l: l, rec: res.next.Clone(), replaced: ledger.Replaced(res.before.rec), lease: lease, lost: make(chan struct{})}
	ctx, stop := context.WithCancel(l.base)
	c.stop = stop
	ka, err := l.cli.KeepAlive(ctx, lease)
	if err != nil {
		stop()
		c.markLost()
		return c
	}
	go func() {
		for range ka {
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.ended {
			c.markLost()
		}
	}()
	return c
}

func (c *claim) markLost() { c.lostOnce.Do(func() { close(c.lost) }) }

// end stops the keep-alive and revokes the lease unless the transition that
// ended the claim revoked it (best effort: it expires anyway).
func (c *claim) end(ctx context.Context, revoked clientv3.LeaseID) {
	c.ended = true
	c.stop()
	if revoked != c.lease {
		c.l.revoke(ctx, c.lease)
	}
}

// Record returns the resuming record the claim wrote.
func (c *claim) Record() ledger.Record { return c.rec.Clone() }

// Fence returns the claim's fence token.
func (c *claim) Fence() uint64 { return c.rec.Fence }

// Replaced returns the holder the claim fenced out, or nil.
func (c *claim) Replaced() *ledger.Holder {
	if c.replaced == nil {
		return nil
	}
	h := *c.replaced
	return &h
}

// Lost returns a channel closed when the claim is lost before Live or
// Release: its lease expired, was revoked (a forced Discard), or could not
// be renewed within its TTL, or Live was refused.
func (c *claim) Lost() <-chan struct{} { return c.lost }

// Live is Ledger.Live with the claim's run and fence. On success the
// keep-alive stops and the lease is revoked; a refusal marks the claim
// lost.
func (c *claim) Live(ctx context.Context, container ledger.Container) (ledger.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res, err := c.l.live(ctx, c.rec.Run, c.rec.Fence, container)
	var le *ledger.Error
	switch {
	case err == nil:
		c.end(ctx, res.revoke)
	case errors.As(err, &le):
		c.end(ctx, res.revoke)
		c.markLost()
	}
	return res.next, err
}

// Release is Ledger.Release with the claim's run and fence; the keep-alive
// stops and the lease is revoked. A storage error leaves the claim held
// (retry Release, or let the lease expire by closing the ledger).
func (c *claim) Release(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	res, err := c.l.release(ctx, c.rec.Run, c.rec.Fence)
	if err == nil {
		c.end(ctx, res.revoke)
	}
	return err
}
