package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is a process found under /proc: its pid and command line
// (arguments joined by spaces).
type Process struct {
	PID     int
	Cmdline string
}

func (p Process) String() string { return fmt.Sprintf("pid %d: %s", p.PID, p.Cmdline) }

// killWait bounds how long cleanup waits for killed processes to be gone.
const killWait = 10 * time.Second

// Processes returns the live processes that belong to this daemon: those
// whose command line names its directory (the daemon itself, its root,
// state, socket and config all lie under Dir), one of its namespaces as an
// argument (a shim's "-namespace NS", runc's "--root /run/containerd/runc/NS"),
// and every process in one of its namespaces' cgroups (the containers'
// workloads, whose command lines name nothing of the daemon). The calling
// process is never listed. Zombies are not listed: they are gone, only
// not yet reaped.
func (d *Daemon) Processes() []Process {
	d.mu.Lock()
	nss := make([]string, 0, len(d.namespaces))
	for ns := range d.namespaces {
		nss = append(nss, ns)
	}
	d.mu.Unlock()
	slices.Sort(nss)
	inCgroup := map[int]bool{}
	for _, ns := range nss {
		for _, pid := range cgroupPIDs(ns) {
			inCgroup[pid] = true
		}
	}
	entries, _ := os.ReadDir("/proc")
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || zombie(pid) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if inCgroup[pid] || d.namedBy(args, nss) {
			out = append(out, Process{PID: pid, Cmdline: strings.Join(args, " ")})
		}
	}
	return out
}

// namedBy reports whether a command line names the daemon's directory or
// one of its namespaces nss as a whole argument or path element.
func (d *Daemon) namedBy(args, nss []string) bool {
	for _, a := range args {
		if a == d.Dir || strings.Contains(a, d.Dir+"/") {
			return true
		}
		for _, ns := range nss {
			if a == ns || strings.HasSuffix(a, "/"+ns) || strings.Contains(a, "/"+ns+"/") {
				return true
			}
		}
	}
	return false
}

// cgroupPIDs lists the processes in the cgroups of namespace ns under
// every cgroup v1 controller and the v2 hierarchy (containerd puts a
// container of namespace ns in /<ns>/<id>).
func cgroupPIDs(ns string) []int {
	roots, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", ns))
	roots = append(roots, filepath.Join("/sys/fs/cgroup", ns))
	var pids []int
	for _, r := range roots {
		filepath.WalkDir(r, func(path string, de os.DirEntry, err error) error {
			if err != nil || de.IsDir() || de.Name() != "cgroup.procs" {
				return nil
			}
			raw, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(raw)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// zombie reports whether pid has exited and waits to be reaped (or is
// gone already).
func zombie(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(raw, ')')
	return i < 0 || i+2 >= len(raw) || raw[i+2] == 'Z' || raw[i+2] == 'X'
}

// killProcesses SIGKILLs every process of Processes (shims a stopped or
// killed daemon left running, their containers' workloads, runc) and
// waits, at most killWait, until none is left; it reports the survivors
// as a test error.
func (d *Daemon) killProcesses(t testing.TB) {
	deadline := time.Now().Add(killWait)
	for {
		left := d.Processes()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("harness: daemon %s: processes still alive %s after SIGKILL:\n  %s", d.Name, killWait, strings.Join(strs(left), "\n  "))
			return
		}
		for _, p := range left {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func strs(ps []Process) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
