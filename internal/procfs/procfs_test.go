package procfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/internal/procfs"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
)

func TestProcessAlive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		testenv.Missing(t, "/proc (%v): mount procfs", err)
	}
	pid := os.Getpid()
	start, err := procfs.ProcessStartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := procfs.BootID()
	if err != nil {
		t.Fatal(err)
	}
	if !procfs.ProcessAlive(pid, start, boot) {
		t.Errorf("this process (pid %d start %s boot %s) is not alive", pid, start, boot)
	}
	for _, tt := range []struct {
		name        string
		pid         int
		start, boot string
	}{
		{"another start time", pid, start + "1", boot},
		{"another boot", pid, start, "00000000-0000-0000-0000-000000000000"},
		{"no pid", 0, start, boot},
		{"no start time", pid, "", boot},
		{"pid gone", 1 << 30, start, boot},
	} {
		if procfs.ProcessAlive(tt.pid, tt.start, tt.boot) {
			t.Errorf("%s: alive", tt.name)
		}
	}
}

func TestProcessStartTimeParsesCommandNames(t *testing.T) {
	dir := t.TempDir()
	old := procfs.ProcDir
	procfs.ProcDir = dir
	t.Cleanup(func() { procfs.ProcDir = old })
	// A command name with spaces and parentheses (proc(5): field 2).
	stat := "77 (a b) c)) S 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	if err := os.MkdirAll(filepath.Join(dir, "77"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "77", "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := procfs.ProcessStartTime(77)
	if err != nil || got != "987654" {
		t.Errorf("start time %q, %v; want 987654", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "77", "stat"), []byte("77 (x) S 1 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := procfs.ProcessStartTime(77); err == nil {
		t.Error("short stat accepted")
	}
}

// TestHostPID1Namespace checks the real host check where it can: pid 1's
// own namespace file is the host's, and anything it cannot stat fails
// closed.
func TestHostPID1Namespace(t *testing.T) {
	if !procfs.HostPID1Namespace("pid", filepath.Join(t.TempDir(), "missing")) {
		t.Error("a path that cannot be stat'ed must count as the host's")
	}
	if !procfs.HostPID1Namespace("no-such-type", "/proc/1/ns/pid") {
		t.Error("an unknown type must count as the host's")
	}
	if _, err := os.Stat("/proc/1/ns/net"); err != nil {
		// Where pid 1's namespace cannot be read (a sandbox whose pid 1
		// belongs to another user namespace: permission denied even as
		// root), nothing can be compared with it, so every path counts
		// as the host's (fail closed), this process's own too.
		if !procfs.HostPID1Namespace("network", "/proc/self/ns/net") {
			t.Errorf("pid 1's namespace unreadable (%v), yet /proc/self/ns/net was judged not the host's", err)
		}
		return
	}
	if !procfs.HostPID1Namespace("network", "/proc/1/ns/net") {
		t.Error("/proc/1/ns/net is pid 1's network namespace")
	}
	f := filepath.Join(t.TempDir(), "not-a-namespace")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if procfs.HostPID1Namespace("network", f) {
		t.Error("a regular file is not pid 1's namespace")
	}
}
