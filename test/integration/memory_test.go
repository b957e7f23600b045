package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/host/hosttest"
	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// counterScript counts in the shell variable i only; /out/count is a view
// of it, written atomically.
const counterScript = `i=0; while :; do i=$((i+1)); echo $i >/out/count.tmp && mv /out/count.tmp /out/count; sleep 0.05; done`

// memoryContainer creates container d.ID(id) from image name running
// counterScript with /out bound to out, its stdio creator io (cio.NullIO:
// /dev/null, which CRIU dumps), and waits until it counted to 5.
func memoryContainer(t *testing.T, d *harness.Daemon, name, id, out string, io cio.Creator, opts ...oci.SpecOpts) string {
	t.Helper()
	ctx := d.Context(t)
	img, err := d.Client.GetImage(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatal(err)
	}
	cid := d.ID(id)
	c, err := d.Client.NewContainer(ctx, cid, client.WithImage(img), client.WithSnapshotter("overlayfs"),
		client.WithNewSnapshot(cid, img), client.WithNewSpec(append([]oci.SpecOpts{oci.WithImageConfig(img), oci.WithProcessArgs("/bin/sh", "-c", counterScript),
			oci.WithMounts([]specs.Mount{{Destination: "/out", Type: "bind", Source: out, Options: []string{"rbind", "rw"}}})}, opts...)...))
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.NewTask(ctx, io)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitCounter(t, filepath.Join(out, "count"), "the counter starting", func(n int) bool { return n >= 5 })
	return cid
}

// memoryRun is one run suspended with --memory: its ref file and the
// counter's values before the suspend and at its end.
type memoryRun struct {
	env          suspendEnv
	cid, out     string
	refPath      string
	ref          *snapshot.Ref
	before, last int
}

// suspendMemory starts a counter container and suspends it with --memory
// (stopping it).
func suspendMemory(t *testing.T, d *harness.Daemon, id string) *memoryRun {
	t.Helper()
	im := harness.ImportBusybox(t, d, "busybox:1")
	m := &memoryRun{env: newSuspendEnv(t, "busybox:1"), out: t.TempDir()}
	m.cid = memoryContainer(t, d, im.Name, id, m.out, cio.NullIO)
	count := filepath.Join(m.out, "count")
	m.before = readCounter(count)
	m.refPath = filepath.Join(m.env.dir, "g1.ref.json")
	began := time.Now()
	if out, code := runCLI(t, d, "--output", "json", "suspend", "--container", m.cid, "--config", m.env.cfg, "--key", m.env.key, "--memory", "--out", m.refPath); code != 0 {
		t.Fatalf("suspend --memory: exit %d: %s\ndaemon log:\n%s", code, out, d.Log())
	}
	t.Logf("suspend --memory: %s", time.Since(began))
	file, err := os.ReadFile(m.refPath)
	if err != nil {
		t.Fatal(err)
	}
	if m.ref, err = snapshot.OpenRef(file, m.env.trust); err != nil {
		t.Fatal(err)
	}
	// The task was killed after the record: the counter stands still.
	m.last = readCounter(count)
	time.Sleep(300 * time.Millisecond)
	if n := readCounter(count); n != m.last {
		t.Fatalf("the counter went on from %d to %d after suspend --memory stopped the task", m.last, n)
	}
	if err := os.Remove(count); err != nil {
		t.Fatal(err)
	}
	return m
}

// resumeVerdict runs resume with args and decodes its JSON verdict.
func resumeVerdict(t *testing.T, d *harness.Daemon, m *memoryRun, args ...string) (int, *resume.Verdict) {
	t.Helper()
	args = append([]string{"--output", "json", "resume", "--ref", m.refPath, "--config", m.env.cfg, "--trust", m.env.pub}, args...)
	out, code := runCLI(t, d, args...)
	var v resume.Verdict
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("resume verdict: %v\n%s", err, out)
	}
	return code, &v
}

// checkResult returns the verdict's check name.
func checkResult(t *testing.T, v *resume.Verdict, name string) resume.CheckResult {
	t.Helper()
	for _, c := range v.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in the verdict %+v", name, v.Checks)
	return resume.CheckResult{}
}

// TestMemorySuspendResume: a shell counter held only in a variable goes on
// after `suspend --memory` and `resume` on the same host (docs/design.md
// "Memory"): the ref records the CRIU image (format criu/1, one blob, the
// CRIU version and digest, the kernel and the CPU), resume --check reports
// check 12, the resumed task writes the checkpointed value + 1 first, and a
// second resume of the same generation is 8 (no second copy of the
// process).
func TestMemorySuspendResume(t *testing.T) {
	harness.Require(t)
	requireCRIU(t)
	d := harness.Start(t, "memory")
	m := suspendMemory(t, d, "counter")
	mem := m.ref.Memory
	if mem == nil || mem.Format != snapshot.MemoryFormatCRIU || len(mem.Blobs) != 1 || mem.Blobs[0].MediaType != snapshot.MediaTypeMemoryCRIU ||
		mem.Runtime.Tool != snapshot.MemoryToolCRIU || !strings.HasPrefix(mem.Runtime.Version, "4.") || mem.Runtime.BinaryDigest == "" ||
		mem.Host.Kernel == "" || mem.Host.CPU.Vendor == "" || len(mem.Host.CPU.Flags) == 0 {
		t.Fatalf("memory %+v: want one criu/1 blob, CRIU 4.x with its digest, the kernel and the CPU", mem)
	}
	t.Logf("memory image %d bytes; CRIU %s; kernel %s; %s %d/%d, %d flags", mem.Blobs[0].Size, mem.Runtime.Version, mem.Host.Kernel,
		mem.Host.CPU.Vendor, mem.Host.CPU.Family, mem.Host.CPU.Model, len(mem.Host.CPU.Flags))

	code, v := resumeVerdict(t, d, m, "--check")
	if code != 0 || !v.Accepted || v.Pid != 0 {
		t.Fatalf("resume --check: exit %d %+v", code, v)
	}
	if c := checkResult(t, v, resume.CheckMemory); c.Result != resume.ResultPass || !strings.Contains(c.Detail, "restorable") {
		t.Fatalf("check 12 under --check: %+v", c)
	}
	if n := readCounter(filepath.Join(m.out, "count")); n != -1 {
		t.Fatalf("resume --check restored something: the counter wrote %d", n)
	}

	began := time.Now()
	code, v = resumeVerdict(t, d, m)
	if code != 0 || !v.Accepted || v.Pid == 0 || v.Materialize == nil || !strings.Contains(v.Materialize.Detail, "task restored") {
		t.Fatalf("resume: exit %d %+v (materialize %+v)\ndaemon log:\n%s", code, v, v.Materialize, d.Log())
	}
	count := filepath.Join(m.out, "count")
	first := waitCounter(t, count, "after the resume", func(int) bool { return true })
	t.Logf("resume to the first write: %s; counter %d before the suspend, %d at its end, %d first after the resume", time.Since(began), m.before, m.last, first)
	if first <= m.before || first > m.last+1 {
		t.Fatalf("the restored task wrote %d first; want a value in (%d, %d] (its memory at the checkpoint + 1; a restart writes 1)", first, m.before, m.last+1)
	}
	waitCounter(t, count, "the restored task counting on", func(n int) bool { return n > first+2 })

	// A second restore of the same generation is refused: the run is live.
	code, v = resumeVerdict(t, d, m, "--container", d.ID("second"))
	if code != 8 || v.Accepted || v.Class != resume.ClassClaimConflict {
		t.Fatalf("second resume of the memory generation: exit %d class %q, want 8 claim-conflict", code, v.Class)
	}
}

// TestMemoryNoMemoryRestarts: `resume --no-memory` of a memory generation
// restores the filesystem and restarts the process from its args (the
// counter starts again at 1), and check 12 says so.
func TestMemoryNoMemoryRestarts(t *testing.T) {
	harness.Require(t)
	requireCRIU(t)
	d := harness.Start(t, "nomemory")
	m := suspendMemory(t, d, "counter")
	code, v := resumeVerdict(t, d, m, "--no-memory", "--start")
	if code != 0 || !v.Accepted || v.Pid == 0 {
		t.Fatalf("resume --no-memory --start: exit %d %+v", code, v)
	}
	if c := checkResult(t, v, resume.CheckMemory); c.Result != resume.ResultPass || !strings.Contains(c.Detail, "not restored (--no-memory)") {
		t.Fatalf("check 12 under --no-memory: %+v", c)
	}
	first := waitCounter(t, filepath.Join(m.out, "count"), "after the restart", func(int) bool { return true })
	if first >= m.before {
		t.Fatalf("the restarted task wrote %d first; a restart counts from 1 (the checkpoint held %d…%d)", first, m.before, m.last)
	}
}

// TestMemoryCPUFlagsIncompatible: a ref whose recorded CPU flags this
// host lacks (edited, then signed with the run's key) is refused at check
// 12: exit 10, memory-incompatible, naming the field and the flag.
func TestMemoryCPUFlagsIncompatible(t *testing.T) {
	harness.Require(t)
	requireCRIU(t)
	d := harness.Start(t, "memflags")
	m := suspendMemory(t, d, "counter")
	const flag = "zz_sandbox_resume_no_such_flag"
	m.ref.Memory.Host.CPU.Flags = append(m.ref.Memory.Host.CPU.Flags, flag)
	slices.Sort(m.ref.Memory.Host.CPU.Flags)
	key, err := envelope.LoadPrivateKey(m.env.key)
	if err != nil {
		t.Fatal(err)
	}
	file, err := snapshot.SignRef(m.ref, key)
	if err != nil {
		t.Fatal(err)
	}
	m.refPath = filepath.Join(m.env.dir, "edited.ref.json")
	if err := os.WriteFile(m.refPath, file, 0o644); err != nil {
		t.Fatal(err)
	}
	code, v := resumeVerdict(t, d, m)
	if code != 10 || v.Accepted || v.Class != resume.ClassMemoryIncompatible {
		t.Fatalf("resume of a ref recording a CPU flag this host lacks: exit %d class %q, want 10 memory-incompatible", code, v.Class)
	}
	if c := checkResult(t, v, resume.CheckMemory); c.Result != resume.ResultFail || !strings.Contains(c.Detail, "/ref/memory/host/cpu/flags") || !strings.Contains(c.Detail, flag) {
		t.Fatalf("check 12: %+v, want a failure naming the field and %s", c, flag)
	}
	if n := readCounter(filepath.Join(m.out, "count")); n != -1 {
		t.Fatalf("a refused resume restored the task: the counter wrote %d", n)
	}
}

// TestMemoryRefusesTerminal: a task whose standard streams are a terminal
// is not checkpointed; suspend --memory refuses it up front (exit 1,
// naming the stream and the device), writes no ref, and the workload goes
// on counting. (A task created with a log file, cio.LogFile, dumps: the
// runc shim gives it pipes.)
func TestMemoryRefusesTerminal(t *testing.T) {
	harness.Require(t)
	requireCRIU(t)
	d := harness.Start(t, "memtty")
	im := harness.ImportBusybox(t, d, "busybox:1")
	env := newSuspendEnv(t, "busybox:1")
	out := t.TempDir()
	tty := cio.NewCreator(cio.WithStreams(nil, &syncBuffer{}, nil), cio.WithTerminal, cio.WithFIFODir(filepath.Join(d.Dir, "fifo")))
	cid := memoryContainer(t, d, im.Name, "tty", out, tty, oci.WithTTY)
	cmdOut, code := runCLI(t, d, "--output", "json", "suspend", "--container", cid, "--config", env.cfg, "--key", env.key, "--memory", "--out", filepath.Join(env.dir, "ref.json"))
	if code != 1 || !strings.Contains(cmdOut, "stdin") || !strings.Contains(cmdOut, "/dev/pts/") || !strings.Contains(cmdOut, "terminal") {
		t.Fatalf("suspend --memory of a task on a terminal: exit %d %s, want 1 naming the stream and the terminal", code, cmdOut)
	}
	if _, err := os.Stat(filepath.Join(env.dir, "ref.json")); err == nil {
		t.Fatal("a refused suspend wrote a ref file")
	}
	n := readCounter(filepath.Join(out, "count"))
	waitCounter(t, filepath.Join(out, "count"), "the workload after the refusal", func(m int) bool { return m > n+2 })
}

// TestHostMemoryConformance runs the host suite's memory part
// (hosttest.RunMemory) against runtime/containerd: a counter container
// with /dev/null stdio per subtest.
func TestHostMemoryConformance(t *testing.T) {
	harness.Require(t)
	requireCRIU(t)
	d := harness.Start(t, "hostmem")
	im := harness.ImportBusybox(t, d, "busybox:1")
	rt := d.Connect(t, "")
	n := 0
	hosttest.RunMemory(t, func(t *testing.T) hosttest.MemoryFixture {
		n++
		cid := memoryContainer(t, d, im.Name, fmt.Sprintf("mem%d", n), t.TempDir(), cio.NullIO)
		return hosttest.MemoryFixture{Host: rt, Probe: captureProbe{rt}, Container: cid, LeaseID: snapshot.RunLease(fmt.Sprintf("mem-%d", n))}
	})
}

// TestMemoryGenerations: generations 1 → 2 → 3 with memory. Each resume
// restores the counter where the previous suspend --memory checkpointed
// it, and the next suspend --memory of the incarnation (a restored task)
// checkpoints it again: the counter never starts over.
func TestMemoryGenerations(t *testing.T) {
	harness.Require(t)
	requireCRIU(t)
	d := harness.Start(t, "memgens")
	m := suspendMemory(t, d, "counter")
	count := filepath.Join(m.out, "count")
	for gen := 2; gen <= 3; gen++ {
		code, v := resumeVerdict(t, d, m)
		if code != 0 || !v.Accepted || v.Pid == 0 {
			t.Fatalf("resume of generation %d: exit %d %+v (materialize %+v)\ndaemon log:\n%s", gen-1, code, v, v.Materialize, d.Log())
		}
		first := waitCounter(t, count, "after the resume", func(int) bool { return true })
		if first <= m.before || first > m.last+1 {
			t.Fatalf("generation %d restored: first write %d, want a value in (%d, %d]", gen-1, first, m.before, m.last+1)
		}
		m.before = waitCounter(t, count, "counting on", func(n int) bool { return n > first+3 })
		refPath := filepath.Join(m.env.dir, fmt.Sprintf("g%d.ref.json", gen))
		if out, code := runCLI(t, d, "--output", "json", "suspend", "--container", v.Container, "--config", m.env.cfg, "--key", m.env.key, "--memory", "--out", refPath); code != 0 {
			t.Fatalf("suspend --memory of the generation-%d incarnation: exit %d %s\ndaemon log:\n%s", gen-1, code, out, d.Log())
		}
		file, err := os.ReadFile(refPath)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := snapshot.OpenRef(file, m.env.trust)
		if err != nil || ref.Generation != uint64(gen) || ref.Memory == nil {
			t.Fatalf("generation %d ref: %+v (err %v)", gen, ref, err)
		}
		m.refPath, m.ref = refPath, ref
		m.last = readCounter(count)
		t.Logf("generation %d: counter %d at the checkpoint", gen, m.last)
		if err := os.Remove(count); err != nil {
			t.Fatal(err)
		}
	}
	code, v := resumeVerdict(t, d, m)
	if code != 0 || !v.Accepted {
		t.Fatalf("resume of generation 3: exit %d %+v", code, v)
	}
	if first := waitCounter(t, count, "after the last resume", func(int) bool { return true }); first <= m.before || first > m.last+1 {
		t.Fatalf("generation 3 restored: first write %d, want a value in (%d, %d]", first, m.before, m.last+1)
	}
}

// TestMemorySuspendKillTrials: suspend --memory SIGKILLed at each step
// from the checkpoint on (its image stored, the ref blob stored, the
// generation recorded, the ref file written, the task killed) leaves the
// workload frozen or stopped — never two copies — and a rerun of the same
// command completes it; the resume then restores the counter where the
// completed suspend left it.
func TestMemorySuspendKillTrials(t *testing.T) {
	harness.Require(t)
	requireCRIU(t)
	d := harness.Start(t, "memkill")
	im := harness.ImportBusybox(t, d, "busybox:1")
	for _, step := range []string{"checkpoint", "refblob", "recorded", "written", "stop"} {
		t.Run(step, func(t *testing.T) {
			m := &memoryRun{env: newSuspendEnv(t, "busybox:1"), out: t.TempDir()}
			m.cid = memoryContainer(t, d, im.Name, "kill-"+step, m.out, cio.NullIO)
			count := filepath.Join(m.out, "count")
			m.before = readCounter(count)
			m.refPath = filepath.Join(m.env.dir, "g1.ref.json")
			args := []string{"--address", d.Address, "--namespace", d.Namespace, "suspend", "--container", m.cid, "--config", m.env.cfg, "--key", m.env.key, "--memory", "--out", m.refPath}
			killCLIAt(t, step, args...)
			// Killed after the pause: the task is frozen or stopped.
			n := readCounter(count)
			time.Sleep(300 * time.Millisecond)
			if n2 := readCounter(count); n2 != n {
				t.Fatalf("killed at %s: the counter went on from %d to %d", step, n, n2)
			}
			if out, code := runCLI(t, d, args[4:]...); code != 0 {
				t.Fatalf("rerun after the kill at %s: exit %d %s", step, code, out)
			}
			file, err := os.ReadFile(m.refPath)
			if err != nil {
				t.Fatal(err)
			}
			if m.ref, err = snapshot.OpenRef(file, m.env.trust); err != nil || m.ref.Memory == nil {
				t.Fatalf("ref after the rerun: %+v (err %v)", m.ref, err)
			}
			m.last = readCounter(count)
			if err := os.Remove(count); err != nil {
				t.Fatal(err)
			}
			code, v := resumeVerdict(t, d, m)
			if code != 0 || !v.Accepted || v.Pid == 0 {
				t.Fatalf("resume after the kill at %s and the rerun: exit %d %+v", step, code, v)
			}
			if first := waitCounter(t, count, "after the resume", func(int) bool { return true }); first <= m.before || first > m.last+1 {
				t.Fatalf("killed at %s: the restored task wrote %d first, want a value in (%d, %d]", step, first, m.before, m.last+1)
			}
		})
	}
}

// TestMemoryResumeKilledBeforeRestore: resume SIGKILLed after Live and
// before the restore (fault point resume-live) leaves a live incarnation
// without a task and nothing counting; the same resume run again restores
// the task into that container, once.
func TestMemoryResumeKilledBeforeRestore(t *testing.T) {
	harness.Require(t)
	requireCRIU(t)
	d := harness.Start(t, "memlive")
	m := suspendMemory(t, d, "counter")
	count := filepath.Join(m.out, "count")
	args := []string{"--address", d.Address, "--namespace", d.Namespace, "resume", "--ref", m.refPath, "--config", m.env.cfg, "--trust", m.env.pub}
	killCLIAt(t, "resume-live", args...)
	time.Sleep(300 * time.Millisecond)
	if n := readCounter(count); n != -1 {
		t.Fatalf("killed before the restore, yet the counter wrote %d", n)
	}
	code, v := resumeVerdict(t, d, m)
	if code != 0 || !v.Accepted || v.Pid == 0 || !strings.Contains(checkResult(t, v, resume.CheckClaim).Detail, "the restore is retried") {
		t.Fatalf("rerun after the kill: exit %d %+v (claim %q)", code, v, checkResult(t, v, resume.CheckClaim).Detail)
	}
	if first := waitCounter(t, count, "after the rerun's restore", func(int) bool { return true }); first <= m.before || first > m.last+1 {
		t.Fatalf("the restored task wrote %d first, want a value in (%d, %d]", first, m.before, m.last+1)
	}
	if code, _ := resumeVerdict(t, d, m); code != 8 {
		t.Fatalf("a third resume once the task runs: exit %d, want 8", code)
	}
}

// TestMemoryRefusedSuspendedThaws: suspend --memory whose Suspended the
// ledger refuses (another suspend recorded the run while this one held at
// its checkpoint) exits 8, writes no ref, and thaws the task: the counter
// goes on from the value it held, intact.
func TestMemoryRefusedSuspendedThaws(t *testing.T) {
	harness.Require(t)
	requireCRIU(t)
	d := harness.Start(t, "memrefused")
	im := harness.ImportBusybox(t, d, "busybox:1")
	env := newSuspendEnv(t, "busybox:1")
	out := t.TempDir()
	count := filepath.Join(out, "count")
	cid := memoryContainer(t, d, im.Name, "refused", out, cio.NullIO)
	const run = "memrefused-1"
	refPath := filepath.Join(env.dir, "ref.json")
	args := []string{"--address", d.Address, "--namespace", d.Namespace, "suspend", "--container", cid, "--config", env.cfg, "--key", env.key, "--memory", "--run", run, "--out", refPath}
	p := startCLI(t, []string{faultpoint.Env + "=checkpoint"}, args...)
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("suspend --memory ended before its checkpoint: %s", p.stderr.String())
			}
			if strings.Contains(l, "fault point checkpoint reached") {
				break wait
			}
		case <-deadline:
			t.Fatalf("suspend --memory never reached its checkpoint: %s", p.stderr.String())
		}
	}
	held := readCounter(count)
	time.Sleep(300 * time.Millisecond)
	if n := readCounter(count); n != held {
		t.Fatalf("the task ran at the checkpoint: %d then %d", held, n)
	}
	l := daemonLedger(t, d, "")
	if _, err := l.Suspended(d.Context(t), ledger.SuspendRequest{Run: run, Generation: 1, Ref: digest.FromString("another suspend"),
		Container: ledger.Container{Host: "another-host", Namespace: "other", ID: "other"}, Created: time.Now(),
		RunUID: "ruid:00112233445566778899aabbccddeeff"}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 8 {
		t.Fatalf("suspend --memory refused by the ledger: %v, want exit 8; stderr:\n%s", err, p.stderr.String())
	}
	if _, err := os.Stat(refPath); err == nil {
		t.Fatal("a refused suspend wrote a ref file")
	}
	next := waitCounter(t, count, "the thawed task", func(n int) bool { return n > held })
	if next > held+2 {
		t.Fatalf("after the thaw the counter wrote %d, want %d (it held %d): not the same process", next, held+1, held)
	}
	waitCounter(t, count, "the thawed task counting on", func(n int) bool { return n > next+2 })
}
