// Package etcdledger tests ledger/etcd against real 3-member etcd clusters
// started by test/integration/etcdharness (docs/design.md "The run ledger",
// "Operating a fleet"): the conformance suite, failing closed, TLS, lost claims,
// linearizability and the claim → Live benchmark. Under -short, or without
// bin/etcd (outside CI=true), the tests skip.
package etcdledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	etcdledger "github.com/sandbox-resume/sandbox-resume/ledger/etcd"
	"github.com/sandbox-resume/sandbox-resume/test/integration/etcdharness"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// prefix returns a fresh key prefix: every ledger on a shared cluster starts
// empty.
func prefix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "/test-" + hex.EncodeToString(b)
}

// open opens a ledger on c under a fresh prefix (unless cfg names one) and
// closes it at the end of t.
func open(t testing.TB, c *etcdharness.Cluster, cfg etcdledger.Config) *etcdledger.Ledger {
	t.Helper()
	if cfg.Endpoints == nil {
		cfg.Endpoints = c.Endpoints()
	}
	if cfg.Prefix == "" {
		cfg.Prefix = prefix()
	}
	if c.TLS != nil && !cfg.TLS.Enabled() {
		cfg.TLS = etcdledger.TLS{CACert: c.TLS.CA, Cert: c.TLS.ClientCert, Key: c.TLS.ClientKey}
	}
	l, err := etcdledger.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// backend is the conformance suite's view of an etcd ledger: a holder is
// gone when its claim's lease is revoked (as if it expired).
type backend struct {
	*etcdledger.Ledger
	c *etcdharness.Cluster
}

// MakeHolderGone revokes the lease of run's claim key, as its expiry would,
// and waits until the key is gone. It returns nil: ledger/etcd ignores
// ClaimRequest.GoneHolder.
func (b backend) MakeHolderGone(t testing.TB, run string) *ledger.Holder {
	t.Helper()
	expireClaim(t, b.c, b.Ledger, run)
	return nil
}

// expireClaim revokes the lease bound to run's claim key and checks that the
// key is gone.
func expireClaim(t testing.TB, c *etcdharness.Cluster, l *etcdledger.Ledger, run string) {
	t.Helper()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, l.ClaimKey(run))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("no claim key %s bound to a lease: %v", l.ClaimKey(run), resp.Kvs)
	}
	if _, err := cli.Revoke(ctx, clientv3LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("revoke the claim's lease: %v", err)
	}
	resp, err = cli.Get(ctx, l.ClaimKey(run))
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("claim key %s after revoking its lease: %v, %v", l.ClaimKey(run), resp.Kvs, err)
	}
}

func clientv3LeaseID(id int64) clientv3.LeaseID { return clientv3.LeaseID(id) }
