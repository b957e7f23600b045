package suspend

import "github.com/sandbox-resume/sandbox-resume/internal/faultpoint"

// The test-only fault points of Run (internal/faultpoint): in a binary
// built with -tags faultpoint, when the
// variable SANDBOX_RESUME_TEST_PAUSE_AT holds the name of one of the steps
// below, Run writes the line
// "sandbox-resume: fault point <step> reached (pid <pid>)" to stderr on
// reaching that step and then sleeps for faultpoint.Sleep before going on,
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

// faultPoint is the observer Run calls after each step (see above).
func faultPoint(step string) { faultpoint.Reach(step) }
