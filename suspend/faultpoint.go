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
// effect. The steps, in order (docs/design.md "Suspend", steps 4, 5 and 7):
//
//	lease     the run lease exists and holds the base
//	labelled  the container is labelled suspending and run, its task untouched
//	pause     the task is paused, no layer yet
//	checkpoint (Request.Memory) the memory image is under the lease, the
//	          task paused, no layer yet
//	diff      the layer blob is under the lease, the task is still paused
//	refblob   the spec and ref blobs are under the lease, not recorded yet
//	recorded  the ledger recorded the generation, no ref file yet
//	written   the ref file is written, the task still paused
//	stop      the task is stopped (or resumed), the container still labelled suspending
//	chain-committed  (runtime/containerd) the stopped container's snapshot is
//	          committed as the chain snapshot, its key not prepared again yet
//	chained   the stopped container's snapshot is committed as the chain
//	          snapshot of the generation (when it is), the container still
//	          labelled suspending
//	released  the layers of generations older than the latest K are released
//	          from the run lease; the container is still labelled suspending
//	          (an incarnation whose task was stopped is not deleted yet)
//
// A rerun of an interrupted suspend that the ledger had recorded passes
// only written, stop, chained and released.
func faultPoint(step string) { faultpoint.Reach(step) }
