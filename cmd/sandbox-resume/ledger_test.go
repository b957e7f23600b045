package main

import (
	"context"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/ledger/bolt"
	"github.com/sandbox-resume/sandbox-resume/ledger/etcd"
)

// TestLedgerFlagsShownWhereUsed: the ledger flags exist on suspend, resume,
// runs and discard only (docs/design.md "CLI contract"), and
// --ledger-claim-ttl is hidden.
func TestLedgerFlagsShownWhereUsed(t *testing.T) {
	root := newRootCmd(&globalOptions{})
	uses := map[string]bool{"suspend": true, "resume": true, "runs": true, "discard": true}
	for _, c := range root.Commands() {
		name := c.Name()
		if name == "help" || name == "completion" {
			continue
		}
		for _, flag := range []string{"ledger", "ledger-timeout", "ledger-cacert", "ledger-cert", "ledger-key", "ledger-claim-ttl"} {
			f := c.Flags().Lookup(flag)
			if (f != nil) != uses[name] {
				t.Errorf("%s: --%s registered %t, want %t", name, flag, f != nil, uses[name])
			}
			if f != nil && (flag == "ledger-claim-ttl") != f.Hidden {
				t.Errorf("%s: --%s hidden %t", name, flag, f.Hidden)
			}
		}
	}
}

func parseLedgerFlags(t *testing.T, args ...string) *globalOptions {
	t.Helper()
	g := &globalOptions{}
	cmd := &cobra.Command{Use: "x"}
	addLedgerFlags(cmd, g)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestOpenLedger: a path opens ledger/bolt with the timeout, an etcd://
// URL ledger/etcd with the TLS files and the claim TTL, $SANDBOX_RESUME_LEDGER
// sets the default, and bad combinations are usage errors.
func TestOpenLedger(t *testing.T) {
	ctx := context.Background()
	t.Setenv(envLedger, "")
	g := parseLedgerFlags(t)
	if g.ledger.target != ledger.DefaultPath || g.ledger.timeout != ledger.DefaultTimeout {
		t.Errorf("defaults: %+v", g.ledger)
	}

	path := t.TempDir() + "/l.db"
	t.Setenv(envLedger, path)
	g = parseLedgerFlags(t, "--ledger-timeout", "250ms")
	l, err := g.openLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := l.(*bolt.Ledger)
	if !ok || b.Path() != path {
		t.Fatalf("opened %T %v, want the bolt ledger at %s", l, l, path)
	}
	l.Close()

	g = parseLedgerFlags(t, "--ledger", "etcd://127.0.0.1:1,127.0.0.1:2/t", "--ledger-timeout", "3s", "--ledger-claim-ttl", "4s")
	l, err = g.openLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := l.(*etcd.Ledger)
	if !ok {
		t.Fatalf("opened %T, want *etcd.Ledger", l)
	}
	if cfg := e.Config(); len(cfg.Endpoints) != 2 || cfg.Prefix != "/t" || cfg.Timeout != 3*time.Second || cfg.ClaimTTL != 4*time.Second {
		t.Errorf("etcd config %+v", cfg)
	}
	l.Close()

	for _, args := range [][]string{
		{"--ledger", ""},
		{"--ledger-timeout", "0s"},
		{"--ledger", path, "--ledger-cacert", "ca.pem"},
		{"--ledger", "etcd://"},
	} {
		g := parseLedgerFlags(t, args...)
		_, err := g.openLedger(ctx)
		if classify(err) != "usage" {
			t.Errorf("%q: %v (class %s), want a usage error", args, err, classify(err))
		}
	}
}
