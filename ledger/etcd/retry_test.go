package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestTransient: the answers of a cluster changing leader, or of a member
// going away, are transient; refusals of the request and the caller's own
// deadline are not.
func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrLeaderChanged, true},
		{rpctypes.ErrGRPCLeaderChanged, true},
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrTimeoutDueToLeaderFail, true},
		{fmt.Errorf("wrapped: %w", rpctypes.ErrTimeout), true},
		{status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{rpctypes.ErrLeaseNotFound, false},
		{rpctypes.ErrCompacted, false},
		{status.Error(codes.PermissionDenied, "no"), false},
		{context.DeadlineExceeded, false},
		{context.Canceled, false},
		{errors.New("closed"), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}

// TestRetrying: transient errors are tried again with a growing pause
// until the call succeeds; another error ends it at once; a deadline ends
// it as the deadline, naming the last answer.
func TestRetrying(t *testing.T) {
	ctx := context.Background()
	n := 0
	v, err := retrying(ctx, func() (int, error) {
		if n++; n < 3 {
			return 0, rpctypes.ErrLeaderChanged
		}
		return 7, nil
	})
	if v != 7 || err != nil || n != 3 {
		t.Fatalf("after two transient errors: %d, %v after %d calls", v, err, n)
	}
	n = 0
	_, err = retrying(ctx, func() (int, error) { n++; return 0, rpctypes.ErrLeaseNotFound })
	if !errors.Is(err, rpctypes.ErrLeaseNotFound) || n != 1 {
		t.Fatalf("a refusal: %v after %d calls", err, n)
	}
	dctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = retrying(dctx, func() (int, error) { return 0, rpctypes.ErrNoLeader })
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("transient errors until the deadline: %v after %s", err, time.Since(start))
	}
	if want := rpctypes.ErrNoLeader.Error(); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), want) {
		t.Fatalf("the deadline error does not name the last answer %q: %v", want, err)
	}
}
