package etcdledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	etcdledger "github.com/sandbox-resume/sandbox-resume/ledger/etcd"
	"github.com/sandbox-resume/sandbox-resume/test/integration/etcdharness"
)

var (
	created  = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	runtime0 = ledger.Container{Host: "host-a", Namespace: "ns", ID: "runtime-0"}
)

func refOf(run string, gen uint64) digest.Digest {
	return digest.FromString(fmt.Sprintf("ref of %s generation %d", run, gen))
}

func resumerOn(host string, i int) ledger.Holder {
	return ledger.Holder{
		Container: ledger.Container{Host: host, Namespace: "ns", ID: fmt.Sprintf("inc-%s-%d", host, i)},
		PID:       1000 + i, Start: fmt.Sprintf("start-%d", i), Boot: "boot-" + host,
	}
}

// suspend records generation 1 of run, suspended.
func suspend(t testing.TB, l ledger.Ledger, run string) ledger.Record {
	t.Helper()
	rec, err := l.Suspended(context.Background(), ledger.SuspendRequest{Run: run, Generation: 1, Ref: refOf(run, 1), Container: runtime0, Created: created})
	if err != nil {
		t.Fatalf("Suspended: %v", err)
	}
	return rec
}

func claimReq(run string, h ledger.Holder) ledger.ClaimRequest {
	return ledger.ClaimRequest{Run: run, Generation: 1, Ref: refOf(run, 1), Holder: h}
}

// storageError checks that err is no refusal and names every endpoint.
func storageError(t testing.TB, what string, err error, endpoints []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if c := errdef.Class(err); c != nil || errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("%s: want a storage error, got %s: %v", what, c, err)
	}
	for _, ep := range endpoints {
		if !strings.Contains(err.Error(), ep) {
			t.Fatalf("%s: error does not name endpoint %s: %v", what, ep, err)
		}
	}
}

// TestQuorumLossFailsClosed: with 2 of 3 members stopped, every call fails
// within the timeout naming the endpoints and nothing changes; with the
// members back, the same ledger claims the run.
func TestQuorumLossFailsClosed(t *testing.T) {
	c := etcdharness.Start(t)
	const timeout = 2 * time.Second
	l := open(t, c, etcdledger.Config{Timeout: timeout})
	const run = "quorum-1"
	before := suspend(t, l, run)

	c.Stop(t, 0)
	c.Stop(t, 1)
	calls := map[string]func() error{
		"claim": func() error {
			_, err := l.Claim(context.Background(), claimReq(run, resumerOn("host-b", 1)))
			return err
		},
		"get":  func() error { _, err := l.Get(context.Background(), run); return err },
		"list": func() error { _, err := l.List(context.Background()); return err },
		"discard": func() error {
			_, err := l.Discard(context.Background(), run, true)
			return err
		},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for name, call := range calls {
		wg.Go(func() {
			start := time.Now()
			err := call()
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if took > timeout+time.Second {
				t.Errorf("%s without quorum failed after %s, timeout %s", name, took, timeout)
			}
			if err == nil || errdef.Class(err) != nil || !strings.Contains(err.Error(), c.Endpoints()[2]+" reachable") {
				t.Errorf("%s without quorum: want a storage error naming the reachable endpoint, got %v", name, err)
			}
			for _, ep := range c.Endpoints()[:2] {
				if err != nil && !strings.Contains(err.Error(), ep+" refused the connection") {
					t.Errorf("%s without quorum: error does not say %s refused the connection: %v", name, ep, err)
				}
			}
			t.Logf("%s without quorum, after %s: %v", name, took.Round(time.Millisecond), err)
		})
	}
	wg.Wait()

	c.StartMember(t, 0)
	c.StartMember(t, 1)
	c.WaitServing(t)
	got, err := l.Get(context.Background(), run)
	if err != nil {
		t.Fatalf("Get with the members back: %v", err)
	}
	if got.State != before.State || got.Fence != before.Fence {
		t.Fatalf("the record changed while the cluster had no quorum: %s, was %s", got, before)
	}
	cl, err := l.Claim(context.Background(), claimReq(run, resumerOn("host-b", 2)))
	if err != nil {
		t.Fatalf("Claim with the members back: %v", err)
	}
	if _, err := cl.Live(context.Background(), cl.Record().Holder.Container); err != nil {
		t.Fatalf("Live: %v", err)
	}
}

// TestTLSClientRefused: a client with the cluster's CA and client
// certificate works; one with no client certificate, or one of another CA,
// fails closed with an error naming the endpoints and the TLS failure.
func TestTLSClientRefused(t *testing.T) {
	c := etcdharness.StartTLS(t)
	good := open(t, c, etcdledger.Config{})
	suspend(t, good, "tls-1")
	for _, tc := range []struct {
		name string
		tls  etcdledger.TLS
	}{
		{"no client certificate", etcdledger.TLS{CACert: c.TLS.CA}},
		{"a client certificate of another CA", etcdledger.TLS{CACert: c.TLS.CA, Cert: c.TLS.OtherClientCert, Key: c.TLS.OtherClientKey}},
		{"no TLS at all", etcdledger.TLS{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := etcdledger.Config{Endpoints: c.Endpoints(), Prefix: good.Config().Prefix, TLS: tc.tls, Timeout: time.Second}
			if !tc.tls.Enabled() {
				// open would fill in the good certificates.
				l, err := etcdledger.Open(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				_, err = l.Get(context.Background(), "tls-1")
				storageError(t, "Get", err, c.Endpoints())
				if !strings.Contains(err.Error(), "a TLS server") {
					t.Errorf("the error does not say the server may want TLS: %v", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			l := open(t, c, cfg)
			_, err := l.Get(context.Background(), "tls-1")
			storageError(t, "Get", err, c.Endpoints())
			_, err = l.Claim(context.Background(), claimReq("tls-1", resumerOn("host-b", 1)))
			storageError(t, "Claim", err, c.Endpoints())
			if !strings.Contains(err.Error(), c.Endpoints()[0]+" refused this TLS client: tls: certificate required") {
				t.Errorf("the error does not say the TLS client was refused: %v", err)
			}
			t.Logf("refused: %v", err)
		})
	}
	if rec, err := good.Get(context.Background(), "tls-1"); err != nil || rec.State != ledger.StateSuspended {
		t.Fatalf("the refused clients changed the record: %s, %v", rec, err)
	}
}
