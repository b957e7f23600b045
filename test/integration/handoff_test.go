package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/leases"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// These tests hold "exactly once across hosts" (docs/design.md, issue 27)
// against real daemons, each with its own bolt ledger: a handoff A → B → A,
// a third host refused, retried exports and imports, a copy refused without
// --copy, recall, a purged run not replayed, a reused run id not accepting
// the purged run's generations, a discarded run answering 9, and kills
// between a handoff's steps finished by a rerun.

// checkVerdict runs `resume --check` of refPath on r's daemon with extra
// flags and returns the exit code and the verdict (whatever it says).
func checkVerdict(t testing.TB, r *genRig, refPath string, extra ...string) (int, *resume.Verdict) {
	t.Helper()
	args := append([]string{"--output", "json", "resume", "--check", "--ref", refPath, "--config", r.env.cfg, "--trust", r.env.pub}, extra...)
	stdout, code := runCLI(t, r.d, args...)
	var v resume.Verdict
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("resume --check: exit %d, not a verdict: %v\n%s", code, err, stdout)
	}
	if code != v.ExitCode {
		t.Errorf("resume --check: exit %d, verdict says %d", code, v.ExitCode)
	}
	return code, &v
}

// recordOf returns d's ledger record of run, or nil when there is none.
func recordOf(t testing.TB, d *harness.Daemon, run string) *ledger.Record {
	t.Helper()
	l := daemonLedger(t, d, "")
	defer l.Close()
	rec, err := l.Get(d.Context(t), run)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return &rec
}

// cliJSONError decodes {"error": {"class", "reason", "message"}}.
func cliJSONError(t testing.TB, stdout []byte) (class, reason, message string) {
	t.Helper()
	var e struct {
		Error struct {
			Class   string `json:"class"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(stdout, &e); err != nil {
		t.Fatalf("not a JSON error: %v\n%s", err, stdout)
	}
	return e.Error.Class, e.Error.Reason, e.Error.Message
}

// handoffHosts is three daemons with their own ledgers, a pinned run
// environment and the hosts' ids.
type handoffHosts struct {
	a, b, c      *genRig
	hostA, hostB string
	hostC        string
	dir          string
	bb           harness.BusyboxImage
}

func newHandoffHosts(t *testing.T, names ...string) *handoffHosts {
	t.Helper()
	da, db := harness.Start(t, names[0]), harness.Start(t, names[1])
	bb := harness.ImportBusybox(t, da, "busybox:1")
	env := newSuspendEnv(t, "busybox@"+bb.Index.String())
	h := &handoffHosts{a: &genRig{d: da, im: bb, env: env}, b: &genRig{d: db, env: env}, bb: bb, dir: t.TempDir()}
	h.hostA, h.hostB = hostID(t, da), hostID(t, db)
	if len(names) > 2 {
		dc := harness.Start(t, names[2])
		h.c = &genRig{d: dc, env: env}
		h.hostC = hostID(t, dc)
	}
	return h
}

// suspendOnA suspends a new runtime container on A as generation 1 of run.
func (h *handoffHosts) suspendOnA(t *testing.T, run string) (string, *snapshot.Ref) {
	t.Helper()
	holder := scriptContainer(t, h.a.d, h.bb.Name, run+"-h", idle)
	out := filepath.Join(h.dir, run+".g1.json")
	h.a.suspend(t, holder, run, out)
	file, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := snapshot.OpenRef(file, h.a.env.trust)
	if err != nil {
		t.Fatal(err)
	}
	return out, ref
}

// TestHandoffAcrossHosts: generation 1 is handed off A → B (the export
// retried: the same bytes), imported on B (retried: no change) and resumed
// there without --copy; a third host C refuses the archive (9, nothing
// stored) and A refuses the handed-off generation (9, handed-off).
// Generation 2, suspended on B, is handed back B → A, where it resumes; A
// still refuses generation 1 (a newer generation). A plain archive (no
// handoff) on C is a copy: 9 not-handed-off without --copy, accepted with
// it (copy: true).
func TestHandoffAcrossHosts(t *testing.T) {
	h := newHandoffHosts(t, "hoa", "hob", "hoc")
	const run = "handoff-1"
	g1, ref1 := h.suspendOnA(t, run)

	// A → B, retried.
	arch := filepath.Join(h.dir, "g1.tar")
	mustCLI(t, h.a.d, "", nil, "export", "--ref", g1, "--out", arch, "--with-base", "--handoff", h.hostB, "--key", h.a.env.key)
	first, err := os.ReadFile(arch)
	if err != nil {
		t.Fatal(err)
	}
	mustCLI(t, h.a.d, "", nil, "export", "--ref", g1, "--out", arch, "--with-base", "--handoff", h.hostB, "--key", h.a.env.key)
	if again, _ := os.ReadFile(arch); !bytes.Equal(first, again) {
		t.Error("a retried export --handoff wrote other bytes")
	}
	if rec := recordOf(t, h.a.d, run); rec == nil || rec.State != ledger.StateHandedOff || rec.HandedOff == nil || rec.HandedOff.To != h.hostB {
		t.Fatalf("A's record after the handoff: %v", rec)
	}
	// A second handoff of the same generation to another host: 8.
	if code, stdout, _ := srcli(t, h.a.d, "", "export", "--ref", g1, "--out", filepath.Join(h.dir, "x.tar"), "--handoff", h.hostC, "--key", h.a.env.key); code != 8 {
		t.Errorf("handoff of a handed-off generation to a third host: exit %d %s", code, stdout)
	}
	// A refuses the generation it handed off.
	if code, v := checkVerdict(t, h.a, g1); code != 9 || v.Reason != ledger.ReasonHandedOff {
		t.Errorf("resume --check on A after the handoff: exit %d reason %q %s", code, v.Reason, failDetail(v))
	}

	// A third host: 9, nothing stored.
	refC := filepath.Join(h.dir, "c.g1.json")
	code, stdout, _ := srcli(t, h.c.d, "", "import", arch, "--trust", h.a.env.pub, "--out", refC)
	if class, reason, msg := cliJSONError(t, stdout); code != 9 || class != "superseded" || reason != ledger.ReasonHandedOff || !strings.Contains(msg, h.hostB) {
		t.Errorf("import on a third host: exit %d %s %s %s", code, class, reason, msg)
	}
	if _, err := os.Stat(refC); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("import on a third host wrote %s (%v)", refC, err)
	}
	if rec := recordOf(t, h.c.d, run); rec != nil {
		t.Errorf("third host's record: %v", rec)
	}
	if held, _, exists := leaseContent(t, h.c.d, h.c.d.Namespace, snapshot.RunLease(run)); exists || len(held) > 0 {
		t.Errorf("third host's run lease holds %d blobs", len(held))
	}

	// B imports (retried) and resumes without --copy.
	refB := filepath.Join(h.dir, "b.g1.json")
	mustCLI(t, h.b.d, "", nil, "import", arch, "--trust", h.a.env.pub, "--out", refB)
	mustCLI(t, h.b.d, "", nil, "import", arch, "--trust", h.a.env.pub, "--out", refB)
	if rec := recordOf(t, h.b.d, run); rec == nil || rec.State != ledger.StateSuspended || rec.Received == nil || rec.Received.From != h.hostA || rec.RunUID != ref1.RunUID {
		t.Fatalf("B's record after the import: %v", rec)
	}
	incB := h.b.d.ID("b-g1")
	if v := h.b.resume(t, refB, incB); v.Copy {
		t.Error("B's resume of a handed-over generation says copy")
	}
	startWaiting(t, h.b.d, incB)

	// Generation 2 on B, handed back to A.
	g2 := filepath.Join(h.dir, "b.g2.json")
	h.b.suspend(t, incB, "", g2)
	arch2 := filepath.Join(h.dir, "g2.tar")
	mustCLI(t, h.b.d, "", nil, "export", "--ref", g2, "--out", arch2, "--handoff", h.hostA, "--key", h.a.env.key)
	refA2 := filepath.Join(h.dir, "a.g2.json")
	mustCLI(t, h.a.d, "", nil, "import", arch2, "--trust", h.a.env.pub, "--out", refA2)
	if code, v := checkVerdict(t, h.a, g1); code != 9 || v.Reason != ledger.ReasonNewerGeneration {
		t.Errorf("resume --check of generation 1 on A after generation 2 came back: exit %d reason %q %s", code, v.Reason, failDetail(v))
	}
	if code, v := checkVerdict(t, h.b, g2); code != 9 || v.Reason != ledger.ReasonHandedOff {
		t.Errorf("resume --check of generation 2 on B after handing it back: exit %d reason %q %s", code, v.Reason, failDetail(v))
	}
	incA := h.a.d.ID("a-g2")
	h.a.resume(t, refA2, incA)

	// A copy (no handoff) on C: refused without --copy, accepted with it.
	plain := filepath.Join(h.dir, "plain.tar")
	mustCLI(t, h.a.d, "", nil, "export", "--ref", refA2, "--out", plain, "--with-base")
	refC2 := filepath.Join(h.dir, "c.g2.json")
	mustCLI(t, h.c.d, "", nil, "import", plain, "--trust", h.a.env.pub, "--out", refC2)
	if code, v := checkVerdict(t, h.c, refC2); code != 9 || v.Reason != ledger.ReasonNotHandedOff {
		t.Errorf("resume --check of a copy without --copy: exit %d reason %q %s", code, v.Reason, failDetail(v))
	}
	if code, v := checkVerdict(t, h.c, refC2, "--copy"); code != 0 || !v.Copy {
		t.Errorf("resume --check --copy of a copy: exit %d copy %t %s", code, v.Copy, failDetail(v))
	}
}

// TestRecall: a handoff B never imported is undone on A with recall
// --force (64 without it); the output says both hosts may resume it; A
// resumes the generation again; recalling a suspended run is 8.
func TestRecall(t *testing.T) {
	h := newHandoffHosts(t, "rca", "rcb")
	const run = "recall-1"
	g1, _ := h.suspendOnA(t, run)
	mustCLI(t, h.a.d, "", nil, "export", "--ref", g1, "--out", filepath.Join(h.dir, "g1.tar"), "--handoff", h.hostB, "--key", h.a.env.key)
	before := recordOf(t, h.a.d, run)
	if code, _, stderr := srcli(t, h.a.d, "", "recall", "--run", run); code != 64 {
		t.Errorf("recall without --force: exit %d %s", code, stderr)
	}
	code, stdout, stderr := srcliEnv(t, h.a.d, "", nil, "recall", "--run", run, "--force")
	if code != 0 || !strings.Contains(string(stdout), "both hosts can now resume") || !strings.Contains(string(stdout), h.hostB) {
		t.Fatalf("recall --force: exit %d %s %s", code, stdout, stderr)
	}
	after := recordOf(t, h.a.d, run)
	if after.State != ledger.StateSuspended || after.Fence != before.Fence+1 || after.HandedOff != nil {
		t.Errorf("record after recall: %v (before %v)", after, before)
	}
	if code, v := checkVerdict(t, h.a, g1); code != 0 {
		t.Errorf("resume --check after recall: exit %d %s", code, failDetail(v))
	}
	if code, _, _ := srcli(t, h.a.d, "", "recall", "--run", run, "--force"); code != 8 {
		t.Errorf("recall of a suspended run: exit %d, want 8", code)
	}
}

// TestPurgedRunNotReplayed: after discard --purge, an old generation of the
// run is 9 (purged) though its content is back (imported from an archive);
// once the run id is reused by a new run (a new run UID), the purged run's
// generations 1 and 2 are 9 (another run), not claimed over the new run's
// generation 1 (the finding: exit 0, the container held the old run's
// files). A discarded run whose content this host deleted is 9
// (discarded), not 7.
func TestPurgedRunNotReplayed(t *testing.T) {
	d := harness.Start(t, "purge")
	bb := harness.ImportBusybox(t, d, "busybox:1")
	r := &genRig{d: d, im: bb, env: newSuspendEnv(t, "busybox@"+bb.Index.String())}
	dir := t.TempDir()
	const run = "reused-1"
	holder := scriptContainer(t, d, bb.Name, "p1", idle)
	g1 := filepath.Join(dir, "old.g1.json")
	r.suspend(t, holder, run, g1)
	inc := d.ID("p2")
	r.resume(t, g1, inc)
	startWaiting(t, d, inc)
	g2 := filepath.Join(dir, "old.g2.json")
	r.suspend(t, inc, "", g2)
	arch1, arch2 := filepath.Join(dir, "old.g1.tar"), filepath.Join(dir, "old.g2.tar")
	mustCLI(t, d, "", nil, "export", "--ref", g1, "--out", arch1)
	mustCLI(t, d, "", nil, "export", "--ref", g2, "--out", arch2)

	// Discarded (its content deleted here): 9, not 7.
	mustCLI(t, d, "", nil, "discard", "--run", run)
	if code, v := checkVerdict(t, r, g2); code != 9 || v.Reason != ledger.ReasonDiscarded {
		t.Errorf("resume --check of a discarded run: exit %d reason %q %s", code, v.Reason, failDetail(v))
	}

	// Purged, the content back: 9.
	mustCLI(t, d, "", nil, "discard", "--run", run, "--purge")
	mustCLI(t, d, "", nil, "import", arch1, "--trust", r.env.pub)
	mustCLI(t, d, "", nil, "import", arch2, "--trust", r.env.pub)
	for _, g := range []string{g1, g2} {
		if code, v := checkVerdict(t, r, g, "--copy"); code != 9 || v.Reason != ledger.ReasonPurged {
			t.Errorf("resume --check --copy of %s after the purge: exit %d reason %q %s", filepath.Base(g), code, v.Reason, failDetail(v))
		}
	}

	// The run id reused: a new generation 1, another run UID. (The imports
	// made a run lease naming no container, which a new suspend refuses:
	// it goes first, the old archives are imported again after it.)
	ctx := d.Context(t)
	if err := d.Client.LeasesService().Delete(ctx, leases.Lease{ID: snapshot.RunLease(run)}); err != nil {
		t.Fatal(err)
	}
	fresh := scriptContainer(t, d, bb.Name, "n1", idle)
	n1 := filepath.Join(dir, "new.g1.json")
	o, nref := r.suspend(t, fresh, run, n1)
	if o.Generation != 1 {
		t.Fatalf("new run: generation %d", o.Generation)
	}
	old1, _ := snapshot.OpenRef(mustRead(t, g1), r.env.trust)
	if old1.RunUID == nref.RunUID {
		t.Fatalf("the reused run id has the purged run's UID %s", nref.RunUID)
	}
	mustCLI(t, d, "", nil, "import", arch1, "--trust", r.env.pub)
	mustCLI(t, d, "", nil, "import", arch2, "--trust", r.env.pub)
	for _, g := range []string{g1, g2} {
		code, v := checkVerdict(t, r, g, "--copy")
		if code != 9 || v.Reason != ledger.ReasonAnotherRun {
			t.Errorf("resume --check --copy of the purged run's %s over the new run: exit %d reason %q %s", filepath.Base(g), code, v.Reason, failDetail(v))
		}
	}
	if code, v := checkVerdict(t, r, n1); code != 0 {
		t.Errorf("the new run's generation 1: exit %d %s", code, failDetail(v))
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHandoffKills: export --handoff SIGKILLed after HandedOff and before
// the archive is written, and import SIGKILLed after Received and before
// the run lease holds the content (and after --out, before Received), are
// each finished by a rerun: the same archive, then B's record suspended
// with the content held and a resume accepted without --copy.
func TestHandoffKills(t *testing.T) {
	h := newHandoffHosts(t, "hka", "hkb")
	const run = "handoff-kill-1"
	g1, _ := h.suspendOnA(t, run)
	arch := filepath.Join(h.dir, "g1.tar")
	exportArgs := []string{"--address", h.a.d.Address, "--namespace", h.a.d.Namespace, "--output", "json",
		"export", "--ref", g1, "--out", arch, "--with-base", "--handoff", h.hostB, "--key", h.a.env.key}

	p := startProc(t, pauseEnv("export-handedoff"), exportArgs...)
	p.waitPause(t, "export-handedoff")
	p.signal(t, syscall.SIGKILL)
	p.wait(t)
	if rec := recordOf(t, h.a.d, run); rec == nil || rec.State != ledger.StateHandedOff {
		t.Fatalf("A's record after a kill after HandedOff: %v", rec)
	}
	if _, err := os.Stat(arch); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an archive exists after a kill before it was written (%v)", err)
	}
	mustCLI(t, h.a.d, "", nil, exportArgs[6:]...) // the rerun finishes it

	refB := filepath.Join(h.dir, "b.g1.json")
	importArgs := []string{"--address", h.b.d.Address, "--namespace", h.b.d.Namespace, "--output", "json",
		"import", arch, "--trust", h.a.env.pub, "--out", refB}
	for _, step := range []string{"import-out", "import-received"} {
		p := startProc(t, pauseEnv(step), importArgs...)
		p.waitPause(t, step)
		p.signal(t, syscall.SIGKILL)
		p.wait(t)
		if _, err := os.Stat(refB); err != nil {
			t.Errorf("killed at %s: --out %s is not written (%v)", step, refB, err)
		}
		rec := recordOf(t, h.b.d, run)
		if received := rec != nil && rec.State == ledger.StateSuspended && rec.Received != nil; received != (step == "import-received") {
			t.Errorf("killed at %s: B's record %v", step, rec)
		}
	}
	mustCLI(t, h.b.d, "", nil, importArgs[6:]...) // the rerun finishes it
	if held, _, exists := leaseContent(t, h.b.d, h.b.d.Namespace, snapshot.RunLease(run)); !exists || len(held) == 0 {
		t.Errorf("B's run lease after the rerun holds %d blobs (exists %t)", len(held), exists)
	}
	if code, v := checkVerdict(t, h.b, refB); code != 0 || v.Copy {
		t.Errorf("resume --check on B after the rerun: exit %d copy %t %s", code, v.Copy, failDetail(v))
	}
}

// TestForeignContainerUnderGoneHolder: a resuming record whose resumer is
// gone names container X; X now holds another run's stopped container
// carrying the record's fence label (it is judged gone). The claim that
// would replace the holder is 8 naming X, and X is left alone (the
// finding: a claim replacing a gone resumer deleted whatever container had
// that id). --check says the same and writes nothing.
func TestForeignContainerUnderGoneHolder(t *testing.T) {
	d := harness.Start(t, "foreign")
	bb := harness.ImportBusybox(t, d, "busybox:1")
	r := &genRig{d: d, im: bb, env: newSuspendEnv(t, "busybox:1")}
	dir := t.TempDir()
	const run = "foreign-1"
	holder := scriptContainer(t, d, bb.Name, "f1", idle)
	g1 := filepath.Join(dir, "g1.json")
	r.suspend(t, holder, run, g1)
	file := mustRead(t, g1)
	ref, err := snapshot.OpenRef(file, r.env.trust)
	if err != nil {
		t.Fatal(err)
	}

	// The resuming record: a resumer that is gone (another boot), container X.
	x := d.ID("x")
	l := daemonLedger(t, d, "")
	c, err := l.Claim(d.Context(t), ledger.ClaimRequest{Run: run, Generation: 1, Ref: resume.RefDigest(file), RunUID: ref.RunUID,
		Holder: ledger.Holder{Container: ledger.Container{Host: hostID(t, d), Namespace: d.Namespace, ID: x}, PID: 1 << 22, Start: "0", Boot: "another-boot"}})
	if err != nil {
		t.Fatal(err)
	}
	fence := c.Fence()
	l.Close()

	// Another run's container under X, stopped, with the record's fence label.
	scriptContainer(t, d, bb.Name, "x", "echo READY")
	ctx := d.Context(t)
	xc, err := d.Client.LoadContainer(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := xc.SetLabels(ctx, map[string]string{snapshot.LabelRun: "other-run", snapshot.LabelFence: strconv.FormatUint(fence, 10)}); err != nil {
		t.Fatal(err)
	}
	rt := d.Connect(t, "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := rt.ContainerState(ctx, x)
		if err != nil {
			t.Fatal(err)
		}
		if st != nil && !st.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still runs", x)
		}
		time.Sleep(50 * time.Millisecond)
	}

	before := recordOf(t, d, run)
	for _, check := range []bool{true, false} {
		args := []string{"--output", "json", "resume", "--ref", g1, "--config", r.env.cfg, "--trust", r.env.pub}
		if check {
			args = append(args, "--check")
		}
		stdout, code := runCLI(t, d, args...)
		var v resume.Verdict
		if err := json.Unmarshal([]byte(stdout), &v); err != nil {
			t.Fatalf("not a verdict: %v\n%s", err, stdout)
		}
		if code != 8 || !strings.Contains(failDetail(&v), x) || !strings.Contains(failDetail(&v), "left alone") {
			t.Errorf("resume (check %t) replacing a gone holder whose id holds another run's container: exit %d %s", check, code, failDetail(&v))
		}
		if r.gone(t, x) {
			t.Fatalf("container %s of another run was deleted", x)
		}
		if after := recordOf(t, d, run); after.State != before.State || after.Fence != before.Fence {
			t.Errorf("record changed: %v → %v", before, after)
		}
	}
}

// TestHandoffByRegistry: push --handoff to B through a registry; a pull on
// a third host is 9 and writes no --out; B's pull, SIGKILLed after
// Received and rerun, runs Received and B resumes without --copy; A
// refuses the generation.
func TestHandoffByRegistry(t *testing.T) {
	h := newHandoffHosts(t, "hra", "hrb", "hrc")
	reg := harness.StartRegistry(t)
	const run = "handoff-reg-1"
	g1, _ := h.suspendOnA(t, run)
	target := reg.Host + "/runs/handoff:g1"
	mustCLI(t, h.a.d, "", nil, "push", "--plain-http", "--ref", g1, "--handoff", h.hostB, "--key", h.a.env.key, target)
	if code, v := checkVerdict(t, h.a, g1); code != 9 || v.Reason != ledger.ReasonHandedOff {
		t.Errorf("resume --check on A after push --handoff: exit %d reason %q", code, v.Reason)
	}
	refC := filepath.Join(h.dir, "c.json")
	code, stdout, _ := srcli(t, h.c.d, "", "pull", "--plain-http", "--trust", h.a.env.pub, target, "--out", refC)
	if class, reason, _ := cliJSONError(t, stdout); code != 9 || class != "superseded" || reason != ledger.ReasonHandedOff {
		t.Errorf("pull on a third host: exit %d %s %s", code, class, reason)
	}
	if _, err := os.Stat(refC); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pull on a third host wrote --out (%v)", err)
	}
	refB := filepath.Join(h.dir, "b.json")
	// Killed after Received, before the run lease: a rerun finishes it.
	p := startProc(t, pauseEnv("pull-received"), "--address", h.b.d.Address, "--namespace", h.b.d.Namespace, "--output", "json",
		"pull", "--plain-http", "--trust", h.a.env.pub, target, "--out", refB)
	p.waitPause(t, "pull-received")
	p.signal(t, syscall.SIGKILL)
	p.wait(t)
	if _, err := os.Stat(refB); err != nil {
		t.Errorf("killed after Received: --out is not written (%v)", err)
	}
	mustCLI(t, h.b.d, "", nil, "pull", "--plain-http", "--trust", h.a.env.pub, target, "--out", refB)
	if rec := recordOf(t, h.b.d, run); rec == nil || rec.State != ledger.StateSuspended || rec.Received == nil || rec.Received.From != h.hostA {
		t.Fatalf("B's record after the pull: %v", rec)
	}
	if code, v := checkVerdict(t, h.b, refB); code != 0 || v.Copy {
		t.Errorf("resume --check on B: exit %d copy %t %s", code, v.Copy, failDetail(v))
	}
}
