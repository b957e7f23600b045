package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/ledger/bolt"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// ledgerPath is the bolt ledger file of the CLI runs against the daemon
// at address in namespace ns: one file per daemon and namespace, beside the
// daemon's socket, so that tests sharing a daemon never share records.
func ledgerPath(address, ns string) string {
	return filepath.Join(filepath.Dir(address), "ledger-"+ns+".db")
}

// daemonLedger is the ledger the CLI uses against d in namespace ns ("":
// d.Namespace).
func daemonLedger(t testing.TB, d *harness.Daemon, ns string) ledger.Ledger {
	t.Helper()
	if ns == "" {
		ns = d.Namespace
	}
	return bolt.New(ledgerPath(d.Address, ns))
}

// cliEnv is the environment of a CLI process run with args: this
// process's, without a host-id override, with $SANDBOX_RESUME_LEDGER set to
// the ledgerPath of the --address and --namespace in args (when both are
// there), then extra.
func cliEnv(args []string, extra ...string) []string {
	env := append(os.Environ(), "SANDBOX_RESUME_HOST_ID=")
	var addr, ns string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--address":
			addr = args[i+1]
		case "--namespace":
			ns = args[i+1]
		}
	}
	if addr != "" && ns != "" {
		env = append(env, "SANDBOX_RESUME_LEDGER="+ledgerPath(addr, ns))
	}
	return append(env, extra...)
}
