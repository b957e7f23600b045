package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/containerd/errdefs"
	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/runtime/containerd"
)

// globalOptions holds the flags every command shares (DESIGN "CLI contract";
// they follow ctr's names).
type globalOptions struct {
	address   string
	namespace string
	hostID    string
	output    string
	debug     bool // --debug: log lines (retries) on stderr
	stdin     io.Reader
	// ledger holds the ledger flags of the commands that use the run
	// ledger (addLedgerFlags).
	ledger ledgerOptions
}

const (
	outputText = "text"
	outputJSON = "json"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// newRootCmd builds the command tree. Every subcommand constructor takes the
// shared options so flags are parsed once.
func newRootCmd(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:           "sandbox-resume",
		Short:         "Decide whether a suspended durable run may resume into the same toolchain",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if g.output != outputText && g.output != outputJSON {
				return usageErrorf("--output must be %q or %q, not %q", outputText, outputJSON, g.output)
			}
			return nil
		},
		// Args and RunE make an unknown command, and no command under
		// --output json, usage errors (64) that run reports like any other
		// (cobra's own "unknown command" error is a plain error: exit 1).
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q (see sandbox-resume --help)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.output == outputJSON {
				return usageErrorf("a command is required (see sandbox-resume --help)")
			}
			return cmd.Help()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })
	pf := root.PersistentFlags()
	pf.StringVar(&g.address, "address", envOr("CONTAINERD_ADDRESS", "/run/containerd/containerd.sock"), "containerd socket address ($CONTAINERD_ADDRESS)")
	pf.StringVar(&g.namespace, "namespace", envOr("CONTAINERD_NAMESPACE", "sandbox-resume"), "containerd namespace ($CONTAINERD_NAMESPACE)")
	pf.StringVar(&g.hostID, "host-id", os.Getenv("SANDBOX_RESUME_HOST_ID"), "host identity override, recorded with idSource \"override\" ($SANDBOX_RESUME_HOST_ID)")
	pf.StringVar(&g.output, "output", outputText, "output format: text or json")
	pf.BoolVar(&g.debug, "debug", false, "log debug lines (registry retries) on stderr")

	root.AddCommand(
		// one constructor per subcommand, one file each
		newKeygenCmd(g),
		newManifestCmd(g),
		newLintCmd(g),
		newPinCmd(g),
		newSignCmd(g),
		newVerifyCmd(g),
		newResumeCmd(g),
		newSuspendCmd(g),
		newDiscardCmd(g),
		newRunsCmd(g),
		newExportCmd(g),
		newImportCmd(g),
		newPushCmd(g),
		newPullCmd(g),
		newInspectCmd(g),
	)
	return root
}

// usageError marks a command-line mistake (exit 64).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError carries the class decided by a library verdict, for failures
// the command has already reported (err nil) or that the library's own
// errors do not classify; the exit code is class.Code().
type exitError struct {
	class exitcode.Class
	err   error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// run executes the CLI and returns the process exit code. A failure under
// --output json prints exactly one {"error": …} object on stdout.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globalOptions{stdin: stdin}
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitcode.OK
	}
	class := classify(err)
	code := class.Code()
	var ee *exitError
	if errors.As(err, &ee) && ee.err == nil {
		return code // already reported in full (a verdict)
	}
	if g.output == outputJSON || jsonRequested(args) {
		writeJSONError(stdout, string(class), err)
	} else {
		fmt.Fprintf(stderr, "sandbox-resume: %v\n", err)
	}
	return code
}

// jsonRequested reports whether args ask for --output json before any
// "--": flag parsing stops at the first unknown flag, so an error there
// leaves --output unparsed when it comes after the bad flag.
func jsonRequested(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--output=json":
			return true
		case a == "--output" && i+1 < len(args) && args[i+1] == outputJSON:
			return true
		}
	}
	return false
}

// jsonError is the {"error": …} object of DESIGN "Resume decision".
type jsonError struct {
	Class    string                `json:"class"`
	Message  string                `json:"message"`
	Refusals []envmanifest.Refusal `json:"refusals,omitempty"`
}

func writeJSONError(w io.Writer, class string, err error) {
	je := jsonError{Class: class, Message: err.Error()}
	var re *envmanifest.RefusedError
	if errors.As(err, &re) {
		je.Refusals = re.Refusals
	}
	writeJSON(w, map[string]any{"error": je})
}

// writeJSON prints v as one JSON object followed by a newline.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// connect dials containerd with the global flags: --address, --namespace
// and the --host-id override (DESIGN "CLI contract").
func (g *globalOptions) connect(ctx context.Context) (*containerd.Runtime, error) {
	rt, err := containerd.Connect(ctx, g.address, g.namespace, containerd.WithHostIDOverride(g.hostID))
	if errdefs.IsUnavailable(err) {
		return nil, fmt.Errorf("%w (see --address)", err)
	}
	return rt, err
}

// badInput marks a file named on the command line that cannot be read or
// loaded (exit 2, class "bad-input"; DESIGN "CLI contract": a file that
// does not exist is 2).
func badInput(err error) error {
	return &exitError{class: exitcode.ClassBadInput, err: err}
}

// readInput reads a file named on the command line; failures are badInput.
func readInput(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
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
