package harness

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// This file holds what the fault suite (test/integration/fault_test.go,
// issue 10 item 2) needs from a daemon beyond Start/Restart/Stop: a SIGKILL
// instead of a SIGTERM, and a root on a tmpfs of bounded size.

// Kill SIGKILLs the daemon (no shutdown of its own: bolt transactions,
// ingests and GC in flight are cut) and waits until it has exited, within
// 5 s. Restart then starts it again on the same root, state and config;
// cleanup still removes everything. The shims of running tasks survive,
// as they would a crash.
func (d *Daemon) Kill(t testing.TB) {
	t.Helper()
	if d.Client != nil {
		d.Client.Close()
		d.Client = nil
	}
	if d.cmd == nil {
		t.Fatalf("harness: daemon %s is not running", d.Name)
	}
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("harness: SIGKILL daemon %s (pid %d): %v", d.Name, d.cmd.Process.Pid, err)
	}
	select {
	case <-d.exited:
	case <-time.After(5 * time.Second):
		t.Fatalf("harness: daemon %s (pid %d) did not exit within 5 s of SIGKILL", d.Name, d.cmd.Process.Pid)
	}
}

// StartTmpfs is Start with the daemon's Root on a tmpfs of size bytes
// (rounded up by the kernel to pages): a small size makes the content store
// and the overlayfs snapshots run out of space (ENOSPC) at a known point.
// The daemon is started once by Start, stopped, given the tmpfs (mounted
// over Root, hiding the first start's files) and started again on the
// empty root. Cleanup unmounts the tmpfs with everything else under Dir
// (unmountAll) before removing Dir.
func StartTmpfs(t testing.TB, name string, size int64) *Daemon {
	t.Helper()
	d := Start(t, name)
	d.stop(t)
	if err := unix.Mount("tmpfs", d.Root, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0711", size)); err != nil {
		t.Fatalf("harness: mount a %d-byte tmpfs on %s: %v", size, d.Root, err)
	}
	d.start(t, Binaries(t))
	return d
}

// ResizeRoot remounts the tmpfs of a StartTmpfs daemon's Root with a new
// size in bytes while the daemon runs (freeing space without touching what
// is stored). A size below what is in use fails (EBUSY from the kernel).
func (d *Daemon) ResizeRoot(t testing.TB, size int64) {
	t.Helper()
	if err := unix.Mount("", d.Root, "", unix.MS_REMOUNT, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("harness: remount %s with size=%d: %v", d.Root, size, err)
	}
}

// RootUsage returns the bytes used and free on the file system holding
// Root (statfs).
func (d *Daemon) RootUsage(t testing.TB) (used, free int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(d.Root, &st); err != nil {
		t.Fatalf("harness: statfs %s: %v", d.Root, err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, int64(st.Bavail) * st.Bsize
}
