package integration

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	etcdledger "github.com/sandbox-resume/sandbox-resume/ledger/etcd"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/etcdharness"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// The fleet: two containerd daemons, the hosts A and B, that share one
// 3-member etcd cluster as their run ledger (docs/design.md "The run
// ledger"), and a third daemon, the origin, where the generations are
// suspended and exported from. Every command is the CLI as a separate
// process with --ledger etcd://…, built without -race (cli).

// fleet is the daemons and cluster of one fleet test.
type fleet struct {
	etcd              *etcdharness.Cluster
	origin, a, b      *harness.Daemon
	hostA, hostB      string // the hosts' ids (introspection UUIDs)
	bb                harness.BusyboxImage
	cfg, pub, key     string // the pinned devcontainer.json and the signer's keys
	dir               string
	generationTimings []time.Duration
}

// fleetConfig is the fleet runs' devcontainer.json: the image pinned by its
// index digest and no feature, so the manifest is pinned and a generation
// may resume on another host.
const fleetConfig = `{"image": "busybox@%s", "containerEnv": {"FLEET": "1"}}`

// startFleet starts the origin, A, B and the etcd cluster, imports the same
// busybox image into each daemon, and writes the pinned configuration and a
// signer key pair. Under -short it skips (the daemons' Require and the
// etcd harness decide the rest: skip, or fail under CI=true).
func startFleet(t *testing.T) *fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the fleet tests start containerd daemons and an etcd cluster")
	}
	f := &fleet{dir: t.TempDir()}
	f.etcd = etcdharness.Start(t)
	f.origin = harness.Start(t, "fleeto")
	f.a = harness.Start(t, "fleeta")
	f.b = harness.Start(t, "fleetb")
	f.bb = harness.ImportBusybox(t, f.origin, "busybox:1")
	for _, d := range []*harness.Daemon{f.a, f.b} {
		if bb := harness.ImportBusybox(t, d, "busybox:1"); bb.Index != f.bb.Index {
			t.Fatalf("busybox index %s on %s, %s on the origin: the pinned config would not resolve", bb.Index, d.Name, f.bb.Index)
		}
	}
	f.cfg = filepath.Join(f.dir, "devcontainer.json")
	if err := os.WriteFile(f.cfg, fmt.Appendf(nil, fleetConfig, f.bb.Index), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.pub, f.key, err = envelope.WriteKeyPair(filepath.Join(f.dir, "signer"), false); err != nil {
		t.Fatal(err)
	}
	f.hostA, f.hostB = hostID(t, f.a), hostID(t, f.b)
	if f.hostA == f.hostB {
		t.Fatalf("hosts A and B have one host id %s", f.hostA)
	}
	t.Cleanup(func() { noCLIProcesses(t) })
	return f
}

func hostID(t *testing.T, d *harness.Daemon) string {
	t.Helper()
	h, err := d.Connect(t, "").Host(d.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return h.ID
}

// tenant is one key prefix of an etcd cluster: a fleet's ledger as the CLI
// names it (flags) and as the Go API opens it (l).
type tenant struct {
	url   string
	flags []string // appended to every suspend, resume, runs and discard
	l     *etcdledger.Ledger
	c     *etcdharness.Cluster
}

// tenant returns a fresh prefix of cluster c (f.etcd when nil), so every
// subtest starts from an empty ledger; on a TLS cluster the flags carry the
// CA and the client certificate.
func (f *fleet) tenant(t *testing.T, c *etcdharness.Cluster) *tenant {
	t.Helper()
	if c == nil {
		c = f.etcd
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "/fleet/" + hex.EncodeToString(b)
	tn := &tenant{c: c, url: etcdledger.Scheme + strings.Join(c.Endpoints(), ",") + prefix}
	tn.flags = []string{"--ledger", tn.url}
	cfg := etcdledger.Config{Endpoints: c.Endpoints(), Prefix: prefix}
	if c.TLS != nil {
		tls := etcdledger.TLS{CACert: c.TLS.CA, Cert: c.TLS.ClientCert, Key: c.TLS.ClientKey}
		tn.flags = append(tn.flags, "--ledger-cacert", tls.CACert, "--ledger-cert", tls.Cert, "--ledger-key", tls.Key)
		cfg.TLS = tls
	}
	l, err := etcdledger.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	tn.l = l
	return tn
}

// get reads run's record through the Go API.
func (tn *tenant) get(t *testing.T, run string) ledger.Record {
	t.Helper()
	rec, err := tn.l.Get(ctx(t), run)
	if err != nil {
		t.Fatalf("ledger record of %s: %v", run, err)
	}
	return rec
}

// claimKeyPresent reports whether run's claim key exists (a resuming
// record's claim is held).
func (tn *tenant) claimKeyPresent(t *testing.T, run string) bool {
	t.Helper()
	cli, err := tn.c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx(t), tn.l.ClaimKey(run))
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Kvs) == 1
}

// waitClaimExpired waits until run's claim key is gone (its lease expired),
// at most within.
func (tn *tenant) waitClaimExpired(t *testing.T, run string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for tn.claimKeyPresent(t, run) {
		if time.Since(start) > within {
			t.Fatalf("the claim key of %s is still there after %s", run, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// ledgerCommands are the subcommands that take the ledger flags.
var ledgerCommands = map[string]bool{"suspend": true, "resume": true, "runs": true, "discard": true}

// args returns the global flags (daemon d, JSON output) and args, with
// tn's ledger flags appended when args[0] uses the ledger.
func (tn *tenant) args(d *harness.Daemon, args ...string) []string {
	full := append([]string{"--address", d.Address, "--namespace", d.Namespace, "--output", "json"}, args...)
	if tn != nil && len(args) > 0 && ledgerCommands[args[0]] {
		full = append(full, tn.flags...)
	}
	return full
}

// run runs the CLI against d with args (tn's ledger flags added) and
// returns the exit code, stdout and stderr.
func (tn *tenant) run(t testing.TB, d *harness.Daemon, args ...string) (int, []byte, string) {
	t.Helper()
	p := startProc(t, nil, tn.args(d, args...)...)
	return p.wait(t)
}

// must is run failing t unless the exit is 0; stdout is decoded into out
// when out is not nil.
func (tn *tenant) must(t testing.TB, d *harness.Daemon, out any, args ...string) {
	t.Helper()
	code, stdout, stderr := tn.run(t, d, args...)
	if code != 0 {
		t.Fatalf("sandbox-resume %s on %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), d.Name, code, stdout, stderr)
	}
	if out != nil {
		if err := json.Unmarshal(stdout, out); err != nil {
			t.Fatalf("sandbox-resume %s: stdout is not JSON: %v\n%s", args[0], err, stdout)
		}
	}
}

// gen is one generation of a fleet run: suspended on the origin (recorded
// in the tenant's ledger), exported, and imported on A and B.
type gen struct {
	run        string
	refA, refB string // the ref file as each host's import wrote it
	ref        digest.Digest
}

// generation suspends a fresh container on the origin as run (generation
// 1, recorded in tn), exports it and imports it on A and B.
func (f *fleet) generation(t *testing.T, tn *tenant, run string) *gen {
	t.Helper()
	start := time.Now()
	defer func() { f.generationTimings = append(f.generationTimings, time.Since(start)) }()
	dir := filepath.Join(f.dir, run)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cid := scriptContainerWith(t, f.origin, f.bb.Name, run, workload, oci.WithEnv([]string{"FLEET=1"})) // as declared (suspend checks it)
	ref := filepath.Join(dir, "ref.json")
	tn.must(t, f.origin, nil, "suspend", "--container", cid, "--config", f.cfg, "--key", f.key, "--run", run, "--out", ref)
	tarPath := filepath.Join(dir, "run.tar")
	tn.must(t, f.origin, nil, "export", "--ref", ref, "--out", tarPath)
	g := &gen{run: run, refA: filepath.Join(dir, "a.ref.json"), refB: filepath.Join(dir, "b.ref.json")}
	tn.must(t, f.a, nil, "import", tarPath, "--trust", f.pub, "--out", g.refA)
	tn.must(t, f.b, nil, "import", tarPath, "--trust", f.pub, "--out", g.refB)
	file, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	g.ref = digest.FromBytes(file)
	return g
}

// resumeArgs are the arguments of resuming g on d (A or B) as container id.
func (f *fleet) resumeArgs(d *harness.Daemon, g *gen, id string, extra ...string) []string {
	ref := g.refA
	if d == f.b {
		ref = g.refB
	}
	return append([]string{"resume", "--ref", ref, "--config", f.cfg, "--trust", f.pub, "--container", id}, extra...)
}

// resume runs `resume` of g on d as container id and returns the exit
// code and the verdict.
func (f *fleet) resume(t *testing.T, tn *tenant, d *harness.Daemon, g *gen, id string, extra ...string) (int, *resume.Verdict) {
	t.Helper()
	return f.startResume(t, tn, d, g, id, nil, extra...).verdict(t)
}

// startResume starts `resume` of g on d as container id with env added to
// its environment, without waiting.
func (f *fleet) startResume(t *testing.T, tn *tenant, d *harness.Daemon, g *gen, id string, env []string, extra ...string) *proc {
	t.Helper()
	return startProc(t, env, tn.args(d, f.resumeArgs(d, g, id, extra...)...)...)
}

// holder is the ledger's name of container id on d.
func (f *fleet) holder(d *harness.Daemon, id string) ledger.Container {
	host := f.hostA
	if d == f.b {
		host = f.hostB
	}
	return ledger.Container{Host: host, Namespace: d.Namespace, ID: id}
}

// fenceLabel returns the fence label of container id on d ("" when the
// container does not exist).
func fenceLabel(t *testing.T, d *harness.Daemon, id string) string {
	t.Helper()
	c, err := d.Client.LoadContainer(d.Context(t), id)
	if err != nil {
		return ""
	}
	labels, err := c.Labels(d.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return labels[snapshot.LabelFence]
}

// wantLive checks that run's record is live with fence, held by container
// id on d, and that the container carries that fence on its label.
func (f *fleet) wantLive(t *testing.T, tn *tenant, run string, fence uint64, d *harness.Daemon, id string) {
	t.Helper()
	rec := tn.get(t, run)
	if rec.State != ledger.StateLive || rec.Fence != fence || rec.Holder == nil || rec.Holder.Container != f.holder(d, id) {
		t.Errorf("record of %s: %s; want live with fence %d held by %s", run, rec, fence, f.holder(d, id))
	}
	if got := fenceLabel(t, d, id); got != strconv.FormatUint(fence, 10) {
		t.Errorf("container %s on %s: fence label %q, want %d", id, d.Name, got, fence)
	}
}

// proc is a CLI process started by a fleet test.
type proc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr *syncBuffer
	lines  chan string // stderr lines, closed at EOF
	done   chan struct{}
	err    error
}

// startProc starts the CLI with args and env added to its environment (a
// per-daemon bolt ledger is never used: every ledger command here names
// --ledger). A cleanup kills it if the test leaves it running.
func startProc(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(cli(t), args...), stderr: &syncBuffer{}, lines: make(chan string, 64), done: make(chan struct{})}
	p.cmd.Env = cliEnv(args, env...)
	p.cmd.Stdout = &p.stdout
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		defer close(p.lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.stderr.Write([]byte(sc.Text() + "\n"))
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		<-scanned // Wait closes the pipe: read it to the end first
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitFor waits until the process writes a stderr line containing s.
func (p *proc) waitFor(t testing.TB, s string, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				t.Fatalf("sandbox-resume ended (%v) without writing %q; stderr:\n%s\nstdout:\n%s", p.err, s, p.stderr.String(), p.stdout.String())
			}
			if strings.Contains(l, s) {
				return
			}
		case <-timeout:
			t.Fatalf("sandbox-resume did not write %q within %s; stderr:\n%s", s, within, p.stderr.String())
		}
	}
}

// waitPause waits until the process reports reaching fault point step.
func (p *proc) waitPause(t testing.TB, step string) {
	t.Helper()
	p.waitFor(t, "fault point "+step+" reached", 60*time.Second)
}

func (p *proc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to pid %d: %v", sig, p.cmd.Process.Pid, err)
	}
}

// wait waits for the process (at most 2 minutes) and returns its exit code
// (-1 when a signal ended it), stdout and stderr.
func (p *proc) wait(t testing.TB) (int, []byte, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("sandbox-resume %s ran for 2 minutes; killed; stderr:\n%s", strings.Join(p.cmd.Args[1:], " "), p.stderr.String())
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0, p.stdout.Bytes(), p.stderr.String()
	case errors.As(p.err, &ee):
		return ee.ExitCode(), p.stdout.Bytes(), p.stderr.String()
	}
	t.Fatalf("sandbox-resume: %v", p.err)
	return 0, nil, ""
}

// verdict waits for a resume process and decodes its verdict; the exit
// code must be the verdict's.
func (p *proc) verdict(t testing.TB) (int, *resume.Verdict) {
	t.Helper()
	code, stdout, stderr := p.wait(t)
	var v resume.Verdict
	if err := json.Unmarshal(stdout, &v); err != nil {
		t.Fatalf("exit %d: stdout is not a verdict: %v\n%s\nstderr: %s", code, err, stdout, stderr)
	}
	if code != v.ExitCode {
		t.Errorf("exit %d, verdict says %d", code, v.ExitCode)
	}
	return code, &v
}

// pauseEnv is the environment that holds a CLI at fault point step
// (internal/faultpoint; cli builds with -tags faultpoint).
func pauseEnv(step string) []string { return []string{faultpoint.Env + "=" + step} }

// noCLIProcesses fails t when a process of the CLI binary is still running
// (not a zombie): every process a fleet test started must have ended.
func noCLIProcesses(t *testing.T) {
	t.Helper()
	if cliPath == "" {
		return
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !strings.HasPrefix(exe, filepath.Dir(cliPath)+"/") {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err == nil {
			if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		t.Errorf("a sandbox-resume process (pid %s, %s) survives the fleet test", e.Name(), exe)
	}
}

// incarnationsOn counts run's incarnations on A and B.
func (f *fleet) incarnationsOn(t *testing.T, run string) (a, b int) {
	t.Helper()
	return incarnations(t, f.a, run), incarnations(t, f.b, run)
}

// discardEverywhere ends run fleet-wide: `discard --force --purge` on the
// host that holds it (deleting its incarnation), then `discard --purge` on
// the other (its run lease), and checks that no incarnation is left.
func (f *fleet) discardEverywhere(t *testing.T, tn *tenant, run string, holder *harness.Daemon) {
	t.Helper()
	other := f.a
	if holder == f.a {
		other = f.b
	}
	var res resume.DiscardResult
	tn.must(t, holder, &res, "discard", "--run", run, "--force", "--purge")
	if res.State != ledger.StatePurged {
		t.Errorf("discard --force --purge on %s: %+v", holder.Name, res)
	}
	tn.must(t, other, &res, "discard", "--run", run, "--purge")
	if res.State != ledger.StatePurged {
		t.Errorf("discard --purge on %s: %+v", other.Name, res)
	}
	if a, b := f.incarnationsOn(t, run); a+b != 0 {
		t.Errorf("after discarding %s everywhere: %d incarnations on A, %d on B", run, a, b)
	}
}

// within reports d rounded for logs.
func within(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
