// Package harness starts real containerd daemons for integration tests
// (docs/design.md "Build and test environment"; notes/resume-anchors.md §3).
//
// Each Daemon runs the containerd binary from <repo>/bin at the version of
// github.com/containerd/containerd/v2 this test binary was built with
// (installed by hack/deps.sh, `make deps`), as root, in a fresh temporary
// directory holding its root, state, socket and a `version = 3` config that
// disables CRI, NRI and the opt plugin. Its containerd namespace is unique
// (Daemon.Namespace), so runc state under /run/containerd/runc and cgroups
// cannot collide with another daemon or test process, and container ids made
// with Daemon.ID carry the daemon's name. Cleanup kills tasks, deletes
// containers, stops the daemon, unmounts what is still mounted under its
// directory and removes only what it made; the daemon log is printed when the
// test failed. No process of the daemon survives cleanup (its shims
// included): see Processes.
//
// Tests skip when not root unless CI=true, where a missing prerequisite fails
// (Require).
package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	ctrd "github.com/sandbox-resume/sandbox-resume/runtime/containerd"
)

// StartTimeout bounds how long Start waits for a daemon to answer Version.
const StartTimeout = 5 * time.Second

// logTail is how many lines of a daemon log a failed test prints.
const logTail = 60

// ContainerdModule is the Go module whose version the binaries must have.
const ContainerdModule = "github.com/containerd/containerd/v2"

// DisabledPlugins are disabled in every test daemon's config: CRI (its
// services and pod sandbox controller), NRI (its socket is host-global) and
// opt (it would create /opt/containerd).
var DisabledPlugins = []string{
	"io.containerd.grpc.v1.cri",
	"io.containerd.cri.v1.images",
	"io.containerd.cri.v1.runtime",
	"io.containerd.podsandbox.controller.v1.podsandbox",
	"io.containerd.nri.v1.nri",
	"io.containerd.internal.v1.opt",
}

// Require skips t under -short (`make unit`: no daemons) and when not
// running as root, unless CI=true, where not being root fails
// (internal/testenv decides).
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no containerd daemons")
	}
	testenv.RequireRoot(t, "the integration tests run containerd daemons")
}

// Daemon is one running containerd started by Start.
type Daemon struct {
	Name      string // as given to Start
	Namespace string // unique default namespace, "sr-<name>-<random>"
	Dir       string // the temporary directory holding everything below
	Root      string // --root of the daemon
	State     string // --state of the daemon
	Address   string // absolute path of the gRPC socket
	LogPath   string // the daemon's stdout and stderr
	Client    *client.Client
	// StartTime is how long the last start took, from exec to a clean
	// plugin check.
	StartTime time.Duration

	t      testing.TB
	config string
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File

	mu         sync.Mutex
	shimV2     map[string]bool // AllowShimProtocol2
	namespaces map[string]bool
	leases     map[string]string
	nsCounter  int
}

var nameRE = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// Start starts a daemon named name ([a-z0-9]{1,16}) for t and registers its
// cleanup. It waits until the daemon answers Version (at most StartTimeout)
// and fails when a plugin failed to initialize for a reason other than
// "skip plugin".
func Start(t testing.TB, name string) *Daemon {
	t.Helper()
	Require(t)
	if !nameRE.MatchString(name) {
		t.Fatalf("harness: daemon name %q does not match %s", name, nameRE)
	}
	bin := Binaries(t)

	dir, err := os.MkdirTemp("", "sr-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	tag := filepath.Base(dir)
	d := &Daemon{
		Name:       name,
		Namespace:  tag,
		Dir:        dir,
		Root:       filepath.Join(dir, "root"),
		State:      filepath.Join(dir, "state"),
		Address:    filepath.Join(dir, "c.sock"),
		LogPath:    filepath.Join(dir, "daemon.log"),
		config:     filepath.Join(dir, "config.toml"),
		t:          t,
		namespaces: map[string]bool{tag: true},
		leases:     map[string]string{},
	}
	t.Cleanup(func() { d.cleanup(t) })

	var cfg bytes.Buffer
	fmt.Fprintf(&cfg, "version = 3\nroot = %q\nstate = %q\n", d.Root, d.State)
	fmt.Fprintf(&cfg, "disabled_plugins = [\n")
	for _, p := range DisabledPlugins {
		fmt.Fprintf(&cfg, "  %q,\n", p)
	}
	fmt.Fprintf(&cfg, "]\n\n[grpc]\n  address = %q\n\n[ttrpc]\n  address = %q\n", d.Address, d.Address+".ttrpc")
	if err := os.WriteFile(d.config, cfg.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start(t, bin)
	return d
}

// daemonPath is the PATH of every daemon: bin/ first, so that its shim is
// found before any other containerd-shim-runc-v2.
func daemonPath(bin string) string {
	return bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
}

func (d *Daemon) start(t testing.TB, bin string) {
	t.Helper()
	began := time.Now()
	defer func() { d.StartTime = time.Since(began) }()
	logf, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "containerd"), "--config", d.config)
	cmd.Env = append(os.Environ(), "PATH="+daemonPath(bin))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("harness: start %s: %v", cmd.Path, err)
	}
	d.cmd, d.log, d.exited = cmd, logf, make(chan struct{})
	go func() { cmd.Wait(); close(d.exited) }()

	c, err := client.New(d.Address, client.WithDefaultNamespace(d.Namespace), client.WithTimeout(StartTimeout))
	if err != nil {
		t.Fatalf("harness: daemon %s: client: %v", d.Name, err)
	}
	d.Client = c
	deadline := time.Now().Add(StartTimeout)
	for {
		select {
		case <-d.exited:
			t.Fatalf("harness: daemon %s exited during start (%v); log:\n%s", d.Name, cmd.ProcessState, d.Log())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		_, err := c.Version(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("harness: daemon %s did not answer Version within %s: %v", d.Name, StartTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	resp, err := c.IntrospectionService().Plugins(ctx)
	if err != nil {
		t.Fatalf("harness: daemon %s: plugins: %v", d.Name, err)
	}
	var bad []string
	for _, p := range resp.Plugins {
		if p.InitErr != nil && !strings.Contains(p.InitErr.Message, "skip plugin") {
			bad = append(bad, fmt.Sprintf("%s.%s: %s", p.Type, p.ID, p.InitErr.Message))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("harness: daemon %s: plugins failed to initialize:\n  %s", d.Name, strings.Join(bad, "\n  "))
	}
}

// Context returns a context in the daemon's namespace, canceled when the test
// ends.
func (d *Daemon) Context(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(namespaces.WithNamespace(context.Background(), d.Namespace))
	t.Cleanup(cancel)
	return ctx
}

// NewNamespace returns a new namespace name "<Namespace>-n<k>" on this daemon
// (created on first use) that cleanup also empties.
func (d *Daemon) NewNamespace() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nsCounter++
	ns := fmt.Sprintf("%s-n%d", d.Namespace, d.nsCounter)
	d.namespaces[ns] = true
	return ns
}

// ID returns a container id for this daemon: "<Namespace>-<s>", so that
// runc state and cgroups name the daemon that made them.
func (d *Daemon) ID(s string) string { return d.Namespace + "-" + s }

// Connect connects runtime/containerd to this daemon in namespace ns (the
// daemon's Namespace when empty) and closes it when the test ends.
func (d *Daemon) Connect(t testing.TB, ns string, opts ...ctrd.Option) *ctrd.Runtime {
	t.Helper()
	if ns == "" {
		ns = d.Namespace
	}
	d.mu.Lock()
	d.namespaces[ns] = true
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	r, err := ctrd.Connect(ctx, d.Address, ns, opts...)
	if err != nil {
		t.Fatalf("harness: connect to daemon %s: %v", d.Name, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Log returns the daemon log so far.
func (d *Daemon) Log() string {
	b, err := os.ReadFile(d.LogPath)
	if err != nil {
		return fmt.Sprintf("(daemon log %s: %v)", d.LogPath, err)
	}
	return string(b)
}

// Restart stops the daemon (SIGTERM) and starts it again on the same root,
// state and config; Client is replaced.
func (d *Daemon) Restart(t testing.TB) {
	t.Helper()
	d.stop(t)
	d.start(t, Binaries(t))
}

// Stop stops the daemon (SIGTERM, then SIGKILL after 5 s) without removing
// anything; Restart starts it again, cleanup still removes it.
func (d *Daemon) Stop(t testing.TB) {
	t.Helper()
	d.stop(t)
}

// stop closes the client and stops the daemon: SIGTERM, then SIGKILL after
// 5 s.
func (d *Daemon) stop(t testing.TB) {
	if d.Client != nil {
		d.Client.Close()
		d.Client = nil
	}
	if d.cmd == nil {
		return
	}
	select {
	case <-d.exited:
	default:
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(5 * time.Second):
			t.Errorf("harness: daemon %s ignored SIGTERM for 5 s; killing pid %d", d.Name, d.cmd.Process.Pid)
			d.cmd.Process.Kill()
			<-d.exited
		}
	}
	d.log.Close()
	d.cmd = nil
}

var shimIDRE = regexp.MustCompile(`msg="connecting to shim ([^"]*)"`)

var shimLine = regexp.MustCompile(`msg="connecting to shim[^"]*".* version=(\d+)`)

// ShimConnections returns the "connecting to shim" lines of a daemon log
// with the shim protocol version each reports ("3" for a v2.x
// containerd-shim-runc-v2, "2" for a 1.x one).
func ShimConnections(log string) (lines, versions []string) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m := shimLine.FindStringSubmatch(sc.Text()); m != nil {
			lines, versions = append(lines, sc.Text()), append(versions, m[1])
		}
	}
	return lines, versions
}

// ShimProtocolErrors lists the "connecting to shim" lines of log whose shim
// protocol version is not 3: a 1.x containerd-shim-runc-v2 found on PATH
// instead of the one in bin/.
func ShimProtocolErrors(log string) []string {
	var bad []string
	lines, versions := ShimConnections(log)
	for i, v := range versions {
		if v != "3" {
			bad = append(bad, lines[i])
		}
	}
	return bad
}

// AllowShimProtocol2 records that container id runs under a runtime whose
// shim speaks shim protocol 2 by design (gVisor's containerd-shim-runsc-v1),
// so that cleanup's check for a 1.x containerd-shim-runc-v2 on PATH
// (ShimProtocolErrors) skips its "connecting to shim" line.
func (d *Daemon) AllowShimProtocol2(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shimV2 == nil {
		d.shimV2 = map[string]bool{}
	}
	d.shimV2[id] = true
}

func (d *Daemon) cleanup(t testing.TB) {
	if d.Client != nil {
		d.removeContainers(t)
	}
	d.stop(t)
	// Shims outlive their daemon (by design: a daemon restart keeps the
	// tasks), and a killed daemon, or a task the removal above could not
	// delete, leaves them running with parent 1, holding their
	// containers: kill them and what runs in this daemon's cgroups.
	d.killProcesses(t)
	d.unmountAll(t)
	d.mu.Lock()
	nss := make([]string, 0, len(d.namespaces))
	for ns := range d.namespaces {
		nss = append(nss, ns)
	}
	d.mu.Unlock()
	for _, ns := range nss {
		// Made by runc and the cgroup drivers for this daemon's namespaces only.
		os.RemoveAll(filepath.Join("/run/containerd/runc", ns))
		cgs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", ns))
		cgs = append(cgs, filepath.Join("/sys/fs/cgroup", ns))
		for _, cg := range cgs {
			removeDirTree(cg)
		}
	}
	log := d.Log()
	var bad []string
	for _, l := range ShimProtocolErrors(log) {
		if m := shimIDRE.FindStringSubmatch(l); m == nil || !d.shimV2[m[1]] {
			bad = append(bad, l)
		}
	}
	if len(bad) > 0 {
		t.Errorf("harness: daemon %s connected to a shim that is not v2 (another containerd-shim-runc-v2 on PATH?):\n%s", d.Name, strings.Join(bad, "\n"))
	}
	if t.Failed() {
		lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
		if len(lines) > logTail {
			lines = append([]string{fmt.Sprintf("(%d lines before these)", len(lines)-logTail)}, lines[len(lines)-logTail:]...)
		}
		t.Logf("harness: daemon %s (%s) log:\n%s", d.Name, d.Dir, strings.Join(lines, "\n"))
	}
	if err := os.RemoveAll(d.Dir); err != nil {
		t.Errorf("harness: remove %s: %v", d.Dir, err)
	}
}

// removeDirTree removes the directory tree at dir bottom-up with rmdir
// only: a cgroup directory cannot be removed while it has child cgroups
// (a container's, /sys/fs/cgroup/<controller>/<namespace>/<id>), and a
// cgroup still holding a process, like any directory holding a file, is
// left in place.
func removeDirTree(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeDirTree(filepath.Join(dir, e.Name()))
		}
	}
	_ = unix.Rmdir(dir)
}

// removeContainers kills every task and deletes every container (with its
// snapshot) in the namespaces this daemon used.
func (d *Daemon) removeContainers(t testing.TB) {
	d.mu.Lock()
	var nss []string
	for ns := range d.namespaces {
		nss = append(nss, ns)
	}
	d.mu.Unlock()
	for _, ns := range nss {
		ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), 30*time.Second)
		// A loaded machine can make the first dial after a long test time
		// out (the client's connection went idle): try again within the
		// deadline before calling it a failure.
		cs, err := d.Client.Containers(ctx)
		for i := 0; err != nil && ctx.Err() == nil && i < 5; i++ {
			time.Sleep(time.Second)
			cs, err = d.Client.Containers(ctx)
		}
		if err != nil {
			t.Errorf("harness: daemon %s: list containers in %s: %v", d.Name, ns, err)
		}
		for _, c := range cs {
			if task, err := c.Task(ctx, nil); err == nil {
				task.Kill(ctx, syscall.SIGKILL)
				if ch, err := task.Wait(ctx); err == nil {
					select {
					case <-ch:
					case <-time.After(5 * time.Second):
					}
				}
				if _, err := task.Delete(ctx, client.WithProcessKill); err != nil {
					t.Errorf("harness: daemon %s: delete task %s: %v", d.Name, c.ID(), err)
				}
			}
			if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
				t.Errorf("harness: daemon %s: delete container %s: %v", d.Name, c.ID(), err)
			}
		}
		cancel()
	}
}

// unmountAll unmounts every mount under Dir, deepest first.
func (d *Daemon) unmountAll(t testing.TB) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(d.Dir))
	if err != nil {
		t.Errorf("harness: mountinfo: %v", err)
		return
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].Mountpoint) > len(mounts[j].Mountpoint) })
	for _, m := range mounts {
		if err := unix.Unmount(m.Mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			t.Errorf("harness: unmount %s: %v", m.Mountpoint, err)
		}
	}
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// ContainerdVersion returns the version of ContainerdModule this code is
// built with ("v2.4.2"): from the binary's build info when it lists
// dependencies, else from the require line in <repo>/go.mod (test binaries
// carry no dependency list).
func ContainerdVersion() (string, error) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == ContainerdModule {
				if m.Replace != nil {
					return m.Replace.Version, nil
				}
				return m.Version, nil
			}
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for i, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == ContainerdModule {
			if !strings.HasPrefix(f[1], "v") {
				return "", fmt.Errorf("%s/go.mod:%d: version %q of %s", root, i+1, f[1], ContainerdModule)
			}
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s/go.mod does not require %s", root, ContainerdModule)
}

// RepoRoot returns the module root: the nearest directory above the working
// directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Binaries returns <repo>/bin after checking that containerd,
// containerd-shim-runc-v2 and ctr there report ContainerdVersion and that
// runc is installed. Missing or stale binaries are installed once with
// hack/deps.sh (built into the machine-wide tool cache and linked from
// bin/, under a lock). It skips (fails under CI=true) when they still
// cannot be had.
func Binaries(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() { binDir, binErr = ensureBinaries() })
	if binErr != nil {
		testenv.Missing(t, "harness: containerd binaries: %v", binErr)
	}
	return binDir
}

func ensureBinaries() (string, error) {
	version, err := ContainerdVersion()
	if err != nil {
		return "", err
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "bin")
	if err := checkBinaries(bin, version); err != nil {
		if os.Geteuid() != 0 {
			return "", fmt.Errorf("%w (run `make deps` as root)", err)
		}
		if err := install(root, version); err != nil {
			return "", err
		}
		if err := checkBinaries(bin, version); err != nil {
			return "", err
		}
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return "", fmt.Errorf("runc is not installed (apt-get install runc, or `make deps`): %w", err)
	}
	return bin, nil
}

func checkBinaries(bin, version string) error {
	want := strings.TrimPrefix(version, "v")
	for _, b := range []struct{ name, flag string }{
		{"containerd", "--version"},
		{"containerd-shim-runc-v2", "-v"},
		{"ctr", "--version"},
	} {
		out, err := exec.Command(filepath.Join(bin, b.name), b.flag).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v", filepath.Join(bin, b.name), err)
		}
		if !regexp.MustCompile(`(^|[\sv])` + regexp.QuoteMeta(want) + `([\s+]|$)`).Match(out) {
			return fmt.Errorf("%s reports %q, want version %s", filepath.Join(bin, b.name), strings.TrimSpace(string(out)), want)
		}
	}
	// The shim the daemon will find first on its PATH must be this one.
	shim, err := exec.LookPath("containerd-shim-runc-v2")
	if p := os.Getenv("PATH"); err != nil || !strings.HasPrefix(p, bin+":") {
		os.Setenv("PATH", daemonPath(bin)+":"+p)
		shim, err = exec.LookPath("containerd-shim-runc-v2")
	}
	if err != nil || shim != filepath.Join(bin, "containerd-shim-runc-v2") {
		return fmt.Errorf("containerd-shim-runc-v2 on PATH is %q, not the one in %s", shim, bin)
	}
	return nil
}

func install(root, version string) error {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "sandbox-resume-deps.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(root, "hack", "deps.sh"), version)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/deps.sh %s: %v\n%s", version, err, out)
	}
	return nil
}
