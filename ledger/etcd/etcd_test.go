package etcd

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// TestUnreachableFailsClosed: with nothing listening at the endpoints,
// every call fails within the timeout with an error naming the endpoints,
// never a refusal.
func TestUnreachableFailsClosed(t *testing.T) {
	var eps []string
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, l.Addr().String())
		l.Close() // nothing listens there now
	}
	const timeout = 700 * time.Millisecond
	l, err := Open(Config{Endpoints: eps, Prefix: "/t", Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // after the parallel subtests
	ctr := ledger.Container{Host: "h", Namespace: "n", ID: "c"}
	calls := map[string]func(ctx context.Context) error{
		"get":  func(ctx context.Context) error { _, err := l.Get(ctx, "r"); return err },
		"list": func(ctx context.Context) error { _, err := l.List(ctx); return err },
		"claim": func(ctx context.Context) error {
			_, err := l.Claim(ctx, ledger.ClaimRequest{Run: "r", Generation: 1, Ref: digest.FromString("x"), Holder: ledger.Holder{Container: ctr}})
			return err
		},
		"live":    func(ctx context.Context) error { _, err := l.Live(ctx, "r", 1, ctr); return err },
		"discard": func(ctx context.Context) error { _, err := l.Discard(ctx, "r", true); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			err := call(context.Background())
			took := time.Since(start)
			if err == nil || errdef.Class(err) != nil || errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("want a storage error, got %v", err)
			}
			for _, ep := range eps {
				if !strings.Contains(err.Error(), ep+" refused the connection") {
					t.Errorf("error does not say endpoint %s refused the connection: %v", ep, err)
				}
			}
			if took > timeout+time.Second {
				t.Errorf("failed after %s, timeout %s", took, timeout)
			}
			t.Logf("after %s: %v", took.Round(time.Millisecond), err)
		})
	}
}

func TestClosed(t *testing.T) {
	l, err := Open(Config{Endpoints: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(context.Background(), "r"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
