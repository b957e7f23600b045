// Package faultpoint holds the process at a named step when a test asks for
// it, so that an integration test can SIGKILL a sandbox-resume process in a
// known state (issue 10 item 2, the fault suite; DESIGN "Suspend" and
// "Moving runs": an interruption at any point leaves nothing partial).
//
// It is test-only machinery compiled into the binary: with the environment
// variable Env unset (every production run) Reach returns at once and has no
// effect. One variable serves every package; each names its own steps
// (snapshot/suspend/faultpoint.go for suspend; migrate/import.go for
// import, "import-*"; resume/materialize.go and
// runtime/containerd/materialize.go for resume, "resume-*"), so step names
// must be unique across the tool.
package faultpoint

import (
	"fmt"
	"os"
	"time"
)

// Env is the environment variable naming the step to hold at:
// SANDBOX_RESUME_TEST_PAUSE_AT=<step>.
const Env = "SANDBOX_RESUME_TEST_PAUSE_AT"

// Sleep bounds the hold at a fault point: a process nobody kills goes on
// after it.
const Sleep = 60 * time.Second

// Reach is called after step is done. When Env holds exactly step, it
// writes the line Line(step, pid) to stderr and sleeps for Sleep before
// returning; otherwise it returns at once. It never fails.
func Reach(step string) {
	if os.Getenv(Env) != step {
		return
	}
	fmt.Fprintln(os.Stderr, Line(step, os.Getpid()))
	time.Sleep(Sleep)
}

// Line is the stderr line Reach writes at step in process pid:
// "sandbox-resume: fault point <step> reached (pid <pid>)". Tests wait for
// it (a substring "fault point <step> reached" is enough) before killing.
func Line(step string, pid int) string {
	return fmt.Sprintf("sandbox-resume: fault point %s reached (pid %d)", step, pid)
}
