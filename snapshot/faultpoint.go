package snapshot

import (
	"fmt"
	"os"
	"time"
)

// envPauseAt names the test-only fault point of Suspend: when the variable
// holds the name of one of the steps below, Suspend writes the line
// "sandbox-resume: fault point <step> reached (pid <pid>)" to stderr on
// reaching that step and then sleeps for faultPointSleep before going on,
// so that a test can SIGKILL the process in a known state
// (test/integration/suspend_fault_test.go). Unset or any other value: no
// effect. The steps, in order:
//
//	lease    the run lease exists and holds the base (step 3 done)
//	pause    the task is paused, no diff yet
//	diff     the diff blob is under the lease, the task is still paused
//	stop     the task is stopped (or resumed), no ref blob yet
//	refblob  the ref blob is under the lease, the container is not labelled
//	label    the container is labelled, no ref file yet
const envPauseAt = "SANDBOX_RESUME_TEST_PAUSE_AT"

// faultPointSleep bounds the wait at a fault point: a process nobody kills
// goes on after it.
const faultPointSleep = 60 * time.Second

// faultPoint is the observer Suspend calls after each step (see
// envPauseAt).
func faultPoint(step string) {
	if os.Getenv(envPauseAt) != step {
		return
	}
	fmt.Fprintf(os.Stderr, "sandbox-resume: fault point %s reached (pid %d)\n", step, os.Getpid())
	time.Sleep(faultPointSleep)
}
