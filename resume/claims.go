package resume

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Labels on the claim lease naming its holder (DESIGN "Materialize, claim,
// run lifecycle"). The lease id is snapshot.ClaimLeasePrefix + run.
const (
	LabelClaimContainer = snapshot.LabelPrefix + "claim.container" // the container id the holder creates
	LabelClaimHost      = snapshot.LabelPrefix + "claim.host"      // the holder's host id (Host.ID)
	LabelClaimPID       = snapshot.LabelPrefix + "claim.pid"       // the holder process id, decimal
	LabelClaimStart     = snapshot.LabelPrefix + "claim.start"     // the holder's start time: field 22 of /proc/PID/stat (clock ticks after boot), decimal
	LabelClaimBoot      = snapshot.LabelPrefix + "claim.boot"      // the holder's boot id: /proc/sys/kernel/random/boot_id
)

// Claim is the holder of a run's claim lease as its labels name it, and
// what the daemon and the kernel say about that holder now.
type Claim struct {
	Lease     string // the lease id, snapshot.ClaimLeasePrefix + run
	Container string // LabelClaimContainer
	HostID    string // LabelClaimHost
	PID       int    // LabelClaimPID; 0 when absent or not a number
	StartTime string // LabelClaimStart
	BootID    string // LabelClaimBoot

	// ContainerExists is true when Container exists on this daemon (in this
	// namespace).
	ContainerExists bool
	// ProcessAlive is true when the holder process still runs: see
	// ProcessAlive.
	ProcessAlive bool
}

// Live reports whether the claim still holds (DESIGN "Materialize, claim":
// a claim is stale only when its container does not exist on this daemon
// and its holder process is gone).
func (c *Claim) Live() bool { return c.ContainerExists || c.ProcessAlive }

// String names the holder for messages: container, host and process.
func (c *Claim) String() string {
	return fmt.Sprintf("lease %s held by container %q on host %q (pid %d, start %s, boot %s)",
		c.Lease, c.Container, c.HostID, c.PID, c.StartTime, c.BootID)
}

// Claims looks up a run's claim (check 10). It never creates, changes or
// deletes a claim. runtime/containerd implements it over the lease
// `sandbox-resume.claim/<run>` and resume/fake in memory.
type Claims interface {
	// ClaimHolder returns the holder of run's claim lease, or (nil, nil)
	// when there is none. Errors are daemon errors (wrapping the
	// github.com/containerd/errdefs classes) naming the lease.
	ClaimHolder(ctx context.Context, run string) (*Claim, error)
}

// ProcDir is the proc filesystem ProcessAlive reads; tests may point it
// elsewhere.
var ProcDir = "/proc"

// ProcessAlive reports whether the process a claim names still runs on this
// machine: bootID equals /proc/sys/kernel/random/boot_id, process pid exists
// and its start time (field 22 of /proc/PID/stat, clock ticks after boot)
// equals startTime. Any unreadable fact counts as gone, except that an
// unreadable boot id with matching pid and start time counts as alive.
func ProcessAlive(pid int, startTime, bootID string) bool {
	if pid <= 0 || startTime == "" {
		return false
	}
	if cur, err := BootID(); err == nil && cur != bootID {
		return false
	}
	st, err := ProcessStartTime(pid)
	return err == nil && st == startTime
}

// BootID returns this kernel's boot id (/proc/sys/kernel/random/boot_id,
// trimmed).
func BootID() (string, error) {
	b, err := os.ReadFile(ProcDir + "/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// ProcessStartTime returns field 22 ("starttime", clock ticks after boot)
// of /proc/PID/stat as decimal text (proc(5)). The command name in field 2
// may hold spaces and parentheses, so fields are counted after its last ')'.
func ProcessStartTime(pid int) (string, error) {
	b, err := os.ReadFile(ProcDir + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("%s/%d/stat: no command name", ProcDir, pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return "", fmt.Errorf("%s/%d/stat: %d fields, want at least 22", ProcDir, pid, len(fields)+2)
	}
	return fields[19], nil
}

// ClaimFromLabels fills a Claim's holder fields from a claim lease's labels
// (the Label* constants). ContainerExists and ProcessAlive are left false:
// the caller establishes them.
func ClaimFromLabels(lease string, labels map[string]string) *Claim {
	c := &Claim{
		Lease:     lease,
		Container: labels[LabelClaimContainer],
		HostID:    labels[LabelClaimHost],
		StartTime: labels[LabelClaimStart],
		BootID:    labels[LabelClaimBoot],
	}
	if pid, err := strconv.Atoi(labels[LabelClaimPID]); err == nil && pid > 0 {
		c.PID = pid
	}
	return c
}
