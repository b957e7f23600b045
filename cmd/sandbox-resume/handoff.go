package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// handoffFlags are `--handoff HOST_ID --key K` of export and push
// (docs/design.md "Exactly once across hosts"), with the ledger and
// --host-id flags they use.
type handoffFlags struct {
	to, key string
}

// add registers --handoff and --key, --host-id and the ledger flags on cmd.
func (h *handoffFlags) add(cmd *cobra.Command, a *app) {
	f := cmd.Flags()
	f.StringVar(&h.to, "handoff", "", "hand the run over to this host id: the ledger records the handoff, and a signed handoff statement goes into the artifact (needs --key)")
	f.StringVar(&h.key, "key", "", "Ed25519 private key (PKCS#8 PEM) signing the handoff statement")
	addHostIDFlag(cmd, a)
	addLedgerFlags(cmd, a)
}

// options returns migrate.WithHandoff for --handoff (none without it):
// the key, this host's id and the ledger. --key without --handoff, or
// --handoff without --key, is a usage error.
func (h *handoffFlags) options(s *session, rt Runtime) ([]migrate.Option, error) {
	switch {
	case h.to == "" && h.key == "":
		return nil, nil
	case h.to == "":
		return nil, usageErrorf("%s: --key signs a handoff statement: give --handoff HOST_ID too", s.cmd.Name())
	case h.key == "":
		return nil, usageErrorf("%s: --handoff needs --key K to sign the handoff statement", s.cmd.Name())
	}
	key, err := loadKey(h.key)
	if err != nil {
		return nil, err
	}
	host, err := rt.Host(s.ctx)
	if err != nil {
		return nil, fmt.Errorf("host identity: %w", err)
	}
	l, err := s.ledger()
	if err != nil {
		return nil, err
	}
	return []migrate.Option{migrate.WithHandoff(&migrate.Handoff{Ledger: l, Host: host.ID, To: h.to, Key: key})}, nil
}

// receiver returns migrate.WithReceiver for import and pull: this host's
// id (--host-id or introspection) and the run ledger, used only when the
// artifact carries a handoff statement.
func receiver(s *session, rt Runtime) migrate.Option {
	return migrate.WithReceiver(&migrate.Receiver{Open: func(ctx context.Context) (ledger.Ledger, string, error) {
		host, err := rt.Host(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("host identity: %w", err)
		}
		l, err := s.ledger()
		if err != nil {
			return nil, "", err
		}
		return l, host.ID, nil
	}})
}

// printHandedOff says what export --handoff or push --handoff recorded.
func printHandedOff(w io.Writer, run string, h *migrate.HandoffResult) {
	if h != nil {
		fmt.Fprintf(w, "handed run %s over to host %s at %s (statement %s): this host will not resume it again; the record is %s\n",
			run, h.To, h.At, h.Statement.Digest, h.State)
	}
}

// printReceived says what import or pull received with a handoff statement.
func printReceived(w io.Writer, run string, h *migrate.HandoffResult) {
	if h != nil {
		fmt.Fprintf(w, "received run %s from host %s (handed off at %s): the record is %s, fence %d\n", run, h.From, h.At, h.State, h.Fence)
	}
}
