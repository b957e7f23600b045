package resume

import (
	"fmt"
	"os"

	"github.com/sandbox-resume/sandbox-resume/internal/procfs"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// Self returns the resuming holder this process is for the container c: c
// with os.Getpid(), its start time (procfs.ProcessStartTime) and the boot
// id (procfs.BootID). Errors are those of reading /proc.
func Self(c ledger.Container) (ledger.Holder, error) {
	pid := os.Getpid()
	start, err := procfs.ProcessStartTime(pid)
	if err != nil {
		return ledger.Holder{}, fmt.Errorf("resumer identity: %w", err)
	}
	boot, err := procfs.BootID()
	if err != nil {
		return ledger.Holder{}, fmt.Errorf("resumer identity: %w", err)
	}
	return ledger.Holder{Container: c, PID: pid, Start: start, Boot: boot}, nil
}
