package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/resume"
)

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

// newRootCmd builds the command tree over a. Every subcommand constructor
// takes the app, so flags are parsed once into a.flags and every command
// reaches containerd and the ledger through a's factories.
func newRootCmd(a *app) *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:           "sandbox-resume",
		Short:         "Decide whether a suspended durable run may resume into the same toolchain",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if o := a.flags.output; o != outputText && o != outputJSON {
				return usageErrorf("--output must be %q or %q, not %q", outputText, outputJSON, o)
			}
			// Checked here, before cobra checks them after this hook, so
			// that a missing or conflicting flag is a usage error (64).
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return usageErrorf("%s: %v", cmd.Name(), err)
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return usageErrorf("%s: %v", cmd.Name(), err)
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
			switch {
			case showVersion:
				v := buildVersion()
				if a.flags.output == outputJSON {
					writeJSON(cmd.OutOrStdout(), v)
					return nil
				}
				return v.writeText(cmd.OutOrStdout())
			case a.flags.output == outputJSON:
				return usageErrorf("a command is required (see sandbox-resume --help)")
			}
			return cmd.Help()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })
	pf := root.PersistentFlags()
	pf.StringVar(&a.flags.output, "output", outputText, "output format: text or json")
	pf.BoolVar(&a.flags.debug, "debug", false, "log debug lines (registry retries) on stderr")
	root.Flags().BoolVar(&showVersion, "version", false, "print the version, the Go version and the containerd client module's version")

	root.AddCommand(
		// one constructor per subcommand, one file each
		newKeygenCmd(a),
		newManifestCmd(a),
		newLintCmd(a),
		newPinCmd(a),
		newSignCmd(a),
		newVerifyCmd(a),
		newResumeCmd(a),
		newSuspendCmd(a),
		newDiscardCmd(a),
		newRunsCmd(a),
		newExportCmd(a),
		newImportCmd(a),
		newPushCmd(a),
		newPullCmd(a),
		newRecallCmd(a),
		newInspectCmd(a),
		newRepinCmd(a),
		newForkCmd(a),
	)
	acceptDaemonFlags(a, root)
	for _, c := range root.Commands() {
		acceptDaemonFlags(a, c)
	}
	return root
}

// addDaemonFlags registers --address and --namespace on a command that
// talks to containerd (docs/design.md "CLI contract", "Global flags"),
// bound to a.flags.daemon.
func addDaemonFlags(cmd *cobra.Command, a *app) {
	f := cmd.Flags()
	f.StringVar(&a.flags.daemon.address, "address", envOr("CONTAINERD_ADDRESS", "/run/containerd/containerd.sock"), "containerd socket address ($CONTAINERD_ADDRESS)")
	f.StringVar(&a.flags.daemon.namespace, "namespace", envOr("CONTAINERD_NAMESPACE", "sandbox-resume"), "containerd namespace ($CONTAINERD_NAMESPACE)")
}

// addHostIDFlag registers --host-id on suspend and resume, bound to
// a.flags.daemon.
func addHostIDFlag(cmd *cobra.Command, a *app) {
	cmd.Flags().StringVar(&a.flags.daemon.hostID, "host-id", os.Getenv("SANDBOX_RESUME_HOST_ID"),
		"host identity override, recorded with idSource \"override\" ($SANDBOX_RESUME_HOST_ID)")
}

// acceptDaemonFlags registers, hidden, the daemon flags cmd does not list.
// They are global flags, as ctr's are: scripts put them before any
// command ("sandbox-resume --address A --namespace N runs"), so every
// command accepts them, but only the commands that talk to containerd
// list them (and only suspend and resume --host-id); elsewhere they change
// nothing.
func acceptDaemonFlags(a *app, cmd *cobra.Command) {
	hidden := &cobra.Command{}
	addDaemonFlags(hidden, a)
	addHostIDFlag(hidden, a)
	hidden.Flags().VisitAll(func(f *pflag.Flag) {
		if cmd.Flags().Lookup(f.Name) == nil {
			f.Hidden = true
			cmd.Flags().AddFlag(f)
		}
	})
}

// usageError marks a command-line mistake (exit 64).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// noArgs is the Args of a command that takes none: a positional argument
// is a usage error (64) naming the command and the argument.
func noArgs(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageErrorf("%s: unexpected argument %q", name, args[0])
		}
		return nil
	}
}

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
	return newApp(stdin, stdout, stderr).run(ctx, args)
}

// run executes the command line args over a and returns the exit code.
//
// Everything printed on stdout goes through one outputWriter: the first
// write error (a closed stdout, /dev/full) makes the exit code 1, named on
// stderr, whatever the command decided — a verdict is never lost with exit
// 0 (docs/design.md "Hardening", "Nothing half-stored").
func (a *app) run(ctx context.Context, args []string) int {
	out := &outputWriter{w: a.stdout}
	code := a.execute(ctx, args, out)
	if out.err != nil {
		fmt.Fprintf(a.stderr, "sandbox-resume: write output: %v (the command's exit code was %d)\n", out.err, code)
		return exitcode.ClassInternal.Code()
	}
	return code
}

// outputWriter passes writes to w and keeps the first error; after it
// every write fails with that error.
type outputWriter struct {
	w   io.Writer
	err error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		o.err = err
	}
	return n, err
}

// execute runs the command line args with stdout out and returns the
// command's exit code.
func (a *app) execute(ctx context.Context, args []string, out io.Writer) int {
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(out)
	root.SetErr(a.stderr)
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
	if a.flags.output == outputJSON || jsonRequested(args) {
		writeJSONError(out, string(class), err)
	} else {
		fmt.Fprintf(a.stderr, "sandbox-resume: %v\n", err)
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

// jsonError is the {"error": …} object of docs/design.md "CLI contract",
// "Output".
type jsonError struct {
	Class string `json:"class"`
	// Reason is the refusal's finer reason (resume.Reason: a ledger
	// refusal's code, whiteout-name), omitted when the class says all.
	Reason   string                `json:"reason,omitempty"`
	Message  string                `json:"message"`
	Refusals []envmanifest.Refusal `json:"refusals,omitempty"`
}

func writeJSONError(w io.Writer, class string, err error) {
	je := jsonError{Class: class, Reason: resume.Reason(err), Message: err.Error()}
	var re *envmanifest.RefusedError
	var me *envmanifest.ImageMetadataError
	switch {
	case errors.As(err, &re):
		je.Refusals = re.Refusals
	case errors.As(err, &me):
		je.Refusals = me.Refusals
	}
	writeJSON(w, map[string]any{"error": je})
}

// writeJSON prints v as one JSON object followed by a newline.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
