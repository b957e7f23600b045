package etcdharness

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestClusterLifecycle starts a 3-member cluster, writes through it, kills
// and restarts a member (the data survives), and checks that cleanup leaves
// no process of the cluster running.
func TestClusterLifecycle(t *testing.T) {
	var c *Cluster
	t.Run("cluster", func(t *testing.T) {
		c = Start(t)
		if len(c.Members) != 3 {
			t.Fatalf("members = %d, want 3", len(c.Members))
		}
		for _, ep := range c.Endpoints() {
			if !strings.HasPrefix(ep, "127.0.0.1:") {
				t.Fatalf("endpoint %q is not on loopback", ep)
			}
		}
		cli, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cli.Put(ctx, "k", "v1"); err != nil {
			t.Fatal(err)
		}
		leader := c.Leader(t)
		if leader < 0 {
			t.Fatal("no leader")
		}
		c.Kill(t, leader)
		if c.Members[leader].Running() {
			t.Fatal("killed member still running")
		}
		// Two members keep a quorum: once they elect a leader, writes go
		// on (a write in flight at the kill may time out: unknown outcome).
		c.WaitLeader(t)
		if _, err := cli.Put(ctx, "k", "v2"); err != nil {
			t.Fatalf("put with one member down: %v", err)
		}
		c.Restart(t, leader)
		one, err := c.Client(c.Members[leader])
		if err != nil {
			t.Fatal(err)
		}
		defer one.Close()
		resp, err := one.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v2" {
			t.Fatalf("restarted member reads %v, want v2", resp.Kvs)
		}
		if pids := c.Processes(); len(pids) != 3 {
			t.Fatalf("processes of the cluster = %v, want 3", pids)
		}
	})
	if c == nil {
		return
	}
	if pids := c.Processes(); len(pids) != 0 {
		t.Fatalf("after cleanup, processes of the cluster survive: %v", pids)
	}
}

// TestTLSCluster checks that a TLS cluster serves the test's client
// certificate and refuses a client with no certificate or one signed by
// another CA.
func TestTLSCluster(t *testing.T) {
	c := StartTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if _, err := good.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put with the CA's client certificate: %v", err)
	}
	for _, tc := range []struct{ name, cert, key string }{
		{"no client certificate", "", ""},
		{"client certificate of another CA", c.TLS.OtherClientCert, c.TLS.OtherClientKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := c.TLS.ClientConfig(tc.cert, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: cfg, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				return // refused at dial: fine
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if _, err := cli.Get(ctx, "k"); err == nil {
				t.Fatal("read without the right client certificate succeeded")
			} else if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "certificate") && !strings.Contains(err.Error(), "tls") {
				t.Logf("refused with: %v", err)
			}
		})
	}
}
