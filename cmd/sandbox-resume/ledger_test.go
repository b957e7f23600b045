package main

import (
	"context"
	"io"
	"strings"

	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/ledger/bolt"
	"github.com/sandbox-resume/sandbox-resume/ledger/etcd"
)

// TestGlobalFlagsShownWhereUsed: each command lists only the global flags
// it uses (docs/design.md "CLI contract", "Global flags"): --address and
// --namespace on the commands that talk to containerd, --host-id on
// suspend and resume, the ledger flags on suspend, resume, runs and
// discard (--ledger-claim-ttl hidden), --output and --debug everywhere. A
// daemon flag a command does not list is still accepted, hidden (scripts
// put them before any command, as with ctr); a ledger flag is not.
func TestGlobalFlagsShownWhereUsed(t *testing.T) {
	root := newRootCmd(newApp(nil, io.Discard, io.Discard))
	daemon := map[string]bool{"suspend": true, "resume": true, "discard": true, "export": true, "import": true,
		"push": true, "pull": true, "pin": true, "lint": true, "repin": true, "fork": true, "inspect": true}
	uses := map[string]map[string]bool{
		"address":   daemon,
		"namespace": daemon,
		// Turn 3 (docs/design.md "CLI contract"): export, import, push and
		// pull take --host-id and the ledger flags (a handoff), recall the
		// ledger flags; repin takes --host-id and the ledger flags, fork the
		// ledger flags.
		"host-id": {"suspend": true, "resume": true, "export": true, "import": true, "push": true, "pull": true, "repin": true},
	}
	for _, flag := range []string{"ledger", "ledger-timeout", "ledger-cacert", "ledger-cert", "ledger-key", "ledger-claim-ttl"} {
		uses[flag] = map[string]bool{"suspend": true, "resume": true, "runs": true, "discard": true,
			"export": true, "import": true, "push": true, "pull": true, "recall": true, "repin": true, "fork": true}
	}
	seen := map[string]bool{}
	for _, c := range root.Commands() {
		name := c.Name()
		if name == "help" || name == "completion" {
			continue
		}
		seen[name] = true
		for flag, users := range uses {
			f := c.Flags().Lookup(flag)
			listed := f != nil && !f.Hidden
			if flag == "ledger-claim-ttl" {
				listed = f != nil
				if f != nil && !f.Hidden {
					t.Errorf("%s: --%s is not hidden", name, flag)
				}
			}
			if listed != users[name] {
				t.Errorf("%s: --%s listed %t, want %t", name, flag, listed, users[name])
			}
			if daemonFlag := flag == "address" || flag == "namespace" || flag == "host-id"; daemonFlag && f == nil {
				t.Errorf("%s: --%s is not accepted", name, flag)
			}
		}
		for _, flag := range []string{"output", "debug"} {
			if f := c.InheritedFlags().Lookup(flag); f == nil || f.Hidden {
				t.Errorf("%s: --%s not listed", name, flag)
			}
		}
	}
	for name := range daemon {
		if !seen[name] {
			t.Errorf("no command %s", name)
		}
	}
}

// TestDaemonFlagsBeforeAnyCommand: the daemon flags may come before any
// command, as with ctr, even one that does not use them.
func TestDaemonFlagsBeforeAnyCommand(t *testing.T) {
	w := newWorld(t).withFacts(newSuspendedRun(t))
	w.write(testConfFile, testConfig)
	if code, _, stderr := w.run("--address", "/x.sock", "--namespace", "n", "--host-id", "h", "manifest", testConfFile); code != 0 || w.connected != nil {
		t.Errorf("manifest after the daemon flags: exit %d (%s), connected %v", code, stderr, w.connected)
	}
	w.l.Suspended(context.Background(), ledger.SuspendRequest{Run: "r", Generation: 1, Ref: digest.FromString("g1"),
		Container: ledger.Container{Host: "h", Namespace: "n", ID: "c"}})
	code, stdout, stderr := w.run("--address", "/x.sock", "--namespace", "n", "--output", "json", "runs")
	if code != 0 || !strings.Contains(stdout, `"run": "r"`) {
		t.Errorf("runs after the daemon flags: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, _ = w.run("--address", "/x.sock", "--namespace", "n", "--host-id", "h", "discard", "--run", "r")
	if code != 0 || w.connected == nil || *w.connected != (daemonOptions{address: "/x.sock", namespace: "n", hostID: "h"}) {
		t.Errorf("discard: exit %d, connected with %+v", code, w.connected)
	}
}

func parseLedgerFlags(t *testing.T, args ...string) ledgerOptions {
	t.Helper()
	a := newApp(nil, io.Discard, io.Discard)
	cmd := &cobra.Command{Use: "x"}
	addLedgerFlags(cmd, a)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	return a.flags.ledger
}

// openLedgerFlags checks and opens the ledger as a command does.
func openLedgerFlags(o ledgerOptions) (ledger.Ledger, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	return openLedger(context.Background(), o)
}

// TestOpenLedger: a path opens ledger/bolt with the timeout, an etcd://
// URL ledger/etcd with the TLS files and the claim TTL, $SANDBOX_RESUME_LEDGER
// sets the default, and bad combinations are usage errors.
func TestOpenLedger(t *testing.T) {
	t.Setenv(envLedger, "")
	o := parseLedgerFlags(t)
	if o.target != ledger.DefaultPath || o.timeout != ledger.DefaultTimeout {
		t.Errorf("defaults: %+v", o)
	}

	path := t.TempDir() + "/l.db"
	t.Setenv(envLedger, path)
	l, err := openLedgerFlags(parseLedgerFlags(t, "--ledger-timeout", "250ms"))
	if err != nil {
		t.Fatal(err)
	}
	b, ok := l.(*bolt.Ledger)
	if !ok || b.Path() != path {
		t.Fatalf("opened %T %v, want the bolt ledger at %s", l, l, path)
	}
	l.Close()

	l, err = openLedgerFlags(parseLedgerFlags(t, "--ledger", "etcd://127.0.0.1:1,127.0.0.1:2/t", "--ledger-timeout", "3s", "--ledger-claim-ttl", "4s"))
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
		_, err := openLedgerFlags(parseLedgerFlags(t, args...))
		if classify(err) != "usage" {
			t.Errorf("%q: %v (class %s), want a usage error", args, err, classify(err))
		}
	}
}
