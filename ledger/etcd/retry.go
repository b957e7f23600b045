package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A cluster that keeps its quorum still answers some calls with an error
// while it changes leader, or while the member a client talks to is down
// or restarting: "etcdserver: leader changed", "no leader", "request timed
// out", a connection reset (gRPC code Unavailable). Such a call is tried
// again, after a short pause, until Config.Timeout: only a cluster that
// stays unreachable or without quorum for that long fails the call
// (docs/design.md "The run ledger": fail closed within --ledger-timeout).
//
// A read is simply read again. A transaction that got such an error may
// have been committed all the same; the transition reads the record again
// and, when it finds exactly the value one of its own transactions wrote
// (the record's JSON, whose Updated time has nanoseconds), takes that
// transaction as committed; otherwise it runs the transition on what it
// found — the compare-and-swap keeps at most one of its tries.

// Backoff bounds of the pause between tries of a transient error.
const (
	retryFirst = 25 * time.Millisecond
	retryMax   = 400 * time.Millisecond
)

// transient reports whether err is an answer of a cluster that may answer
// again soon: gRPC code Unavailable, from the server (rpctypes) or the
// connection.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	if st, ok := status.FromError(err); ok {
		return st.Code() == codes.Unavailable
	}
	return false
}

// backoff paces the tries of one call.
type backoff struct{ pause time.Duration }

// again returns nil after a pause when err is transient and ctx leaves
// time for another try; otherwise it returns the error to fail with: err
// itself, or ctx's error naming err as the last answer (so that a call
// that kept getting transient errors until its deadline fails as one that
// got no answer).
func (b *backoff) again(ctx context.Context, err error) error {
	if !transient(err) {
		return err
	}
	if b.pause == 0 {
		b.pause = retryFirst
	} else {
		b.pause = min(2*b.pause, retryMax)
	}
	t := time.NewTimer(b.pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w (the last answer: %v)", ctx.Err(), err)
	case <-t.C:
		return nil
	}
}

// retrying calls f until it returns no transient error or ctx ends.
func retrying[T any](ctx context.Context, f func() (T, error)) (T, error) {
	var b backoff
	for {
		v, err := f()
		if err == nil {
			return v, nil
		}
		if err := b.again(ctx, err); err != nil {
			return v, err
		}
	}
}
