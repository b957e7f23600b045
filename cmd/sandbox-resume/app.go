package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/containerd/errdefs"
	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/runtime/containerd"
)

// Runtime is what the commands need of a containerd daemon: the one
// container-host seam, host.Host (docs/design.md "Layout"), whose roles
// suspend, resume and migrate compose, plus a registry transport for push
// and pull. runtime/containerd's *Runtime is the one implementation
// outside tests; the command tests use host/memhost.
type Runtime interface {
	host.Host
	// Registry returns the registry transport of push and pull over this
	// runtime's content store, reaching registries through t
	// (containerd.NewTransport: credentials, CA, retries).
	Registry(t *containerd.Transport) host.Registry
	io.Closer
}

var _ Runtime = (*containerd.Runtime)(nil)

// daemonOptions are the daemon flags (docs/design.md "CLI contract",
// "Global flags"): --address and --namespace, as ctr names them, and the
// --host-id override of suspend and resume.
type daemonOptions struct {
	address, namespace, hostID string
}

// globalOptions holds the values of the global flags once parsed.
type globalOptions struct {
	daemon daemonOptions
	output string
	debug  bool // --debug: log lines (retries) on stderr
	// ledger holds the ledger flags of the commands that use the run
	// ledger (addLedgerFlags).
	ledger ledgerOptions
}

// app is what the commands run against: how to reach containerd and the
// run ledger, the process's streams and clock, and the global flags. main
// runs the CLI over newApp; the command tests give it the libraries' fakes.
type app struct {
	// connect dials the containerd daemon the daemon flags name.
	connect func(ctx context.Context, d daemonOptions) (Runtime, error)
	// openLedger opens the run ledger the ledger flags name.
	openLedger func(ctx context.Context, o ledgerOptions) (ledger.Ledger, error)
	// now is the clock (suspend records it as the run lease's creation).
	now func() time.Time
	// random is where suspend reads a new run UID's bits from (nil:
	// crypto/rand).
	random io.Reader

	stdin          io.Reader
	stdout, stderr io.Writer

	// flags are the global flags, filled in when the command line is
	// parsed.
	flags globalOptions
}

// newApp returns the app of the real process: containerd through
// runtime/containerd, the ledger of --ledger (ledger/bolt or ledger/etcd),
// the system clock.
func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{
		connect:    connectContainerd,
		openLedger: openLedger,
		now:        time.Now,
		stdin:      stdin,
		stdout:     stdout,
		stderr:     stderr,
	}
}

// connectContainerd dials containerd with the daemon flags: --address,
// --namespace and the --host-id override.
func connectContainerd(ctx context.Context, d daemonOptions) (Runtime, error) {
	rt, err := containerd.Connect(ctx, d.address, d.namespace, containerd.WithHostIDOverride(d.hostID))
	switch {
	case errdefs.IsUnavailable(err):
		return nil, fmt.Errorf("%w (see --address)", err)
	case err != nil:
		return nil, err
	}
	return rt, nil
}

// result is what a command prints. Under --output json it is JSON (one
// object, writeJSON), or, when JSON is nil, what Text writes (sign's
// signed document, already JSON). In text mode Text writes to stdout, and
// to stderr what is not the result (pin's and verify's summaries). Class
// is the class of a result that is reported in full but fails (a refused
// verdict, lint's refusals): the command exits with its code; "" for a
// success.
type result struct {
	JSON  any
	Text  func(stdout, stderr io.Writer) error
	Class exitcode.Class
}

// session is one run of a command: its context and streams, and the
// runtime and ledger it opened, which the command's skeleton closes.
type session struct {
	app *app
	cmd *cobra.Command
	ctx context.Context
	rt  Runtime
	l   ledger.Ledger
}

// runtime connects to containerd on first use (app.connect with the
// daemon flags) and returns the same runtime afterwards.
func (s *session) runtime() (Runtime, error) {
	if s.rt == nil {
		rt, err := s.app.connect(s.ctx, s.app.flags.daemon)
		if err != nil {
			return nil, err
		}
		s.rt = rt
	}
	return s.rt, nil
}

// ledger opens the run ledger on first use — the ledger flags checked
// (usage errors), then app.openLedger — and returns the same ledger
// afterwards.
func (s *session) ledger() (ledger.Ledger, error) {
	if s.l == nil {
		o := s.app.flags.ledger
		if err := o.validate(); err != nil {
			return nil, err
		}
		l, err := s.app.openLedger(s.ctx, o)
		if err != nil {
			return nil, err
		}
		s.l = l
	}
	return s.l, nil
}

// close closes what the session opened, the ledger first.
func (s *session) close() {
	if s.l != nil {
		s.l.Close()
	}
	if s.rt != nil {
		s.rt.Close()
	}
}

// jsonOutput reports whether --output json was given.
func (s *session) jsonOutput() bool { return s.app.flags.output == outputJSON }

// stdin, stdout and stderr are the command's streams.
func (s *session) stdin() io.Reader  { return s.cmd.InOrStdin() }
func (s *session) stdout() io.Writer { return s.cmd.OutOrStdout() }
func (s *session) stderr() io.Writer { return s.cmd.ErrOrStderr() }

// logger is the slog.Logger libraries log through: debug records on the
// command's stderr under --debug, else nil (the libraries discard).
func (s *session) logger() *slog.Logger {
	if !s.app.flags.debug {
		return nil
	}
	return slog.New(slog.NewTextHandler(s.stderr(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// command is the skeleton every command's RunE shares (docs/design.md
// "CLI contract": flags → one library call → output and exit code). run
// reads the command's inputs (readInput, loadTrust, loadKey), asks the
// session for the runtime and the ledger when it reaches them, makes its
// library call and returns what to print; command prints it — JSON under
// --output json, else its text — closes what the session opened and
// turns a result that failed into its exit code. Errors go back to
// cobra unprinted: run (root.go) classifies and reports them.
func (a *app) command(run func(s *session, args []string) (*result, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if endStartup != nil {
			endStartup(isDecision(cmd))
		}
		s := &session{app: a, cmd: cmd, ctx: cmd.Context()}
		defer s.close()
		res, err := run(s, args)
		if err != nil || res == nil {
			return err
		}
		switch {
		case s.jsonOutput() && res.JSON != nil:
			writeJSON(s.stdout(), res.JSON)
		case res.Text != nil:
			if err := res.Text(s.stdout(), s.stderr()); err != nil {
				return err
			}
		}
		if res.Class != "" {
			return &exitError{class: res.Class} // reported in full above
		}
		return nil
	}
}

// isDecision reports whether cmd only decides and exits: `resume
// --check` (main.go startupGC keeps the collector off for it).
func isDecision(cmd *cobra.Command) bool {
	if cmd.Name() != "resume" {
		return false
	}
	check, err := cmd.Flags().GetBool("check")
	return err == nil && check
}

// badInput marks a file named on the command line that cannot be read or
// loaded (exit 2, class "bad-input"; docs/design.md "CLI contract": a file
// that does not exist is 2).
func badInput(err error) error {
	return &exitError{class: exitcode.ClassBadInput, err: err}
}

// readInput reads a JSON file named on the command line through
// internal/inputfile (at most inputfile.MaxJSON bytes, no devices);
// failures are badInput.
func readInput(path string) ([]byte, error) {
	data, err := inputfile.Read(path, inputfile.MaxJSON)
	if err != nil {
		return nil, badInput(err)
	}
	return data, nil
}

// loadTrust loads the trusted keys of --trust; failures are badInput.
func loadTrust(path string) (*envelope.KeyRing, error) {
	trust, err := envelope.LoadTrust(path)
	if err != nil {
		return nil, badInput(err)
	}
	return trust, nil
}

// loadKey loads the private key of --key (envelope.LoadPrivateKeyFile: a
// key file group or other may read is refused); failures, a key of the
// wrong kind included, are badInput.
func loadKey(path string) (ed25519.PrivateKey, error) {
	key, err := envelope.LoadPrivateKeyFile(path)
	if err != nil {
		return nil, badInput(err)
	}
	return key, nil
}
