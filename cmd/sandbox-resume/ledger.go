package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/ledger/bolt"
	"github.com/sandbox-resume/sandbox-resume/ledger/etcd"
)

// ledgerOptions are the global ledger flags (docs/design.md "CLI contract",
// "The run ledger"). They are registered only on the commands that use the
// ledger — suspend, resume, runs and discard — with addLedgerFlags.
type ledgerOptions struct {
	// target is --ledger: a path (ledger/bolt) or an etcd://… URL
	// (ledger/etcd).
	target string
	// timeout is --ledger-timeout: how long a call waits for the ledger
	// (the bolt file lock, an etcd quorum).
	timeout time.Duration
	// cacert, cert and key are --ledger-cacert, --ledger-cert and
	// --ledger-key: TLS files of an etcd ledger.
	cacert, cert, key string
	// claimTTL is the hidden --ledger-claim-ttl: the TTL of an etcd claim's
	// lease (tests shorten it).
	claimTTL time.Duration
	// insecureMode is --ledger-insecure-mode: a bolt ledger file writable
	// by group or other, or owned by another uid, is used (docs/design.md
	// "Hardening", "Ledger file"); without it such a file is refused (1).
	insecureMode bool
}

// envLedger is the environment variable that sets --ledger's default.
const envLedger = "SANDBOX_RESUME_LEDGER"

// addLedgerFlags registers the ledger flags on cmd, bound to a.flags.ledger.
func addLedgerFlags(cmd *cobra.Command, a *app) {
	g := &a.flags
	f := cmd.Flags()
	f.StringVar(&g.ledger.target, "ledger", envOr(envLedger, ledger.DefaultPath),
		"run ledger: a bolt file PATH, or etcd://HOST:PORT[,HOST:PORT…][/PREFIX] ($"+envLedger+")")
	f.DurationVar(&g.ledger.timeout, "ledger-timeout", ledger.DefaultTimeout,
		"how long to wait for the ledger (a locked file, an unreachable or quorum-less cluster) before failing")
	f.StringVar(&g.ledger.cacert, "ledger-cacert", "", "etcd ledger: CA bundle verifying the members' certificates")
	f.StringVar(&g.ledger.cert, "ledger-cert", "", "etcd ledger: client certificate (with --ledger-key)")
	f.StringVar(&g.ledger.key, "ledger-key", "", "etcd ledger: client certificate's key (with --ledger-cert)")
	f.DurationVar(&g.ledger.claimTTL, "ledger-claim-ttl", etcd.DefaultClaimTTL, "etcd ledger: TTL of a claim's lease (tests)")
	_ = f.MarkHidden("ledger-claim-ttl")
	f.BoolVar(&g.ledger.insecureMode, "ledger-insecure-mode", false,
		"bolt ledger: use a ledger file writable by group or other, or owned by another uid (refused without it)")
}

// isEtcdLedger reports whether --ledger names an etcd cluster.
func (o ledgerOptions) isEtcdLedger() bool { return strings.HasPrefix(o.target, etcd.Scheme) }

// validate checks the ledger flags without opening anything: usage errors.
func (o ledgerOptions) validate() error {
	if o.target == "" {
		return usageErrorf("--ledger is empty (a bolt file path, or %sHOST:PORT…)", etcd.Scheme)
	}
	if o.timeout <= 0 {
		return usageErrorf("--ledger-timeout must be positive, not %s", o.timeout)
	}
	if !o.isEtcdLedger() {
		for _, f := range []struct{ name, v string }{{"--ledger-cacert", o.cacert}, {"--ledger-cert", o.cert}, {"--ledger-key", o.key}} {
			if f.v != "" {
				return usageErrorf("%s applies to an %s ledger, not the bolt file %s", f.name, etcd.Scheme, o.target)
			}
		}
	}
	return nil
}

// openLedger opens the ledger the ledger flags name (validated: see
// session.ledger): an etcd://… URL is
// ledger/etcd (TLS files from --ledger-cacert/--ledger-cert/--ledger-key,
// claim TTL from --ledger-claim-ttl); anything else is the path of a
// ledger/bolt file. Both wait at most --ledger-timeout per call. Opening a
// bolt ledger creates nothing (its reads open the file read-only; only a
// transition creates it); opening an etcd ledger does not wait for the
// cluster. The caller closes the ledger.
//
// This is the one place a ledger backend is chosen: a new backend is a new
// case here.
func openLedger(_ context.Context, o ledgerOptions) (ledger.Ledger, error) {
	switch {
	case o.isEtcdLedger():
		cfg, err := etcd.ParseURL(o.target)
		if err != nil {
			return nil, usageErrorf("--ledger: %v", err)
		}
		cfg.TLS = etcd.TLS{CACert: o.cacert, Cert: o.cert, Key: o.key}
		cfg.Timeout = o.timeout
		cfg.ClaimTTL = o.claimTTL
		l, err := etcd.Open(cfg)
		if err != nil {
			return nil, fmt.Errorf("open the run ledger %s: %w", cfg, err)
		}
		return l, nil
	default:
		opts := []bolt.Option{bolt.WithTimeout(o.timeout)}
		if o.insecureMode {
			opts = append(opts, bolt.WithInsecureMode())
		}
		return bolt.New(o.target, opts...), nil
	}
}
