// Package etcdharness starts real etcd clusters for the fleet-ledger tests
// (docs/design.md "Build and test environment"; docs/design.md "The run ledger").
//
// Start runs a cluster of etcd members (3 by default) from <repo>/bin/etcd,
// the v3.6 server that `make deps` builds from hack/tools/etcd (never
// Debian's 3.4), each listening on 127.0.0.1 ports picked free at start, with
// its data directory and log in a temporary directory of the test. It waits
// until every member serves a linearizable read, and registers a cleanup that
// kills every member, waits for it and checks that no process of the cluster
// survives. A member can be killed, stopped and restarted on its data
// directory; StartTLS serves clients over TLS with certificates the test made
// (a CA, a server certificate for 127.0.0.1, and client certificates),
// requiring a client certificate signed by that CA.
//
// Tests skip under -short (`make unit`) and when bin/etcd is missing or is
// not the version pinned in hack/tools/etcd/go.mod, unless CI=true, where a
// missing or stale binary fails the test.
package etcdharness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// StartTimeout bounds how long Start (and Restart) wait for the members to
// serve a linearizable read.
const StartTimeout = 30 * time.Second

// Module is the Go module of the etcd server whose version bin/etcd must
// report; hack/tools/etcd/go.mod pins it.
const Module = "go.etcd.io/etcd/server/v3"

// logTail is how many lines of each member's log a failed test prints.
const logTail = 40

// missing skips, or fails under CI=true, through the one helper
// (internal/testenv) that decides it for every test.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	testenv.Missing(t, format, args...)
}

// Member is one etcd process of a Cluster.
type Member struct {
	// Name is the member's name: "m0", "m1", ...
	Name string
	// ClientURL is the URL clients use: http://127.0.0.1:PORT, or https://
	// for a TLS cluster.
	ClientURL string
	// PeerURL is the URL of the member's raft traffic (plain http).
	PeerURL string
	// DataDir is the member's --data-dir.
	DataDir string
	// LogPath holds the member's stdout and stderr, appended across
	// restarts.
	LogPath string

	c      *Cluster
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Endpoint returns the member's client endpoint as HOST:PORT.
func (m *Member) Endpoint() string {
	return strings.TrimPrefix(strings.TrimPrefix(m.ClientURL, "http://"), "https://")
}

// Running reports whether the member's process is running.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// PID returns the member's process id, 0 when it is not running.
func (m *Member) PID() int {
	if !m.Running() {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd.Process.Pid
}

// Cluster is a running etcd cluster started by Start or StartTLS.
type Cluster struct {
	// Dir is the temporary directory holding every member's data
	// directory and log, and the TLS files.
	Dir string
	// Members are the cluster's members, in the order of Endpoints.
	Members []*Member
	// TLS is the cluster's certificates; nil for a plain-text cluster.
	TLS *TLSFiles

	t     testing.TB
	bin   string
	token string
}

// Options configure Start; the zero value is a 3-member plain-text cluster.
type Options struct {
	// Members is the number of members; 0 means 3.
	Members int
	// TLS serves clients over TLS and requires client certificates signed
	// by the test CA (see TLSFiles).
	TLS bool
}

// Start starts a 3-member plain-text cluster for t (see Options) and
// registers its cleanup. It fails t when the cluster does not serve within
// StartTimeout, and skips (fails under CI=true) without bin/etcd.
func Start(t testing.TB) *Cluster { t.Helper(); return StartWith(t, Options{}) }

// StartTLS starts a 3-member cluster whose clients must present a
// certificate signed by the cluster's CA (Cluster.TLS).
func StartTLS(t testing.TB) *Cluster { t.Helper(); return StartWith(t, Options{TLS: true}) }

// StartWith starts a cluster as opts says; see Start.
func StartWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no etcd cluster")
	}
	bin := Binary(t)
	n := opts.Members
	if n == 0 {
		n = 3
	}
	dir := t.TempDir()
	c := &Cluster{Dir: dir, t: t, bin: bin, token: filepath.Base(dir) + "-" + strconv.Itoa(os.Getpid())}
	if opts.TLS {
		files, err := MakeTLS(filepath.Join(dir, "tls"))
		if err != nil {
			t.Fatalf("etcdharness: certificates: %v", err)
		}
		c.TLS = files
	}
	t.Cleanup(func() { c.cleanup() })

	// Ports are picked free, then released for etcd to bind: another test
	// process may take one in between, so a start that fails to bind is
	// tried again on new ports.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = c.start(n); err == nil {
			return c
		}
		c.killAll()
		if !errors.Is(err, errAddrInUse) {
			break
		}
		for _, m := range c.Members {
			_ = os.RemoveAll(m.DataDir)
		}
	}
	c.dumpLogs()
	t.Fatalf("etcdharness: start %d members: %v", n, err)
	return nil
}

var errAddrInUse = errors.New("address already in use")

func (c *Cluster) start(n int) error {
	ports, err := freePorts(2 * n)
	if err != nil {
		return err
	}
	scheme := "http"
	if c.TLS != nil {
		scheme = "https"
	}
	c.Members = make([]*Member, n)
	var initial []string
	for i := range n {
		name := "m" + strconv.Itoa(i)
		c.Members[i] = &Member{
			Name:      name,
			ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			DataDir:   filepath.Join(c.Dir, name),
			LogPath:   filepath.Join(c.Dir, name+".log"),
			c:         c,
		}
		initial = append(initial, name+"="+c.Members[i].PeerURL)
	}
	for _, m := range c.Members {
		if err := m.exec(strings.Join(initial, ",")); err != nil {
			return err
		}
	}
	return c.waitServing(c.Members)
}

// exec starts the member's process; initial is --initial-cluster (ignored by
// etcd on a restart, whose data directory holds the membership).
func (m *Member) exec(initial string) error {
	c := m.c
	args := []string{
		"--name", m.Name,
		"--data-dir", m.DataDir,
		"--listen-client-urls", m.ClientURL,
		"--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL,
		"--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", initial,
		"--initial-cluster-token", c.token,
		"--initial-cluster-state", "new",
		"--log-level", "warn",
	}
	if c.TLS != nil {
		args = append(args,
			"--cert-file", c.TLS.ServerCert,
			"--key-file", c.TLS.ServerKey,
			"--trusted-ca-file", c.TLS.CA,
			"--client-cert-auth",
		)
	}
	log, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, and SIGKILL when the test process dies, so a
	// crashed test leaves no member behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	m.mu.Lock()
	m.cmd, m.exited = cmd, exited
	m.mu.Unlock()
	return nil
}

// waitServing waits until each of members answers a linearizable read
// through a client of its own endpoint (which needs a leader and a quorum).
func (c *Cluster) waitServing(members []*Member) error {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	for _, m := range members {
		for {
			if !m.Running() {
				if logHas(m.LogPath, "address already in use") {
					return fmt.Errorf("%s at %s: %w", m.Name, m.ClientURL, errAddrInUse)
				}
				return fmt.Errorf("%s at %s exited (log %s)", m.Name, m.ClientURL, m.LogPath)
			}
			if err := c.probe(ctx, m); err == nil {
				break
			} else if ctx.Err() != nil {
				return fmt.Errorf("%s at %s not serving after %s: %v", m.Name, m.ClientURL, StartTimeout, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func (c *Cluster) probe(ctx context.Context, m *Member) error {
	cli, err := c.Client(m)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "/etcdharness/probe")
	return err
}

// Client returns a client of the given members' endpoints (every member
// when none is given), with the cluster's client certificate on a TLS
// cluster. The caller closes it.
func (c *Cluster) Client(members ...*Member) (*clientv3.Client, error) {
	if len(members) == 0 {
		members = c.Members
	}
	var eps []string
	for _, m := range members {
		eps = append(eps, m.Endpoint())
	}
	cfg := clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if c.TLS != nil {
		tc, err := c.TLS.ClientConfig(c.TLS.ClientCert, c.TLS.ClientKey)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	return clientv3.New(cfg)
}

// Endpoints returns every member's client endpoint, HOST:PORT, in member
// order.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.Endpoint())
	}
	return eps
}

// Kill sends SIGKILL to member i and waits for it to exit.
func (c *Cluster) Kill(t testing.TB, i int) {
	t.Helper()
	c.Members[i].signal(syscall.SIGKILL)
}

// Stop sends SIGTERM to member i and waits for it to exit (SIGKILL after
// 10 s).
func (c *Cluster) Stop(t testing.TB, i int) {
	t.Helper()
	c.Members[i].signal(syscall.SIGTERM)
}

// Pause stops member i with SIGSTOP (its process stays; peers and clients
// see it hang); Resume continues it.
func (c *Cluster) Pause(t testing.TB, i int) {
	t.Helper()
	if p := c.Members[i].PID(); p != 0 {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
}

// Resume continues member i after Pause.
func (c *Cluster) Resume(t testing.TB, i int) {
	t.Helper()
	if p := c.Members[i].PID(); p != 0 {
		_ = syscall.Kill(p, syscall.SIGCONT)
	}
}

func (m *Member) signal(sig syscall.Signal) {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused member cannot handle SIGTERM
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Restart starts member i again on its data directory (after Kill or Stop)
// and waits until it serves a linearizable read. A running member is
// stopped first.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	m := c.Members[i]
	if m.Running() {
		m.signal(syscall.SIGTERM)
	}
	var initial []string
	for _, o := range c.Members {
		initial = append(initial, o.Name+"="+o.PeerURL)
	}
	if err := m.exec(strings.Join(initial, ",")); err != nil {
		t.Fatalf("etcdharness: restart %s: %v", m.Name, err)
	}
	if err := c.waitServing([]*Member{m}); err != nil {
		c.dumpLogs()
		t.Fatalf("etcdharness: restart %s: %v", m.Name, err)
	}
}

// StartMember starts member i again without waiting for it to serve: with
// no quorum it cannot serve until another member comes back too.
func (c *Cluster) StartMember(t testing.TB, i int) {
	t.Helper()
	m := c.Members[i]
	if m.Running() {
		return
	}
	var initial []string
	for _, o := range c.Members {
		initial = append(initial, o.Name+"="+o.PeerURL)
	}
	if err := m.exec(strings.Join(initial, ",")); err != nil {
		t.Fatalf("etcdharness: start %s: %v", m.Name, err)
	}
}

// WaitServing waits until every running member serves a linearizable read
// (at most StartTimeout).
func (c *Cluster) WaitServing(t testing.TB) {
	t.Helper()
	var running []*Member
	for _, m := range c.Members {
		if m.Running() {
			running = append(running, m)
		}
	}
	if err := c.waitServing(running); err != nil {
		c.dumpLogs()
		t.Fatalf("etcdharness: %v", err)
	}
}

// Leader returns the index of the member that is the raft leader, from
// the status of every running member; -1 when none names a running leader.
func (c *Cluster) Leader(t testing.TB) int {
	t.Helper()
	ids := map[uint64]int{}
	var leader uint64
	for i, m := range c.Members {
		if !m.Running() {
			continue
		}
		cli, err := c.Client(m)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := cli.Status(ctx, m.Endpoint())
		cancel()
		cli.Close()
		if err != nil {
			continue
		}
		ids[st.Header.MemberId] = i
		if st.Leader != 0 {
			leader = st.Leader
		}
	}
	if i, ok := ids[leader]; ok && leader != 0 {
		return i
	}
	return -1
}

// WaitLeader waits until a running member is the raft leader (at most
// StartTimeout) and returns its index.
func (c *Cluster) WaitLeader(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(StartTimeout)
	for {
		if i := c.Leader(t); i >= 0 {
			return i
		}
		if time.Now().After(deadline) {
			c.dumpLogs()
			t.Fatalf("etcdharness: no leader after %s", StartTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Processes returns the pids of live processes whose command line names the
// cluster's directory: after cleanup there must be none.
func (c *Cluster) Processes() []int {
	return processesMentioning(c.Dir)
}

func processesMentioning(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), s) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			// A zombie (state Z) is dead: its parent has yet to reap it.
			if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

func (c *Cluster) killAll() {
	for _, m := range c.Members {
		if m != nil {
			m.signal(syscall.SIGKILL)
		}
	}
}

// cleanup kills every member, waits for it, and fails the test if a process
// of the cluster survives; member logs are printed when the test failed.
func (c *Cluster) cleanup() {
	if c.t.Failed() {
		c.dumpLogs()
	}
	c.killAll()
	if pids := c.Processes(); len(pids) > 0 {
		c.t.Errorf("etcdharness: processes of the cluster in %s survive cleanup: %v", c.Dir, pids)
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

func (c *Cluster) dumpLogs() {
	for _, m := range c.Members {
		if m == nil {
			continue
		}
		b, err := os.ReadFile(m.LogPath)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > logTail {
			lines = lines[len(lines)-logTail:]
		}
		c.t.Logf("etcd %s (%s) log tail:\n%s", m.Name, m.ClientURL, strings.Join(lines, "\n"))
	}
}

func logHas(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary returns <repo>/bin/etcd after checking that it reports the version
// of Module pinned in hack/tools/etcd/go.mod. It skips t (fails under
// CI=true) when it is missing or stale: `make deps` builds it.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() { binPath, binErr = checkBinary() })
	if binErr != nil {
		missing(t, "etcdharness: %v (run `make deps`)", binErr)
	}
	return binPath
}

func checkBinary() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	want, err := PinnedVersion(root)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "bin", "etcd")
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %v", bin, err)
	}
	if !strings.Contains(string(out), "etcd Version: "+strings.TrimPrefix(want, "v")+"\n") {
		return "", fmt.Errorf("%s reports %q, want etcd %s", bin, strings.TrimSpace(string(out)), want)
	}
	return bin, nil
}

// PinnedVersion returns the version of Module that hack/tools/etcd/go.mod
// under the repository root requires (e.g. "v3.6.16").
func PinnedVersion(root string) (string, error) {
	path := filepath.Join(root, "hack", "tools", "etcd", "go.mod")
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == Module && strings.HasPrefix(fields[1], "v") {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", path, Module)
}

func repoRoot() (string, error) {
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
