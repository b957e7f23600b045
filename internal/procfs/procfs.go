// Package procfs reads the proc filesystem for the facts of this machine
// that need no daemon (docs/design.md "Layout", machinery): whether a
// process still runs (ProcessAlive, from its start time and the boot id)
// and whether a path names a namespace of pid 1 (HostPID1Namespace).
package procfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcDir is the proc filesystem ProcessAlive, BootID and ProcessStartTime
// read; tests may point it elsewhere.
var ProcDir = "/proc"

// ProcessAlive reports whether the process a resuming ledger holder names
// still runs on this machine (docs/design.md "The run ledger", a holder that is
// gone): bootID equals /proc/sys/kernel/random/boot_id, process pid exists
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
