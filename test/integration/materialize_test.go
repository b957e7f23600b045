package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// materializeConfig is the declaration of the suspended runs below: an
// applied env entry, one with ${…} and a mount (both not applied).
const materializeConfig = `{
	"image": "busybox:1",
	"containerEnv": {"GREETING": "hello", "HOMEISH": "${localEnv:HOME}"},
	"mounts": ["type=volume,source=cache,target=/cache"]
}`

// suspendedRun is a run suspended through the CLI: a container ran
// workload (writes /data.txt and /var/sr/n.txt, deletes the marker) with
// the declaration's GREETING in its environment and a tmpfs at its mount
// target /cache, was suspended with run id run, and ref is its signed ref
// file.
type suspendedRun struct {
	d                  *harness.Daemon
	run, ref, cfg, pub string
	key                string
	dir                string
}

func suspendRun(t *testing.T, d *harness.Daemon, run string) *suspendedRun {
	t.Helper()
	im := harness.ImportBusybox(t, d, "busybox:1")
	cid := scriptContainerWith(t, d, im.Name, "src-"+run, workload, oci.WithEnv([]string{"GREETING=hello"}),
		oci.WithMounts([]specs.Mount{{Destination: "/cache", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev"}}}))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(materializeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	pub, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
	if err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(dir, "ref.json")
	if _, code := runCLI(t, d, "suspend", "--container", cid, "--config", cfg, "--key", key, "--run", run, "--out", ref); code != 0 {
		t.Fatalf("suspend exit %d", code)
	}
	return &suspendedRun{d: d, run: run, ref: ref, cfg: cfg, pub: pub, key: key, dir: dir}
}

// resumeCLI runs `resume` (no --check) with --output json through the CLI
// binary and returns the exit code and verdict.
func resumeCLI(t *testing.T, s *suspendedRun, extra ...string) (int, *resume.Verdict) {
	t.Helper()
	args := []string{"--address", s.d.Address, "--namespace", s.d.Namespace, "--output", "json",
		"resume", "--ref", s.ref, "--config", s.cfg, "--trust", s.pub}
	args = append(args, extra...)
	cmd := exec.Command(cli(t), args...)
	cmd.Env = cliEnv(args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var v resume.Verdict
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatalf("exit %d: stdout is not a verdict: %v\n%s\nstderr: %s", code, err, stdout.String(), stderr.String())
	}
	if code != v.ExitCode {
		t.Errorf("exit %d, verdict says %d", code, v.ExitCode)
	}
	return code, &v
}

func failDetail(v *resume.Verdict) string {
	if f := v.Failed(); f != nil {
		return f.Name + ": " + f.Detail
	}
	return ""
}

// containers lists the container ids in the daemon's namespace.
func containers(t *testing.T, d *harness.Daemon) map[string]bool {
	t.Helper()
	cs, err := d.Client.Containers(d.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, c := range cs {
		out[c.ID()] = true
	}
	return out
}

// catIn starts the container's own process (busybox's /bin/sh, from the
// image config) with a stdin kept open, so it waits, then executes script
// inside it (as `ctr task exec` does) and returns the script's output; the
// task is killed and deleted afterwards.
func catIn(t *testing.T, d *harness.Daemon, id, script string) string {
	t.Helper()
	ctx := d.Context(t)
	c, err := d.Client.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	fifo := cio.WithFIFODir(filepath.Join(d.Dir, "fifo"))
	pr, pw := io.Pipe()
	defer pw.Close()
	task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(pr, io.Discard, io.Discard), fifo))
	if err != nil {
		t.Fatalf("new task %s: %v", id, err)
	}
	defer func() {
		task.Kill(context.WithoutCancel(ctx), syscall.SIGKILL)
		task.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
	}()
	if err := task.Start(ctx); err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps := *spec.Process
	ps.Args, ps.Terminal = []string{"/bin/sh", "-c", script}, false
	out := &syncBuffer{}
	p, err := task.Exec(ctx, "show", &ps, cio.NewCreator(cio.WithStreams(nil, out, out), fifo))
	if err != nil {
		t.Fatalf("exec in %s: %v", id, err)
	}
	exitCh, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatalf("start exec in %s: %v", id, err)
	}
	select {
	case <-exitCh:
	case <-time.After(30 * time.Second):
		t.Fatalf("exec in %s did not exit; output %q", id, out.String())
	}
	// The copy of stdout may finish a little after the exit.
	for i := 0; i < 50 && !strings.Contains(out.String(), "END"); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	p.Delete(ctx)
	return out.String()
}

func TestMaterializeSeesPreSuspendFiles(t *testing.T) {
	d := harness.Start(t, "mat")
	s := suspendRun(t, d, "mat-1")

	code, v := resumeCLI(t, s)
	if code != 0 || !v.Accepted {
		t.Fatalf("resume exit %d: %s", code, failDetail(v))
	}
	id := resume.DefaultContainerID(s.run, 1)
	if v.Container != id || v.Materialize == nil || v.Materialize.Result != resume.ResultPass {
		t.Fatalf("verdict container %q materialize %+v", v.Container, v.Materialize)
	}
	// The recorded spec had no console and no namespace paths: nothing
	// was edited that the verdict must list.
	if len(v.NotApplied) != 0 {
		t.Errorf("notApplied %v, want none", v.NotApplied)
	}
	out := catIn(t, d, id, `cat /data.txt /var/sr/n.txt; test -e /etc/sandbox-resume-marker && echo MARKER-PRESENT; echo "G=$GREETING H=$HOMEISH"; grep -q ' /cache tmpfs ' /proc/mounts && echo CACHE-TMPFS; echo END`)
	for _, want := range []string{"hello-from-suspend", "nested", "G=hello H=\n", "CACHE-TMPFS"} {
		if !strings.Contains(out, want) {
			t.Errorf("resumed container output %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "MARKER-PRESENT") {
		t.Errorf("the file deleted before suspension is back: %q", out)
	}
	// Labels on the container.
	c, err := d.Client.LoadContainer(d.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(d.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Labels[snapshot.LabelRun] != s.run || !strings.HasPrefix(info.Labels[snapshot.LabelManifest], "blake3:") ||
		info.Runtime.Name != "io.containerd.runc.v2" || info.SnapshotKey != id {
		t.Errorf("container record: labels %v runtime %s snapshot key %s", info.Labels, info.Runtime.Name, info.SnapshotKey)
	}

	// A second resume (another container id) is 8 naming the holder.
	code, v = resumeCLI(t, s, "--container", "other-"+s.run)
	if code != 8 || !strings.Contains(failDetail(v), id) {
		t.Errorf("second resume: exit %d %s; want 8 naming %s", code, failDetail(v), id)
	}
	if containers(t, d)["other-"+s.run] {
		t.Errorf("the refused second resume created a container")
	}

	// discard (the run is live: --force), then resume: 9 — the diff is
	// gone (the snapshot check fails on its own), but the ledger says
	// discarded and that takes precedence (docs/design.md "Hardening").
	if _, code := runCLI(t, d, "discard", "--run", s.run); code != 8 {
		t.Fatalf("discard of a live run without --force: exit %d, want 8", code)
	}
	if _, code := runCLI(t, d, "discard", "--run", s.run, "--force"); code != 0 {
		t.Fatalf("discard exit %d", code)
	}
	code, v = resumeCLI(t, s, "--container", "third-"+s.run)
	if code != 9 || v.Class != resume.ClassSuperseded {
		t.Errorf("resume after discard: exit %d %s; want 9", code, failDetail(v))
	}
	if c := v.Check(resume.CheckSnapshot); c == nil || c.Result != resume.ResultFail {
		t.Errorf("snapshot check after discard %+v, want its own failure kept", c)
	}
	if c := v.Check(resume.CheckImage); c == nil || c.Result != resume.ResultPass {
		t.Errorf("image check after discard %+v, want pass (the base image is stored)", c)
	}
}

func TestMaterializeStart(t *testing.T) {
	d := harness.Start(t, "matstart")
	s := suspendRun(t, d, "start-1")
	code, v := resumeCLI(t, s, "--container", "started", "--start")
	if code != 0 || v.Pid == 0 || v.Container != "started" {
		t.Fatalf("resume --start exit %d pid %d container %q: %s", code, v.Pid, v.Container, failDetail(v))
	}
	task, err := func() (uint32, error) {
		c, err := d.Client.LoadContainer(d.Context(t), "started")
		if err != nil {
			return 0, err
		}
		tk, err := c.Task(d.Context(t), nil)
		if err != nil {
			return 0, err
		}
		return tk.Pid(), nil
	}()
	if err != nil || task != v.Pid {
		t.Fatalf("task pid %d (%v), verdict pid %d", task, err, v.Pid)
	}
}

// TestMaterializeWrongDiffID: a ref whose diffID is wrong (re-signed by
// the same key) while its blob is intact — the blob's bytes match its
// digest but decompress to other bytes than the recorded diffID — is 7
// and nothing is created: containerd's apply computes the diffID while it
// extracts and the extraction snapshot is removed before it is committed;
// no container, no snapshot, the claim is released.
func TestMaterializeWrongDiffID(t *testing.T) {
	d := harness.Start(t, "matbad")
	s := suspendRun(t, d, "bad-1")
	file, err := os.ReadFile(s.ref)
	if err != nil {
		t.Fatal(err)
	}
	ref := s.openRef(t, file)
	ref.Layers[0].DiffID = digest.FromString("not the diff")
	k, err := envelope.LoadPrivateKey(s.key)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := snapshot.SignRef(ref, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.ref, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	// The suspend recorded the good ref: the re-signed one would be
	// forked (6) before materializing. Purge the record (the run lease
	// and its blobs stay) and record the re-signed ref, so the claim passes
	// and the layer is checked.
	l := daemonLedger(t, d, "")
	if _, err := l.Discard(ctx(t), s.run, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Purge(ctx(t), s.run); err != nil {
		t.Fatal(err)
	}
	// Turn 3: a purged run is never claimed: the re-signed ref is recorded
	// as generation 1 again, as if its suspend had written it.
	if _, err := l.Suspended(ctx(t), ledger.SuspendRequest{Run: s.run, Generation: 1, Ref: digest.FromBytes(bad),
		Container: ledger.Container{Host: ref.Host.ID, Namespace: d.Namespace, ID: "bad-reset"}, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	wantMaterializeRefused(t, s, ref.Layers[0].DiffID.String())
}

// TestMaterializeTamperedBlob: the stored layer blob changed on disk (one
// byte of the file in the daemon's content store, same size) is 7 before
// anything is applied when the layer is extracted: the blob's digest is
// checked first (naming the recorded digest), no container, no snapshot,
// the claim is released. On the suspend's own host the chain snapshot it
// committed is used without hashing the blob (docs/design.md "Resume on
// the same host without extracting": such a blob is found when the run
// moves), so the test removes it first — with the stopped source
// container on it — and the resume takes the extract's path.
func TestMaterializeTamperedBlob(t *testing.T) {
	d := harness.Start(t, "mattamper")
	s := suspendRun(t, d, "tamper-1")
	file, err := os.ReadFile(s.ref)
	if err != nil {
		t.Fatal(err)
	}
	ref := s.openRef(t, file)
	src, err := d.Client.LoadContainer(d.Context(t), d.ID("src-"+s.run))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Delete(d.Context(t), client.WithSnapshotCleanup); err != nil {
		t.Fatal(err)
	}
	if err := d.Client.SnapshotService("overlayfs").Remove(d.Context(t), chainName(ref)); err != nil {
		t.Fatalf("remove the chain snapshot of %s: %v", s.run, err)
	}
	p := filepath.Join(d.Root, "io.containerd.content.v1.content", "blobs", "sha256", ref.Layers[0].Digest.Encoded())
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(p, b, 0o444); err != nil {
		t.Fatal(err)
	}
	wantMaterializeRefused(t, s, "has digest")
}

// openRef opens a ref file of the run with its trust.
func (s *suspendedRun) openRef(t *testing.T, file []byte) *snapshot.Ref {
	t.Helper()
	trust, err := envelope.LoadTrust(s.pub)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := snapshot.OpenRef(file, trust)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// wantMaterializeRefused resumes s and wants 7 (snapshot-missing) with
// detail naming want and the released claim, no container and no snapshot
// added, and the record suspended with no holder.
func wantMaterializeRefused(t *testing.T, s *suspendedRun, want string) {
	t.Helper()
	d := s.d
	before, beforeSnaps := containers(t, d), snapshotNames(t, d)
	code, v := resumeCLI(t, s)
	if code != 7 || v.Class != resume.ClassSnapshotMissing || v.Container != "" {
		t.Fatalf("exit %d class %s container %q: %s", code, v.Class, v.Container, failDetail(v))
	}
	if !strings.Contains(failDetail(v), want) || !strings.Contains(failDetail(v), "released") {
		t.Errorf("detail %q does not name %q and the released claim", failDetail(v), want)
	}
	if after := containers(t, d); len(after) != len(before) {
		t.Errorf("containers %v → %v", before, after)
	}
	for name := range snapshotNames(t, d) {
		if !beforeSnaps[name] {
			t.Errorf("snapshot %s left behind (before: %v)", name, beforeSnaps)
		}
	}
	rec, err := daemonLedger(t, d, "").Get(d.Context(t), s.run)
	if err != nil || rec.State != ledger.StateSuspended || rec.Holder != nil {
		t.Errorf("record after a failed materialization: %v, %v; want suspended (the claim released)", rec, err)
	}
}

// snapshotNames is the set of the daemon's overlayfs snapshots in its
// namespace, committed and active.
func snapshotNames(t *testing.T, d *harness.Daemon) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := d.Client.SnapshotService("overlayfs").Walk(d.Context(t), func(_ context.Context, i snapshots.Info) error {
		out[i.Name] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMaterializeConcurrent: rounds of two concurrent resume processes of
// one run with different --container ids: exactly one container, the other
// process exits 8 naming the winner's container.
func TestMaterializeConcurrent(t *testing.T) {
	d := harness.Start(t, "matrace")
	const rounds = 20
	for i := 0; i < rounds; i++ {
		s := suspendRun(t, d, fmt.Sprintf("race-%d", i))
		ids := []string{fmt.Sprintf("race-%d-a", i), fmt.Sprintf("race-%d-b", i)}
		codes := make([]int, 2)
		verdicts := make([]*resume.Verdict, 2)
		var wg sync.WaitGroup
		for j := range ids {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				codes[j], verdicts[j] = resumeCLI(t, s, "--container", ids[j])
			}(j)
		}
		wg.Wait()
		cs := containers(t, d)
		win := -1
		for j := range ids {
			if codes[j] == 0 {
				if win >= 0 {
					t.Fatalf("round %d: both resumes succeeded", i)
				}
				win = j
			}
		}
		if win < 0 {
			t.Fatalf("round %d: exits %v: %s | %s", i, codes, failDetail(verdicts[0]), failDetail(verdicts[1]))
		}
		lose := 1 - win
		if codes[lose] != 8 || !strings.Contains(failDetail(verdicts[lose]), ids[win]) {
			t.Errorf("round %d: loser exit %d %q; want 8 naming %s", i, codes[lose], failDetail(verdicts[lose]), ids[win])
		}
		if !cs[ids[win]] || cs[ids[lose]] {
			t.Errorf("round %d: containers %v", i, cs)
		}
	}
}

// TestMaterializeLiveHolderNotTakenOver: a resuming record whose holder
// process is alive (this test process) and whose container does not exist
// yet — a resume still materializing — is 8; once that holder is gone
// (another start time) the rerun replaces it and resumes.
func TestMaterializeLiveHolderNotTakenOver(t *testing.T) {
	d := harness.Start(t, "matlive")
	s := suspendRun(t, d, "live-1")
	refFile, err := os.ReadFile(s.ref)
	if err != nil {
		t.Fatal(err)
	}
	host, err := d.Connect(t, "").Host(d.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	holder, err := resume.Self(ledger.Container{Host: host.ID, Namespace: d.Namespace, ID: "materializing"})
	if err != nil {
		t.Fatal(err)
	}
	l := daemonLedger(t, d, "")
	uid := s.openRef(t, refFile).RunUID // a claim names the ref's run UID, as resume does
	c, err := l.Claim(d.Context(t), ledger.ClaimRequest{Run: s.run, Generation: 1, Ref: digest.FromBytes(refFile), RunUID: uid, Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	code, v := resumeCLI(t, s)
	if code != 8 || !strings.Contains(failDetail(v), "materializing") {
		t.Fatalf("exit %d %s; want 8 naming the live holder", code, failDetail(v))
	}
	if containers(t, d)[resume.DefaultContainerID(s.run, 1)] {
		t.Fatal("a container was created while another resumer holds the claim")
	}
	// The holder dies: the record names another start time.
	if err := c.Release(d.Context(t)); err != nil {
		t.Fatal(err)
	}
	holder.Start += "0"
	if _, err := l.Claim(d.Context(t), ledger.ClaimRequest{Run: s.run, Generation: 1, Ref: digest.FromBytes(refFile), RunUID: uid, Holder: holder}); err != nil {
		t.Fatal(err)
	}
	code, v = resumeCLI(t, s)
	if code != 0 || !strings.Contains(v.Check(resume.CheckClaim).Detail, "replaced the gone resuming holder") {
		t.Fatalf("gone holder: exit %d %s; claim detail %q", code, failDetail(v), v.Check(resume.CheckClaim).Detail)
	}
	if v.Fence != 3 {
		t.Errorf("fence %d, want 3 (three claims)", v.Fence)
	}
}

// BenchmarkMaterializeCPU times `resume` (no --check) of one suspended run
// of SR_BENCH_MIB MiB (default 256; writeChanges' mix) on one warm daemon:
// wall time, the CLI's CPU (user + system, its rusage) and the daemon's
// CPU (/proc/<pid>/stat) per resume, medians as metrics. With
// SR_BENCH_PREV_CLI naming another sandbox-resume binary, it resumes the
// same run alternately with that binary (metrics with -prev), so a before
// and after share the load. Before each resume the run is made resumable
// again, untimed (resumeAgain: the layer is applied every time).
// SR_BENCH_RUNS (default 6) resumes per binary; SR_BENCH_START=1 resumes
// with --start (the time to a running incarnation; the shim's and runc's
// CPU is in neither figure).
func BenchmarkMaterializeCPU(b *testing.B) {
	mib, runs := int64(256), 6
	if v := os.Getenv("SR_BENCH_MIB"); v != "" {
		fmt.Sscan(v, &mib)
	}
	if v := os.Getenv("SR_BENCH_RUNS"); v != "" {
		fmt.Sscan(v, &runs)
	}
	d := harness.Start(b, "benchmat")
	im := harness.ImportBusybox(b, d, "busybox:1")
	ctx := d.Context(b)
	img, err := d.Client.GetImage(ctx, im.Name)
	if err != nil {
		b.Fatal(err)
	}
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(`{"image": "busybox:1@`+im.Index.String()+`", "name": "bench"}`), 0o644); err != nil {
		b.Fatal(err)
	}
	pub, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
	if err != nil {
		b.Fatal(err)
	}
	cid := runningContainer(b, d, im.Name, "matcpu")
	writeChanges(b, filepath.Join(upperDir(b, ctx, d, cid), "bench"), mib<<20)
	syscall.Sync()
	run, refPath := "matcpu-run", filepath.Join(dir, "ref.json")
	bins := map[string]string{"": cli(b)}
	if p := os.Getenv("SR_BENCH_PREV_CLI"); p != "" {
		bins["-prev"] = p
	}
	exec1 := func(bin string, args ...string) time.Duration {
		b.Helper()
		args = append([]string{"--address", d.Address, "--namespace", d.Namespace}, args...)
		cmd := exec.Command(bin, args...)
		cmd.Env = cliEnv(args)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s %s: %v: %s", bin, strings.Join(args, " "), err, out.String())
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	exec1(cli(b), "suspend", "--container", cid, "--config", cfg, "--key", key, "--run", run, "--out", refPath)
	pid := daemonPID(b, d)
	resumeArgs := []string{"resume", "--ref", refPath, "--config", cfg, "--trust", pub, "--container", "matcpu-g"}
	if os.Getenv("SR_BENCH_START") == "1" {
		resumeArgs = append(resumeArgs, "--start")
	}
	names := []string{""}
	if bins["-prev"] != "" {
		names = append(names, "-prev")
	}
	wall, cliCPU, daemonCPU := map[string][]time.Duration{}, map[string][]time.Duration{}, map[string][]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for i := range runs {
			for k := range names {
				n := names[(i+k)%len(names)]
				resumeAgain(b, d, "matcpu-g", run, refPath)
				syscall.Sync()
				d0 := cpuTime(b, pid, true)
				start := time.Now()
				c := exec1(bins[n], resumeArgs...)
				wall[n] = append(wall[n], time.Since(start))
				daemonCPU[n] = append(daemonCPU[n], cpuTime(b, pid, true)-d0)
				cliCPU[n] = append(cliCPU[n], c)
			}
		}
	}
	b.StopTimer()
	for _, n := range names {
		b.ReportMetric(float64(median(wall[n]).Milliseconds()), "wall"+n+"-ms")
		b.ReportMetric(float64(median(cliCPU[n]).Milliseconds()), "cli-cpu"+n+"-ms")
		b.ReportMetric(float64(median(daemonCPU[n]).Milliseconds()), "daemon-cpu"+n+"-ms")
		b.Logf("%s: wall %v cli CPU %v daemon CPU %v", "ours"+n, wall[n], cliCPU[n], daemonCPU[n])
	}
}
