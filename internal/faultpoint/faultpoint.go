// Package faultpoint holds the process at a named step when a test asks for
// it, so that an integration test can SIGKILL a sandbox-resume process in a
// known state (the fault suites of test/integration; docs/design.md
// "Suspend" and "Moving runs": an interruption at any point leaves nothing
// partial).
//
// Fault points exist only in a binary built with the build tag faultpoint
// (`go build -tags faultpoint`; the integration tests build the CLI so).
// Without the tag — `make build`, `go install`, every shipped binary —
// Reach is an empty function and the environment variable Env is never
// read. With the tag and Env unset, Reach returns at once.
//
// One variable serves every package; each names its own steps
// (suspend/faultpoint.go for suspend; migrate/import.go for
// import, "import-*"; resume/materialize.go and
// runtime/containerd/materialize.go for resume, "resume-*"), so step names
// must be unique across the tool.
package faultpoint

import (
	"fmt"
	"time"
)

// Env is the environment variable naming the step to hold at:
// SANDBOX_RESUME_TEST_PAUSE_AT=<step>. Only a binary built with the tag
// faultpoint reads it.
const Env = "SANDBOX_RESUME_TEST_PAUSE_AT"

// Sleep bounds the hold at a fault point: a process nobody kills goes on
// after it. A SIGCONT ends the hold at once: a test that stopped the
// process at the step (SIGSTOP, to freeze its claim's keep-alive too) and
// continues it sees it go on without waiting out Sleep.
const Sleep = 60 * time.Second

// Line is the stderr line Reach writes at step in process pid:
// "sandbox-resume: fault point <step> reached (pid <pid>)". Tests wait for
// it (a substring "fault point <step> reached" is enough) before killing.
func Line(step string, pid int) string {
	return fmt.Sprintf("sandbox-resume: fault point %s reached (pid %d)", step, pid)
}
