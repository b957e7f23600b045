package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/runtime/containerd"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// The fault suite of issue 10 item 2, beside the suspend SIGKILL trials
// (suspend_fault_test.go): SIGKILL of `import` at its fault points and at
// random moments, the daemon SIGKILLed between suspend and resume, the disk
// filling up during suspend, and a ref of a newer schema version.

// importSteps are the fault points of migrate.Import and
// ImportFile, in order (import.go documents what each leaves).
var importSteps = []string{"import-scan", "import-templease", "import-ingest", "import-write", "import-hold", "import-release"}

// The states a killed import can leave, read back from the daemon and the
// file system; each intermediate one of an import into a namespace without
// the run must be seen at least twice (impBothHold and impRunOnly are
// where the run was imported before). --out is written before the run
// lease takes the content (docs/design.md "Hardening").
const (
	impNothing   = "nothing (no temporary lease, run not held, no --out)"
	impTempEmpty = "temporary lease, empty"
	impTempHolds = "temporary lease holding the blobs, run not held"
	impBothHold  = "temporary lease and run lease both holding the blobs, no --out"
	impRunOnly   = "run lease holds the blobs, no temporary lease, no --out"
	impOutTemp   = "--out written, temporary lease holding the blobs, run not held"
	impOutBoth   = "--out written, temporary lease and run lease both holding the blobs"
	impComplete  = "complete --out file, no temporary lease"
)

// labelTemporary marks the temporary leases of import and pull
// (runtime/containerd tempLease).
const labelTemporary = snapshot.LabelPrefix + "temporary"

// labelGCExpire is containerd's lease expiry label (RFC 3339).
const labelGCExpire = "containerd.io/gc.expire"

// cliProc is a sandbox-resume process started for a fault trial.
type cliProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	lines  chan string // stderr lines, closed at EOF
}

// startCLI starts the CLI with args and the extra environment.
func startCLI(t testing.TB, env []string, args ...string) *cliProc {
	t.Helper()
	cmd := exec.Command(cli(t), args...)
	cmd.Env = cliEnv(args, env...)
	cmd.Stdout = io.Discard
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &cliProc{cmd: cmd, stderr: &syncBuffer{}, lines: make(chan string, 64)}
	go func() {
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
	return p
}

// killCLIAt runs the CLI with the fault point step set and SIGKILLs it as
// soon as it reports reaching the step, and returns its pid; it fails the
// test when the process never gets there or was not ended by the signal.
func killCLIAt(t testing.TB, step string, args ...string) int {
	t.Helper()
	p := startCLI(t, []string{faultpoint.Env + "=" + step}, args...)
	want := "fault point " + step + " reached"
	reached := false
	timeout := time.After(30 * time.Second)
wait:
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				break wait
			}
			if strings.Contains(l, want) {
				reached = true
				break wait
			}
		case <-timeout:
			break wait
		}
	}
	p.cmd.Process.Kill()
	werr := p.cmd.Wait()
	if !reached {
		t.Fatalf("sandbox-resume %s never reached fault point %s (%v); stderr:\n%s", strings.Join(args, " "), step, werr, p.stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || !ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("sandbox-resume at fault point %s was not killed by the signal: %v", step, werr)
	}
	return p.cmd.Process.Pid
}

// killCLIAfter runs the CLI and SIGKILLs it after delay; it returns the
// pid and whether the signal arrived before the process ended (a process
// that ended first must have succeeded).
func killCLIAfter(t testing.TB, delay time.Duration, args ...string) (pid int, killed bool) {
	t.Helper()
	p := startCLI(t, nil, args...)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sandbox-resume ended before the kill with %v: %s", err, p.stderr.String())
		}
		return p.cmd.Process.Pid, false
	case <-time.After(delay):
		p.cmd.Process.Kill()
		<-done
		return p.cmd.Process.Pid, true
	}
}

// suspendBig is suspendReal with n random (incompressible) bytes in the
// diff, so that the import has work to be interrupted in.
func suspendBig(t testing.TB, d *harness.Daemon, config string, n int) *suspended {
	t.Helper()
	s := suspend(t, d, config)
	big := make([]byte, n)
	rand.Read(big)
	blob, diff := diffLayer(t, map[string]string{"data.txt": string(big), "var/sr/n.txt": "nested\n"})
	s.diff, s.ref.Layers[0] = blob, diff
	writeDiff(t, d, d.Namespace, s.ref.Run, blob)
	s.sign(t)
	return s
}

// nsCtx is a context in namespace ns of d.
func nsCtx(t testing.TB, ns string) context.Context {
	return namespaces.WithNamespace(ctx(t), ns)
}

// blobSet lists the digests in the content store of namespace ns.
func blobSet(t testing.TB, d *harness.Daemon, ns string) map[digest.Digest]bool {
	t.Helper()
	out := map[digest.Digest]bool{}
	if err := d.Client.ContentStore().Walk(nsCtx(t, ns), func(i content.Info) error { out[i.Digest] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// leaseContent lists the content resources lease holds in ns (nil when the
// lease does not exist) and the lease's labels.
func leaseContent(t testing.TB, d *harness.Daemon, ns, id string) (held map[digest.Digest]bool, labels map[string]string, exists bool) {
	t.Helper()
	c := nsCtx(t, ns)
	ls, err := d.Client.LeasesService().List(c, "id=="+id)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) == 0 {
		return nil, nil, false
	}
	rs, err := d.Client.LeasesService().ListResources(c, ls[0])
	if err != nil {
		t.Fatal(err)
	}
	held = map[digest.Digest]bool{}
	for _, r := range rs {
		if r.Type == "content" {
			held[digest.Digest(r.ID)] = true
		}
	}
	return held, ls[0].Labels, true
}

// tempLeases lists the temporary leases in ns.
func tempLeases(t testing.TB, d *harness.Daemon, ns string) []leases.Lease {
	t.Helper()
	ls, err := d.Client.LeasesService().List(nsCtx(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	var out []leases.Lease
	for _, l := range ls {
		if _, ok := l.Labels[labelTemporary]; ok {
			out = append(out, l)
		}
	}
	return out
}

// collectGarbage makes the daemon run a garbage collection now: deleting a
// lease synchronously runs one (for every namespace).
func collectGarbage(t testing.TB, d *harness.Daemon, ns string) {
	t.Helper()
	c := nsCtx(t, ns)
	l, err := d.Client.LeasesService().Create(c, leases.WithRandomID())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Client.LeasesService().Delete(c, l, leases.SynchronousDelete); err != nil {
		t.Fatal(err)
	}
}

func holdsAll(held map[digest.Digest]bool, want []digest.Digest) bool {
	for _, d := range want {
		if !held[d] {
			return false
		}
	}
	return true
}

// impState is what a killed import left in its namespace and beside --out.
type impState struct {
	temp      int  // temporary leases
	tempHeld  int  // content resources they hold
	tempAged  bool // every temporary lease expires within TempLeaseExpiry
	runHeld   bool // the run lease holds every blob of the artifact
	out       []byte
	tempFiles []string
}

func (s impState) String() string {
	return fmt.Sprintf("temp=%d tempHeld=%d tempExpires=%t runHeld=%t out=%t tempFiles=%v",
		s.temp, s.tempHeld, s.tempAged, s.runHeld, s.out != nil, s.tempFiles)
}

func (s impState) name() string {
	switch {
	case s.out != nil && s.temp > 0 && !s.runHeld:
		return impOutTemp
	case s.out != nil && s.temp > 0:
		return impOutBoth
	case s.out != nil:
		return impComplete
	case s.temp > 0 && s.tempHeld == 0:
		return impTempEmpty
	case s.temp > 0 && !s.runHeld:
		return impTempHolds
	case s.temp > 0:
		return impBothHold
	case s.runHeld:
		return impRunOnly
	}
	return impNothing
}

// impRig is the daemon, the archive and what a complete import stores.
type impRig struct {
	d       *harness.Daemon
	s       *suspended
	archive string
	refFile []byte          // the exact bytes --out must hold
	held    []digest.Digest // what the run lease must hold after an import
	lease   string          // the run lease
}

func (r *impRig) args(ns, out string) []string {
	return []string{"--address", r.d.Address, "--namespace", ns, "--output", "json", "import", r.archive, "--trust", r.s.pub, "--out", out}
}

func (r *impRig) observe(t testing.TB, ns, out string) impState {
	t.Helper()
	var s impState
	s.tempAged = true
	for _, l := range tempLeases(t, r.d, ns) {
		s.temp++
		held, _, _ := leaseContent(t, r.d, ns, l.ID)
		s.tempHeld += len(held)
		exp, err := time.Parse(time.RFC3339Nano, l.Labels[labelGCExpire])
		if err != nil || exp.After(time.Now().Add(containerd.TempLeaseExpiry)) {
			s.tempAged = false
		}
	}
	held, _, _ := leaseContent(t, r.d, ns, r.lease)
	s.runHeld = holdsAll(held, r.held)
	if b, err := os.ReadFile(out); err == nil {
		s.out = b
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	s.tempFiles, _ = filepath.Glob(filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*"))
	return s
}

// wantImportStep is the state each import fault point must leave; again
// is a namespace where the run was imported before the trial.
func wantImportStep(t testing.TB, step string, again bool, s impState) {
	t.Helper()
	var ok bool
	switch step {
	case "import-scan":
		ok = s.temp == 0 && s.runHeld == again && s.out == nil
	case "import-templease":
		ok = s.temp == 1 && s.tempHeld == 0 && s.runHeld == again && s.out == nil
	case "import-ingest":
		ok = s.temp == 1 && s.tempHeld > 0 && s.runHeld == again && s.out == nil
	case "import-write":
		ok = s.temp == 1 && s.tempHeld > 0 && s.runHeld == again && s.out != nil
	case "import-hold":
		ok = s.temp == 1 && s.tempHeld > 0 && s.runHeld && s.out != nil
	case "import-release":
		ok = s.temp == 0 && s.runHeld && s.out != nil
	default:
		t.Fatalf("unknown import step %q", step)
	}
	if !ok {
		t.Errorf("killed at fault point %s (run imported before: %t), found %v", step, again, s)
	}
}

// TestImportFaultTrials SIGKILLs `import` at each of its fault points
// (three trials each, two in a namespace where nothing of the run is, one
// where the run was imported before) and at random moments (eight trials;
// the seed is logged). After each kill: --out is absent or complete, every
// blob the namespace held before is still there after a garbage
// collection, a leftover temporary lease expires within TempLeaseExpiry,
// and a rerun succeeds; deleting the leftover temporary leases (their
// expiry) then loses nothing of the run, and resume --check accepts it.
func TestImportFaultTrials(t *testing.T) {
	d := harness.Start(t, "impfault")
	bb := harness.ImportBusybox(t, d, "busybox:1")
	pinned := pinnedConfig(bb)
	s := suspendBig(t, d, pinned, 4<<20)
	dir := t.TempDir()
	r := &impRig{d: d, s: s, archive: filepath.Join(dir, "run.tar"), lease: snapshot.RunLease(s.ref.Run)}
	var exp migrate.ExportResult
	mustCLI(t, d, "", &exp, "export", "--ref", s.refPath, "--out", r.archive, "--with-base")
	var err error
	if r.refFile, err = os.ReadFile(s.refPath); err != nil {
		t.Fatal(err)
	}

	// Two uninterrupted imports: what a complete one holds, and (the
	// quicker) how long the process takes, the range of the random kills.
	full := time.Duration(1<<63 - 1)
	for i := range 2 {
		ns := d.NewNamespace()
		out := filepath.Join(dir, fmt.Sprintf("full%d.ref.json", i))
		start := time.Now()
		var imp migrate.ImportResult
		mustCLI(t, d, ns, &imp, "import", r.archive, "--trust", s.pub, "--out", out)
		full = min(full, time.Since(start))
		held, _, ok := leaseContent(t, d, ns, r.lease)
		if !ok || len(held) != imp.Blobs || imp.Blobs < 4 {
			t.Fatalf("a complete import held %d blobs in lease %s (exists %t), reported %d", len(held), r.lease, ok, imp.Blobs)
		}
		r.held = r.held[:0]
		for dg := range held {
			r.held = append(r.held, dg)
		}
		if tl := tempLeases(t, d, ns); len(tl) != 0 {
			t.Fatalf("a complete import left temporary leases %v", tl)
		}
	}
	t.Logf("an uninterrupted import process takes %s (archive %d bytes)", full, exp.Size)

	// The shipped build has no fault points: the binary built as `make
	// build` does (no -tags faultpoint), told to hold at an import step,
	// neither reports it nor holds, and imports completely.
	{
		ns := d.NewNamespace()
		out := filepath.Join(dir, "plain.ref.json")
		cmd := exec.Command(plainCLI(t), "--address", d.Address, "--namespace", ns, "--output", "json", "import", r.archive, "--trust", s.pub, "--out", out)
		cmd.Env = append(os.Environ(), "SANDBOX_RESUME_HOST_ID=", faultpoint.Env+"=import-ingest")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || strings.Contains(stderr.String(), "fault point") {
			t.Fatalf("the plain binary with %s=import-ingest: %v; stderr:\n%s", faultpoint.Env, err, stderr.String())
		}
		if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, r.refFile) {
			t.Fatalf("the plain binary's import wrote %q (%v), want the ref file", got, err)
		}
	}

	seed := testenv.Seed(t, testenv.RandomSeed()) // the random kill times; logged, SANDBOX_RESUME_TEST_SEED replays them
	rng := mrand.New(mrand.NewPCG(seed, 0))
	type trial struct {
		step  string
		again bool
		delay time.Duration
	}
	var trials []trial
	for k := range 3 {
		for _, step := range importSteps {
			trials = append(trials, trial{step: step, again: k == 2})
		}
	}
	for range 8 {
		trials = append(trials, trial{delay: time.Duration(rng.Int64N(int64(full)))})
	}

	counts := map[string]int{}
	for i, tr := range trials {
		n := i + 1
		ns := d.NewNamespace()
		// What the namespace holds before: the base image, and in "again"
		// trials the run itself (imported to another file).
		d.Put(t, ns, bb.Image)
		if tr.again {
			mustCLI(t, d, ns, nil, "import", r.archive, "--trust", s.pub, "--out", filepath.Join(dir, fmt.Sprintf("t%d.before.json", n)))
		}
		before := blobSet(t, d, ns)
		out := filepath.Join(dir, fmt.Sprintf("t%d.ref.json", n))

		how := "at fault point " + tr.step
		if tr.step != "" {
			killCLIAt(t, tr.step, r.args(ns, out)...)
		} else {
			how = fmt.Sprintf("after %s", tr.delay.Round(time.Millisecond))
			if _, killed := killCLIAfter(t, tr.delay, r.args(ns, out)...); !killed {
				how += " (it had finished)"
			}
		}
		st := r.observe(t, ns, out)
		counts[st.name()]++
		t.Logf("trial %d: killed %s (run imported before: %t): %s [%v]", n, how, tr.again, st.name(), st)
		if tr.step != "" {
			wantImportStep(t, tr.step, tr.again, st)
		}

		// Never a partial --out; a leftover temporary lease expires.
		if st.out != nil && !bytes.Equal(st.out, r.refFile) {
			t.Errorf("trial %d: --out holds %d bytes that are not the ref file (%d bytes)", n, len(st.out), len(r.refFile))
		}
		if !st.tempAged {
			t.Errorf("trial %d: a temporary lease without an expiry within %s", n, containerd.TempLeaseExpiry)
		}
		// Nothing the namespace held before is lost, even after a GC.
		collectGarbage(t, d, ns)
		after := blobSet(t, d, ns)
		for dg := range before {
			if !after[dg] {
				t.Errorf("trial %d: blob %s was in the content store before the killed import and is gone", n, dg)
			}
		}
		if tr.again && !st.runHeld {
			t.Errorf("trial %d: the run lease no longer holds the run imported before", n)
		}

		// A rerun succeeds and writes the ref file.
		var imp migrate.ImportResult
		mustCLI(t, d, ns, &imp, "import", r.archive, "--trust", s.pub, "--out", out)
		if b, _ := os.ReadFile(out); !bytes.Equal(b, r.refFile) {
			t.Errorf("trial %d: the rerun's --out is not the ref file", n)
		}
		// The leftover temporary leases expire: nothing of the run goes.
		for _, l := range tempLeases(t, d, ns) {
			if err := d.Client.LeasesService().Delete(nsCtx(t, ns), l, leases.SynchronousDelete); err != nil {
				t.Fatal(err)
			}
		}
		held, _, _ := leaseContent(t, d, ns, r.lease)
		final := blobSet(t, d, ns)
		for _, dg := range r.held {
			if !held[dg] || !final[dg] {
				t.Errorf("trial %d: after the rerun and the temporary lease's expiry, %s held %t present %t", n, dg, held[dg], final[dg])
			}
		}
		for dg := range before {
			if !final[dg] {
				t.Errorf("trial %d: blob %s held before is gone after the rerun", n, dg)
			}
		}
		if st, err := d.Client.ContentStore().ListStatuses(nsCtx(t, ns)); err != nil || len(st) != 0 {
			t.Errorf("trial %d: ingests left in progress after the rerun and expiry: %v (%v)", n, st, err)
		}
		code, v := check(t, d, ns, withRef(s, out), pinned)
		wantRefused(t, code, v, 0, "", "")
	}

	var summary []string
	for name, c := range counts {
		summary = append(summary, fmt.Sprintf("%s: %d", name, c))
	}
	slices.Sort(summary)
	t.Logf("%d trials: %s", len(trials), strings.Join(summary, "; "))
	for _, name := range []string{impNothing, impTempEmpty, impTempHolds, impOutTemp, impOutBoth, impComplete} {
		if counts[name] < 2 {
			t.Errorf("state %q observed %d times, want at least 2", name, counts[name])
		}
	}
}

// checkJSON runs `resume --check` with --output json in d's namespace and
// returns the exit code and stdout (the verdict).
func checkJSON(t testing.TB, d *harness.Daemon, refPath, config, trust string) (int, []byte) {
	t.Helper()
	code, stdout, stderr := srcli(t, d, "", "resume", "--check", "--ref", refPath, "--config", config, "--trust", trust)
	var v struct {
		ExitCode int `json:"exitCode"`
	}
	if err := json.Unmarshal(stdout, &v); err != nil || v.ExitCode != code {
		t.Fatalf("resume --check: exit %d, stdout is not its verdict (%v):\n%s\nstderr: %s", code, err, stdout, stderr)
	}
	return code, stdout
}

// TestDaemonKilledBetweenSuspendAndResume suspends a real container, takes
// the resume --check verdicts of the ref against the same declaration (0),
// a drifted one (3) and another trusted key (6), SIGKILLs the daemon and
// restarts it on the same root: every verdict is the same, byte for byte,
// and the run lease, its diff and the container's labels survived.
func TestDaemonKilledBetweenSuspendAndResume(t *testing.T) {
	d := harness.Start(t, "killd")
	im := harness.ImportBusybox(t, d, "busybox:1")
	env := newSuspendEnv(t, "busybox:1")
	cid := runningContainer(t, d, im.Name, "k")
	refPath := filepath.Join(env.dir, "ref.json")
	const run = "killd-1"
	if _, code := runCLI(t, d, "suspend", "--container", cid, "--config", env.cfg, "--key", env.key, "--run", run, "--out", refPath); code != 0 {
		t.Fatalf("suspend: exit %d", code)
	}
	file, err := os.ReadFile(refPath)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := snapshot.OpenRef(file, env.trust)
	if err != nil {
		t.Fatal(err)
	}
	drifted := filepath.Join(env.dir, "drifted.json")
	if err := os.WriteFile(drifted, []byte(`{"image": "busybox:1", "name": "suspend test", "containerEnv": {"A": "1"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	other, _, err := envelope.WriteKeyPair(filepath.Join(t.TempDir(), "other"), false)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, config, trust string
		want                int
	}{
		{"same declaration", env.cfg, filepath.Join(env.dir, "signer.pub"), 0},
		{"drifted declaration", drifted, filepath.Join(env.dir, "signer.pub"), 3},
		{"another key trusted", env.cfg, other, 6},
	}
	before := make([][]byte, len(cases))
	for i, c := range cases {
		code, v := checkJSON(t, d, refPath, c.config, c.trust)
		if code != c.want {
			t.Fatalf("%s before the kill: exit %d, want %d:\n%s", c.name, code, c.want, v)
		}
		before[i] = v
	}

	d.Kill(t)
	d.Restart(t)

	for i, c := range cases {
		code, v := checkJSON(t, d, refPath, c.config, c.trust)
		if code != c.want || !bytes.Equal(v, before[i]) {
			t.Errorf("%s: after the daemon was killed and restarted, exit %d:\n%s\nbefore (exit %d):\n%s", c.name, code, v, c.want, before[i])
		}
	}
	rt := d.Connect(t, "")
	c := d.Context(t)
	for _, dg := range []digest.Digest{ref.Layers[0].Digest, digest.FromBytes(file), im.Manifest} {
		if held, err := rt.LeaseHolds(c, snapshot.RunLease(run), dg); err != nil || !held {
			t.Errorf("after the kill, run lease %s holds %s: %t (%v)", snapshot.RunLease(run), dg, held, err)
		}
	}
	ctr, err := rt.Container(c, cid)
	if err != nil || ctr.Labels[snapshot.LabelRun] != run || ctr.Task != snapshot.TaskNone {
		t.Errorf("after the kill, container %s: labels %v task %q (%v)", cid, ctr.Labels, ctr.Task, err)
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory under the
// test's temp dir and unmounts it when the test ends.
func mountTmpfs(t testing.TB, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount a %d-byte tmpfs on %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// jsonError is the CLI's --output json error document.
type jsonError struct {
	Error struct{ Class, Message string } `json:"error"`
}

// TestSuspendDiskFull suspends a container whose changes fit in the
// daemon's root (a 64 MiB tmpfs) but whose diff does not fit beside them:
// suspend fails with exit 1 naming ENOSPC and the container, writes no ref
// file, adds no blob, the run lease holds at most the base, no ingest is
// left in progress (the failed diff's is aborted), and the task runs again. With the tmpfs grown the same
// suspend (same --run) completes. Then the --out directory is a full tmpfs:
// suspend fails without a ref file or a temporary file there, and once
// space is freed the rerun completes with the same diff.
func TestSuspendDiskFull(t *testing.T) {
	const rootSize = 64 << 20
	d := harness.StartTmpfs(t, "diskfull", rootSize)
	im := harness.ImportBusybox(t, d, "busybox:1")
	env := newSuspendEnv(t, "busybox:1")
	_, free := d.RootUsage(t)
	// The changes take 60% of what is free after the image: the diff of
	// incompressible bytes (as large again) cannot fit beside them.
	big := free * 6 / 10 >> 20 << 20
	cid := scriptContainer(t, d, im.Name, "full",
		fmt.Sprintf("head -c %d /dev/urandom > /big && echo READY && exec sleep 3600", big))
	used0, free0 := d.RootUsage(t)
	if free0 >= big {
		t.Fatalf("the tmpfs has %d bytes free after writing %d: the diff would fit", free0, big)
	}
	rt := d.Connect(t, "")
	c := d.Context(t)
	blobs0 := blobSet(t, d, d.Namespace)
	base := map[digest.Digest]bool{im.Index: true, im.Manifest: true, im.Config: true}
	for _, l := range im.Image.Layers {
		base[l.Digest] = true
	}

	const run = "full-1"
	out := filepath.Join(env.dir, "ref.json")
	args := []string{"suspend", "--container", cid, "--config", env.cfg, "--key", env.key, "--run", run, "--out", out}
	code, stdout, stderr := srcli(t, d, "", args...)
	var je jsonError
	if err := json.Unmarshal(stdout, &je); err != nil {
		t.Fatalf("suspend on a full disk: exit %d, stdout is not a JSON error (%v): %s\nstderr: %s", code, err, stdout, stderr)
	}
	t.Logf("suspend with %d bytes changed and %d free: exit %d: %s", big, free0, code, je.Error.Message)
	if code != 1 || !strings.Contains(je.Error.Message, "no space left on device") || !strings.Contains(je.Error.Message, cid) {
		t.Errorf("suspend on a full disk: exit %d class %q, want 1 and a message naming ENOSPC and the container", code, je.Error.Class)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed suspend left %s (%v)", out, err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(env.dir, ".ref.json.tmp-*")); len(tmp) != 0 {
		t.Errorf("a failed suspend left temporary files %v", tmp)
	}
	// The run lease holds at most the base, and the failed diff's ingest
	// has been aborted (containerd keeps a failed ingest we named), so its
	// space is free again. Nothing is left in progress and no blob was added.
	lease := snapshot.RunLease(run)
	if ls, err := d.Client.LeasesService().List(c, "id=="+lease); err == nil && len(ls) == 1 {
		rs, err := d.Client.LeasesService().ListResources(c, ls[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Type == "content" && !base[digest.Digest(r.ID)] {
				t.Errorf("after the failed suspend, run lease holds %s, not a blob of the base", r.ID)
			}
		}
	} else if err != nil {
		t.Fatal(err)
	}
	sts, err := d.Client.ContentStore().ListStatuses(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		t.Errorf("ingest %s (%d bytes) left in progress after the failed suspend", st.Ref, st.Offset)
	}
	for dg := range blobSet(t, d, d.Namespace) {
		if !blobs0[dg] {
			t.Errorf("the failed suspend stored blob %s", dg)
		}
	}
	if ctr, err := rt.Container(c, cid); err != nil || ctr.Task != snapshot.TaskRunning {
		t.Errorf("after the failed suspend, task %q (%v), want running (resumed)", ctr.Task, err)
	}

	// Space freed: the same suspend completes.
	d.ResizeRoot(t, 4*rootSize)
	code, stdout, stderr = srcli(t, d, "", args...)
	if code != 0 {
		t.Fatalf("suspend after the root grew: exit %d: %s %s", code, stdout, stderr)
	}
	file, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := snapshot.OpenRef(file, env.trust)
	if err != nil {
		t.Fatalf("the ref after the retry does not verify: %v", err)
	}
	if ref.Layers[0].Size < big || ref.Layers[0].UncompressedSize < big {
		t.Errorf("the diff is %d bytes (%d uncompressed), the container changed %d", ref.Layers[0].Size, ref.Layers[0].UncompressedSize, big)
	}
	if held, err := rt.LeaseHolds(c, lease, ref.Layers[0].Digest); err != nil || !held {
		t.Errorf("run lease holds the diff %s: %t (%v)", ref.Layers[0].Digest, held, err)
	}
	if sts, err := d.Client.ContentStore().ListStatuses(c); err != nil || len(sts) != 0 {
		t.Errorf("ingests in progress after the completed suspend: %v (%v)", sts, err)
	}
	// What is used now: the changes and their diff, not a partial diff
	// besides.
	if used, _ := d.RootUsage(t); used > used0+ref.Layers[0].Size+4<<20 {
		t.Errorf("after the completed suspend %d bytes are used: %d before it plus a %d-byte diff", used, used0, ref.Layers[0].Size)
	}

	t.Run("ref file on a full file system", func(t *testing.T) {
		cid := runningContainer(t, d, im.Name, "fullout")
		dir := mountTmpfs(t, 4096)
		filler := filepath.Join(dir, "filler")
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = f.Write(make([]byte, 4096))
		}
		f.Close()
		const run = "fullout-1"
		out := filepath.Join(dir, "ref.json")
		args := []string{"suspend", "--container", cid, "--config", env.cfg, "--key", env.key, "--run", run, "--out", out}
		code, stdout, _ := srcli(t, d, "", args...)
		var je jsonError
		json.Unmarshal(stdout, &je)
		t.Logf("suspend with --out on a full file system: exit %d: %s", code, je.Error.Message)
		if code != 1 || !strings.Contains(je.Error.Message, "no space left on device") || !strings.Contains(je.Error.Message, out) {
			t.Errorf("exit %d %q, want 1 and a message naming ENOSPC and %s", code, je.Error.Message, out)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Errorf("the failed ref file write left %d entries in %s, want only the filler", len(ents), dir)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		if code, stdout, stderr := srcli(t, d, "", args...); code != 0 {
			t.Fatalf("suspend after freeing space: exit %d: %s %s", code, stdout, stderr)
		}
		file, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := snapshot.OpenRef(file, env.trust)
		if err != nil || ref.Run != run {
			t.Fatalf("the ref after freeing space: run %v: %v", ref, err)
		}
	})
}

// swapRef returns the entries of an archive whose artifact (manifest
// artifact) carries refFile in place of its ref: the ref blob replaced, the
// manifest's config re-pointed and index.json re-pointed at the rewritten
// manifest; everything else is untouched.
func swapRef(t testing.TB, es []entry, artifact digest.Digest, refFile []byte) []entry {
	t.Helper()
	var old digest.Digest
	es = replaceManifest(t, es, artifact, func(m *ocispec.Manifest) {
		old = m.Config.Digest
		m.Config.Digest, m.Config.Size = digest.FromBytes(refFile), int64(len(refFile))
	})
	i := find(es, blobName(old))
	if i < 0 {
		t.Fatalf("the archive has no ref blob %s", old)
	}
	es[i].data, es[i].hdr.Name = refFile, blobName(digest.FromBytes(refFile))
	return es
}

// TestNewerRefSchemaRefused signs a ref whose schema is
// "sandbox.snapshot-ref/4" with a trusted key: resume --check refuses it
// at check 3 (ref-schema) with exit 2 and a message naming the version and
// asking for an upgrade; export refuses it too; an archive carrying it is
// refused by import with exit 2 and the same message, leaving no blob, no
// lease and no --out file. The same archive rewrite with the /1 ref
// imports (the refusal is the schema's).
func TestNewerRefSchemaRefused(t *testing.T) {
	d := harness.Start(t, "newschema")
	bb := harness.ImportBusybox(t, d, "busybox:1")
	pinned := pinnedConfig(bb)
	s := suspendReal(t, d, pinned, nil)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tar")
	var exp migrate.ExportResult
	mustCLI(t, d, "", &exp, "export", "--ref", s.refPath, "--out", good, "--with-base")
	file1, err := os.ReadFile(s.refPath)
	if err != nil {
		t.Fatal(err)
	}

	// A ref of the next schema: this tool's ref with only its schema
	// string changed (the Go type cannot write a schema it does not know).
	const newer = "sandbox.snapshot-ref/4"
	canonical, err := s.ref.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	inner := bytes.Replace(canonical, []byte(`"schema":"`+snapshot.RefSchema+`"`), []byte(`"schema":"`+newer+`"`), 1)
	if bytes.Equal(inner, canonical) {
		t.Fatalf("no schema member in %s", canonical)
	}
	file2, err := envelope.Sign(envelope.MemberRef, inner, s.key)
	if err != nil {
		t.Fatal(err)
	}
	ref2 := filepath.Join(dir, "ref2.json")
	if err := os.WriteFile(ref2, file2, 0o644); err != nil {
		t.Fatal(err)
	}
	wantMessage := func(what, msg string) {
		t.Helper()
		if !strings.Contains(msg, newer) || !strings.Contains(msg, "newer than this tool reads") || !strings.Contains(msg, "upgrade") {
			t.Errorf("%s: message %q does not name %s as newer and ask for an upgrade", what, msg, newer)
		}
	}

	code, v := check(t, d, "", withRef(s, ref2), pinned)
	wantRefused(t, code, v, 2, resume.ClassBadInput, resume.CheckRefSchema)
	var msgs []string
	if f := v.Failed(); f != nil {
		msgs = append(msgs, f.Detail)
	}
	for _, r := range v.Refusals {
		msgs = append(msgs, r.Pointer+": "+r.Message)
	}
	t.Logf("resume --check: %s", strings.Join(msgs, "; "))
	wantMessage("resume --check", strings.Join(msgs, "\n"))

	code, stdout, stderr := srcli(t, d, "", "export", "--ref", ref2, "--out", filepath.Join(dir, "x.tar"))
	var je jsonError
	json.Unmarshal(stdout, &je)
	if code != 2 {
		t.Errorf("export of a %s ref: exit %d, want 2: %s %s", newer, code, stdout, stderr)
	}
	wantMessage("export", je.Error.Message)

	base := readEntries(t, good)
	for _, tc := range []struct {
		name string
		ref  []byte
		want int
	}{
		{"this schema (control)", file1, 0},
		{"the next schema", file2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := swapRef(t, slices.Clone(base), exp.Artifact.Digest, tc.ref)
			work := t.TempDir()
			p := filepath.Join(work, "run.tar")
			writeEntries(t, p, es)
			ns := d.NewNamespace()
			out := filepath.Join(work, "ref.json")
			code, stdout, stderr := srcli(t, d, ns, "import", p, "--trust", s.pub, "--out", out)
			if code != tc.want {
				t.Fatalf("import: exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.want, stdout, stderr)
			}
			if tc.want == 0 {
				if b, _ := os.ReadFile(out); !bytes.Equal(b, tc.ref) {
					t.Errorf("--out is not the ref")
				}
				return
			}
			var je jsonError
			if err := json.Unmarshal(stdout, &je); err != nil {
				t.Fatalf("stdout is not a JSON error (%v): %s", err, stdout)
			}
			t.Logf("import: %s", je.Error.Message)
			wantMessage("import", je.Error.Message)
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused import wrote %s", out)
			}
			if n := countBlobs(t, d, ns); n != 0 {
				t.Errorf("%d blobs stored by the refused import", n)
			}
			if ls, err := d.Client.LeasesService().List(nsCtx(t, ns)); err != nil || len(ls) != 0 {
				t.Errorf("leases left by the refused import: %v (%v)", ls, err)
			}
		})
	}
}
