package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	ctrd "github.com/sandbox-resume/sandbox-resume/runtime/containerd"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// The fault trials of docs/design.md "Suspend" (issue 5, item 5): the suspend
// process is SIGKILLed between its steps, what it left is read back from the
// daemon (run lease, the blobs the lease holds, task status, container
// labels) and the file system (the --out path), and a rerun with the same
// --run must complete the suspension.

// faultSteps are the fault points Suspend honours, in order
// (suspend/faultpoint.go).
var faultSteps = []string{"lease", "labelled", "pause", "diff", "refblob", "recorded", "written", "stop", "chained"}

// The intermediate states the trials must each observe at least twice
// (issue 5, item 5), and the others they count.
const (
	stateLeaseOnly  = "run lease only"           // lease, nothing under it but the base, task untouched
	stateDiffNoRef  = "diff blob, no ref blob"   // the diff is stored, the ref blob is not
	stateRefNoFile  = "ref blob, no ref file"    // the ref blob is stored, --out is absent
	stateTaskPaused = "task left paused"         // the task is paused
	stateNothing    = "nothing (no run lease)"   // killed before step 3
	stateComplete   = "complete (ref file)"      // killed after the rename (or never)
	stateLeaseEmpty = "run lease, base not held" // killed between CreateLease and HoldBase
	stateLeftovers  = "interrupted diff's ingest or view snapshot under the lease"
)

// faultState is what a killed suspend left behind.
type faultState struct {
	lease     bool          // the run lease exists
	held      bool          // the lease holds every blob of the base image
	diff      digest.Digest // a zstd layer blob the lease holds ("" none)
	refBlob   digest.Digest // a ref blob the lease holds ("" none)
	spec      digest.Digest // a runtime spec blob the lease holds ("" none)
	refFile   []byte        // the --out file (nil when absent)
	task      snapshot.TaskState
	labelled  bool          // the container carries io.sandbox-resume.run = run
	suspend   string        // its io.sandbox-resume.suspending label ("" none)
	stopped   string        // its io.sandbox-resume.suspended label ("" none)
	recorded  digest.Digest // the ref the ledger records for the run ("" no record)
	records   int           // the ledger's records of the run at generation ≥ 2 (never any)
	tempFiles []string      // leftover temporary files beside --out
	leftovers []string      // non-content resources of the lease ("<type> <id>") but the chain snapshot
	chain     string        // a committed (chain) snapshot under the lease ("" none)
}

func (s faultState) String() string {
	return fmt.Sprintf("lease=%t held=%t diff=%q refBlob=%q spec=%q refFile=%t task=%q labelled=%t suspending=%q suspended=%q recorded=%q temp=%v leftovers=%v chain=%q",
		s.lease, s.held, s.diff, s.refBlob, s.spec, s.refFile != nil, s.task, s.labelled, s.suspend, s.stopped, s.recorded, s.tempFiles, s.leftovers, s.chain)
}

// names are the states s counts as.
func (s faultState) names() []string {
	var out []string
	switch {
	case s.refFile != nil:
		out = append(out, stateComplete)
	case !s.lease:
		out = append(out, stateNothing)
	case !s.held:
		out = append(out, stateLeaseEmpty)
	case s.diff == "" && s.refBlob == "" && s.task == snapshot.TaskRunning:
		out = append(out, stateLeaseOnly)
	case s.diff != "" && s.refBlob == "":
		out = append(out, stateDiffNoRef)
	case s.refBlob != "":
		out = append(out, stateRefNoFile)
	}
	if s.task == snapshot.TaskPaused {
		out = append(out, stateTaskPaused)
	}
	return out
}

// faultRig is one daemon with the busybox image, the CLI and the signer.
type faultRig struct {
	d    *harness.Daemon
	rt   *ctrd.Runtime
	im   harness.BusyboxImage
	env  suspendEnv
	base map[digest.Digest]bool // the blobs HoldBase puts in the lease
}

func (r *faultRig) args(cid, run, out string) []string {
	return []string{"--address", r.d.Address, "--namespace", r.d.Namespace, "suspend",
		"--container", cid, "--config", r.env.cfg, "--key", r.env.key, "--run", run, "--out", out}
}

// observe reads the state a suspend of cid with run left.
func (r *faultRig) observe(t *testing.T, ctx context.Context, cid, run, out string) faultState {
	t.Helper()
	var s faultState
	lease := snapshot.RunLease(run)
	_, err := r.rt.Lease(ctx, lease)
	switch {
	case err == nil:
		s.lease = true
	case errdefs.IsNotFound(err):
	default:
		t.Fatal(err)
	}
	if s.lease {
		rs, err := r.d.Client.LeasesService().ListResources(ctx, leases.Lease{ID: lease})
		if err != nil {
			t.Fatal(err)
		}
		cs := r.d.Client.ContentStore()
		n := 0
		for _, res := range rs {
			if res.Type == "snapshots/overlayfs" {
				// The chain snapshot the suspend commits from the
				// stopped container, or finds committed (docs/design.md
				// "Resume on the same host without extracting"; the
				// trials' workloads may write the same layer).
				if info, err := r.d.Client.SnapshotService("overlayfs").Stat(ctx, res.ID); err == nil && info.Kind == snapshots.KindCommitted {
					s.chain = res.ID
					continue
				}
			}
			if res.Type != "content" {
				// A diff interrupted by the kill leaves its ingest and
				// its parent view snapshot under the lease.
				s.leftovers = append(s.leftovers, res.Type+" "+res.ID)
				continue
			}
			d := digest.Digest(res.ID)
			if r.base[d] {
				n++
				continue
			}
			data := readAll(t, ctx, cs, d)
			switch {
			case bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}): // zstd frame
				if s.diff != "" {
					t.Errorf("lease %s holds two layer blobs, %s and %s", lease, s.diff, d)
				}
				s.diff = d
			case bytes.HasPrefix(data, []byte(`{"ociVersion"`)):
				s.spec = d
			case bytes.HasPrefix(data, []byte("{")):
				if _, err := snapshot.OpenRef(data, r.env.trust); err != nil {
					t.Errorf("lease %s holds ref blob %s that does not verify: %v", lease, d, err)
				}
				s.refBlob = d
			default:
				t.Errorf("lease %s holds blob %s that is neither the base, a zstd layer nor a ref (%d bytes)", lease, d, len(data))
			}
		}
		s.held = n == len(r.base)
	}
	// The daemon finishes a request the killed client had made (a task
	// delete in flight answers "not found" to a status call meanwhile):
	// wait for the task to settle.
	c, err := r.rt.Container(ctx, cid)
	for deadline := time.Now().Add(5 * time.Second); errdefs.IsNotFound(err) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		c, err = r.rt.Container(ctx, cid)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.task, s.labelled = c.Task, c.Labels[snapshot.LabelRun] == run
	s.suspend, s.stopped = c.Labels[snapshot.LabelSuspending], c.Labels[snapshot.LabelSuspended]
	l := daemonLedger(t, r.d, "")
	defer l.Close()
	rec, err := l.Get(ctx, run)
	switch {
	case err == nil:
		s.recorded = rec.Ref
		if rec.Generation != 1 {
			s.records++
		}
	case !errors.Is(err, ledger.ErrNotFound):
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err == nil {
		s.refFile = b
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	s.tempFiles, _ = filepath.Glob(filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*"))
	return s
}

func readAll(t *testing.T, ctx context.Context, cs content.Store, d digest.Digest) []byte {
	t.Helper()
	info, err := cs.Info(ctx, d)
	if err != nil {
		t.Fatalf("lease resource %s: %v", d, err)
	}
	b, err := content.ReadBlob(ctx, cs, ocispec.Descriptor{Digest: d, Size: info.Size})
	if err != nil {
		t.Fatalf("read %s: %v", d, err)
	}
	return b
}

// wantAtStep is the state each fault point must leave
// (suspend/faultpoint.go).
func wantAtStep(t *testing.T, step string, s faultState) {
	t.Helper()
	ok := s.lease && s.held
	before := s.refFile == nil && s.recorded == ""       // nothing recorded yet
	after := s.recorded != "" && s.recorded == s.refBlob // the ledger names the stored ref
	switch step {
	case "lease":
		ok = ok && before && s.diff == "" && s.refBlob == "" && s.task == snapshot.TaskRunning && !s.labelled && s.suspend == ""
	case "labelled":
		ok = ok && before && s.diff == "" && s.task == snapshot.TaskRunning && s.labelled && s.suspend == "1"
	case "pause":
		ok = ok && before && s.diff == "" && s.task == snapshot.TaskPaused && s.labelled && s.suspend == "1"
	case "diff":
		ok = ok && before && s.diff != "" && s.refBlob == "" && s.task == snapshot.TaskPaused && s.suspend == "1"
	case "refblob":
		ok = ok && before && s.diff != "" && s.spec != "" && s.refBlob != "" && s.task == snapshot.TaskPaused && s.suspend == "1"
	case "recorded":
		ok = ok && after && s.refFile == nil && s.task == snapshot.TaskPaused && s.suspend == "1"
	case "written":
		ok = ok && after && s.refFile != nil && s.task == snapshot.TaskPaused && s.suspend == "1"
	case "stop":
		ok = ok && after && s.refFile != nil && s.task == snapshot.TaskNone && s.suspend == "1" && s.stopped == "" && s.chain == ""
	case "chain-committed", "chained":
		// The stopped container's snapshot is committed as the chain
		// snapshot too (docs/design.md "Resume on the same host without
		// extracting"); the labels are not set yet.
		ok = ok && after && s.refFile != nil && s.task == snapshot.TaskNone && s.suspend == "1" && s.stopped == "" && s.chain != ""
	default:
		t.Fatalf("unknown step %q", step)
	}
	if !ok {
		t.Errorf("killed at fault point %s, found %v", step, s)
	}
}

// checkInvariants holds for every state a kill can leave: the ref file is
// absent or complete (it verifies and is the ref blob), and nothing is
// stored out of order.
func (r *faultRig) checkInvariants(t *testing.T, s faultState) {
	t.Helper()
	if s.refFile != nil {
		if _, err := snapshot.OpenRef(s.refFile, r.env.trust); err != nil {
			t.Errorf("a partial or invalid ref file was left (%d bytes): %v", len(s.refFile), err)
		}
		if digest.FromBytes(s.refFile) != s.refBlob {
			t.Errorf("ref file %s is not the ref blob %q", digest.FromBytes(s.refFile), s.refBlob)
		}
	}
	if s.refBlob != "" && s.diff == "" {
		t.Errorf("a ref blob without its diff: %v", s)
	}
	if (s.diff != "" || s.refBlob != "") && !s.lease {
		t.Errorf("blobs without the run lease: %v", s)
	}
	if s.refFile != nil && s.recorded != digest.FromBytes(s.refFile) {
		t.Errorf("a ref file the ledger does not record (it records %q): %v", s.recorded, s)
	}
	if s.recorded != "" && s.recorded != s.refBlob {
		t.Errorf("the ledger records %s, the lease holds ref blob %q", s.recorded, s.refBlob)
	}
	if s.records != 0 {
		t.Errorf("the ledger records a generation other than 1: %v", s)
	}
}

// rerun runs suspend again with the same --run and checks the result
// against what the killed attempt left.
func (r *faultRig) rerun(t *testing.T, ctx context.Context, cid, run, out string, before faultState) {
	t.Helper()
	stdout, code := runCLI(t, r.d, "--output", "json", "suspend", "--container", cid, "--config", r.env.cfg,
		"--key", r.env.key, "--run", run, "--out", out)
	if before.stopped != "" {
		// The killed attempt had finished: the container is suspended,
		// and suspending it again is 8, changing nothing.
		if after := r.observe(t, ctx, cid, run, out); code != 8 || !bytes.Equal(after.refFile, before.refFile) || after.recorded != before.recorded {
			t.Fatalf("rerun of a finished suspend: exit %d (want 8), found %v", code, after)
		}
		return
	}
	if code != 0 {
		t.Fatalf("rerun after %v: exit %d", before, code)
	}
	after := r.observe(t, ctx, cid, run, out)
	if after.refFile == nil {
		t.Fatalf("rerun exited 0 without a ref file")
	}
	var printed struct {
		Run        string `json:"run"`
		Generation uint64 `json:"generation"`
		Ref        string `json:"ref"`
		Out        string `json:"out"`
	}
	if err := json.Unmarshal([]byte(stdout), &printed); err != nil || printed.Run != run || printed.Generation != 1 ||
		printed.Ref != digest.FromBytes(after.refFile).String() || printed.Out != out {
		t.Errorf("rerun printed %s (%v)", stdout, err)
	}
	ref, err := snapshot.OpenRef(after.refFile, r.env.trust)
	if err != nil {
		t.Fatalf("rerun's ref does not verify: %v", err)
	}
	r.checkInvariants(t, after)
	if ref.Run != run || ref.Generation != 1 || ref.Layers[0].Digest != after.diff || ref.Spec == nil || ref.Spec.Digest != after.spec || !after.held ||
		after.task != snapshot.TaskNone || !after.labelled || after.suspend != "" || after.stopped != "1" {
		t.Errorf("after the rerun: ref run %q diff %s; found %v", ref.Run, ref.Layers[0].Digest, after)
	}
	if ref.Base.ManifestDigest != r.im.Manifest {
		t.Errorf("rerun's ref base manifest %s, want %s", ref.Base.ManifestDigest, r.im.Manifest)
	}
	// The diff is deterministic and the creation time comes from the run
	// lease, so the rerun stores what the killed attempt had stored.
	if before.diff != "" && before.diff != after.diff {
		t.Errorf("the killed attempt stored diff %s, the rerun %s", before.diff, after.diff)
	}
	if before.refBlob != "" && before.refBlob != after.refBlob {
		t.Errorf("the killed attempt stored ref blob %s, the rerun %s", before.refBlob, after.refBlob)
	}
}

// TestSuspendFaultTrials SIGKILLs the suspend process at each fault point
// (three trials each) and at random moments (six trials; the seed is
// logged), classifies what it left and reruns it: every state keeps the ref
// file absent or complete, and every rerun completes with a verifying ref.
// Each intermediate state of issue 5 must be observed at least twice.
func TestSuspendFaultTrials(t *testing.T) {
	d := harness.Start(t, "fault")
	im := harness.ImportBusybox(t, d, "busybox:1")
	r := &faultRig{d: d, rt: d.Connect(t, ""), im: im, env: newSuspendEnv(t, "busybox:1"),
		base: map[digest.Digest]bool{im.Index: true, im.Manifest: true, im.Config: true}}
	for _, l := range im.Image.Layers {
		r.base[l.Digest] = true
	}
	ctx := d.Context(t)

	// Two uninterrupted suspends: they must succeed, and the quicker one
	// (the first runs cold) sets the range of the random kill times.
	full := time.Duration(1<<63 - 1)
	for _, id := range []string{"f0a", "f0b"} {
		cid := runningContainer(t, d, im.Name, id)
		run := "fault-" + id
		out := filepath.Join(r.env.dir, run+".ref.json")
		start := time.Now()
		if _, code := runCLI(t, d, r.args(cid, run, out)[4:]...); code != 0 {
			t.Fatalf("uninterrupted suspend: exit %d", code)
		}
		full = min(full, time.Since(start))
		if s := r.observe(t, ctx, cid, run, out); s.refFile == nil || !s.labelled || s.task != snapshot.TaskNone || s.recorded == "" {
			t.Fatalf("uninterrupted suspend left %v", s)
		}
	}
	t.Logf("an uninterrupted suspend process takes %s", full)

	seed := testenv.Seed(t, testenv.RandomSeed()) // the random kill times; logged, SANDBOX_RESUME_TEST_SEED replays them
	rng := rand.New(rand.NewPCG(seed, 0))

	type trial struct {
		step  string        // a fault point, or "" for a random kill
		delay time.Duration // the random kill time
	}
	var trials []trial
	for range 3 {
		for _, s := range faultSteps {
			trials = append(trials, trial{step: s})
		}
	}
	for range 6 {
		trials = append(trials, trial{delay: time.Duration(rng.Int64N(int64(full)))})
	}

	counts := map[string]int{}
	leftoverRuns := map[string][]string{} // run → leftovers of an interrupted diff
	for i, tr := range trials {
		n := i + 1
		cid := runningContainer(t, d, im.Name, fmt.Sprintf("f%d", n))
		run := fmt.Sprintf("fault-%d", n)
		out := filepath.Join(r.env.dir, run+".ref.json")
		how := "at fault point " + tr.step
		if tr.step != "" {
			killCLIAt(t, tr.step, r.args(cid, run, out)...)
		} else {
			how = fmt.Sprintf("after %s", tr.delay.Round(time.Millisecond))
			if _, killed := killCLIAfter(t, tr.delay, r.args(cid, run, out)...); !killed {
				how += " (it had finished)"
			}
		}
		s := r.observe(t, ctx, cid, run, out)
		names := s.names()
		t.Logf("trial %d: killed %s: %s [%v]", n, how, strings.Join(names, ", "), s)
		for _, name := range names {
			counts[name]++
		}
		if len(s.leftovers) > 0 {
			counts[stateLeftovers]++
			leftoverRuns[run] = s.leftovers
		}
		if tr.step != "" {
			wantAtStep(t, tr.step, s)
		}
		r.checkInvariants(t, s)
		r.rerun(t, ctx, cid, run, out, s)
	}

	var summary []string
	for name, c := range counts {
		summary = append(summary, fmt.Sprintf("%s: %d", name, c))
	}
	slices.Sort(summary)
	t.Logf("%d trials: %s", len(trials), strings.Join(summary, "; "))
	// What an interrupted diff left under the run lease goes with discard.
	for run, left := range leftoverRuns {
		if _, code := runCLI(t, d, "discard", "--run", run); code != 0 {
			t.Errorf("discard --run %s: exit %d", run, code)
		}
		for _, l := range left {
			typ, id, _ := strings.Cut(l, " ")
			if sn, ok := strings.CutPrefix(typ, "snapshots/"); ok {
				if _, err := d.Client.SnapshotService(sn).Stat(ctx, id); !errdefs.IsNotFound(err) {
					t.Errorf("after discard --run %s, snapshot %s/%s: %v, want not found", run, sn, id, err)
				}
			}
		}
	}

	for _, name := range []string{stateLeaseOnly, stateDiffNoRef, stateRefNoFile, stateTaskPaused} {
		if counts[name] < 2 {
			t.Errorf("state %q observed %d times, want at least 2", name, counts[name])
		}
	}
}

// laterFaultSteps are the fault points of the suspend of an incarnation
// (a later generation): those of generation 1 and the release of older
// layers, after which the incarnation is deleted.
//
// chain-committed (between the commit of the incarnation's snapshot as the
// chain snapshot and the prepare of its key) is reached only where the
// chain snapshot did not exist yet: every generation here, while the
// generation-1 trials all write the same layer, so only their first
// commits it.
var laterFaultSteps = append(slices.Insert(slices.Clone(faultSteps), len(faultSteps)-1, "chain-committed"), "released")

// laterState is what a killed suspend of an incarnation writing
// generation gen left.
type laterState struct {
	gen       uint64
	newDiff   bool               // a layer blob the lease did not hold before the trial
	refBlob   digest.Digest      // a ref blob of generation gen under the lease ("" none)
	refFile   []byte             // the --out file (nil when absent)
	exists    bool               // the incarnation still exists
	task      snapshot.TaskState // its task
	suspend   string             // its io.sandbox-resume.suspending label
	record    ledger.Record      // the ledger's record of the run
	tempFiles []string           // leftover temporary files beside --out
}

func (s laterState) String() string {
	return fmt.Sprintf("gen=%d newDiff=%t refBlob=%q refFile=%t exists=%t task=%q suspending=%q record=%s temp=%v",
		s.gen, s.newDiff, s.refBlob, s.refFile != nil, s.exists, s.task, s.suspend, s.record, s.tempFiles)
}

// leaseBlobs returns the content the run lease of run holds.
func leaseBlobs(t *testing.T, ctx context.Context, d *harness.Daemon, run string) map[digest.Digest]bool {
	t.Helper()
	rs, err := d.Client.LeasesService().ListResources(ctx, leases.Lease{ID: snapshot.RunLease(run)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[digest.Digest]bool{}
	for _, res := range rs {
		if res.Type == "content" {
			out[digest.Digest(res.ID)] = true
		}
	}
	return out
}

// observeLater reads the state a suspend of incarnation id, writing
// generation gen of run to out, left; before is what the run lease held
// before it began.
func (r *genRig) observeLater(t *testing.T, ctx context.Context, id, run, out string, gen uint64, before map[digest.Digest]bool) laterState {
	t.Helper()
	s := laterState{gen: gen}
	cs := r.d.Client.ContentStore()
	for d := range leaseBlobs(t, ctx, r.d, run) {
		if before[d] {
			continue
		}
		data := readAll(t, ctx, cs, d)
		switch {
		case bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}):
			s.newDiff = true
		case bytes.HasPrefix(data, []byte(`{"ociVersion"`)):
		case bytes.HasPrefix(data, []byte("{")):
			ref, err := snapshot.OpenRef(data, r.env.trust)
			if err != nil {
				t.Errorf("the run lease holds ref blob %s that does not verify: %v", d, err)
				continue
			}
			if ref.Generation == gen {
				if s.refBlob != "" {
					t.Errorf("two ref blobs of generation %d: %s and %s", gen, s.refBlob, d)
				}
				s.refBlob = d
			}
		}
	}
	c, err := r.d.Connect(t, "").Container(ctx, id)
	for deadline := time.Now().Add(5 * time.Second); err != nil && !errdefs.IsNotFound(err) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		c, err = r.d.Connect(t, "").Container(ctx, id)
	}
	switch {
	case errdefs.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	default:
		s.exists, s.task, s.suspend = true, c.Task, c.Labels[snapshot.LabelSuspending]
	}
	s.record = r.record(t, run)
	if b, err := os.ReadFile(out); err == nil {
		s.refFile = b
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	s.tempFiles, _ = filepath.Glob(filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*"))
	return s
}

// recorded reports whether the ledger records generation s.gen.
func (s laterState) recorded() bool { return s.record.Generation == s.gen }

// wantAtLaterStep is the state each fault point must leave when the
// suspend of an incarnation is killed there.
func wantAtLaterStep(t *testing.T, step string, s laterState) {
	t.Helper()
	g := strconv.FormatUint(s.gen, 10)
	held := !s.recorded() && s.record.State == ledger.StateLive && s.record.Generation == s.gen-1
	after := s.recorded() && s.record.Ref == s.refBlob && s.record.State == ledger.StateSuspended
	ok := s.exists
	switch step {
	case "lease":
		ok = ok && held && !s.newDiff && s.refBlob == "" && s.task == snapshot.TaskRunning && s.suspend == ""
	case "labelled":
		ok = ok && held && !s.newDiff && s.task == snapshot.TaskRunning && s.suspend == g
	case "pause":
		ok = ok && held && !s.newDiff && s.task == snapshot.TaskPaused && s.suspend == g
	case "diff":
		ok = ok && held && s.newDiff && s.refBlob == "" && s.task == snapshot.TaskPaused && s.suspend == g
	case "refblob":
		ok = ok && held && s.newDiff && s.refBlob != "" && s.refFile == nil && s.task == snapshot.TaskPaused && s.suspend == g
	case "recorded":
		ok = ok && after && s.refFile == nil && s.task == snapshot.TaskPaused && s.suspend == g
	case "written":
		ok = ok && after && s.refFile != nil && s.task == snapshot.TaskPaused && s.suspend == g
	case "stop", "chain-committed", "chained", "released":
		ok = ok && after && s.refFile != nil && s.task == snapshot.TaskNone && s.suspend == g
	default:
		t.Fatalf("unknown step %q", step)
	}
	if !ok {
		t.Errorf("killed at fault point %s, found %v", step, s)
	}
}

// checkLaterInvariants holds for every state a kill can leave: the ref
// file is absent or complete and recorded; the ledger is at the
// generation before or at this one, never beyond; a stopped or deleted
// incarnation has its generation recorded.
func (r *genRig) checkLaterInvariants(t *testing.T, s laterState) {
	t.Helper()
	if s.refFile != nil {
		ref, err := snapshot.OpenRef(s.refFile, r.env.trust)
		if err != nil {
			t.Errorf("a partial or invalid ref file was left (%d bytes): %v", len(s.refFile), err)
		} else if ref.Generation != s.gen || s.record.Ref != digest.FromBytes(s.refFile) {
			t.Errorf("ref file of generation %d (%s), the ledger records %s", ref.Generation, digest.FromBytes(s.refFile), s.record)
		}
	}
	if s.record.Generation != s.gen && s.record.Generation != s.gen-1 {
		t.Errorf("the ledger is at generation %d while generation %d was being written", s.record.Generation, s.gen)
	}
	if s.recorded() && s.record.Ref != s.refBlob {
		t.Errorf("the ledger records %s, the run lease holds ref blob %q of generation %d", s.record.Ref, s.refBlob, s.gen)
	}
	if (!s.exists || s.task == snapshot.TaskNone) && !s.recorded() {
		t.Errorf("a stopped workload without its generation recorded: %v", s)
	}
}

// TestSuspendIncarnationFaultTrials SIGKILLs the suspend of an incarnation
// — each trial a resume of the run's latest generation, a change, and the
// suspend writing the next one — at each fault point (twice each) and at
// random moments (four trials; the seed is logged), checks what it left
// and reruns it: every rerun completes (or, killed after the incarnation
// was deleted, finds no container and leaves the complete ref file), the
// ledger steps one generation per trial and never records one number
// twice, and no workload is stopped without its generation recorded. The
// run passes 16 layers on the way, so its later generations are
// flattened.
func TestSuspendIncarnationFaultTrials(t *testing.T) {
	r := newGenRig(t, "faultgen")
	d := r.d
	ctx := d.Context(t)
	const run = "lfault-1"
	cid := scriptContainer(t, d, r.im.Name, "lf1", idle)
	shIn(t, d, cid, "mkdir -p /w && echo 1 > /w/g1; echo END")
	latest := filepath.Join(r.env.dir, "lf.g1.json")
	r.suspend(t, cid, run, latest)

	args := func(id, out string) []string {
		return []string{"--address", d.Address, "--namespace", d.Namespace, "suspend", "--container", id,
			"--config", r.env.cfg, "--key", r.env.key, "--out", out}
	}
	// One generation each: resume the latest into a new incarnation and
	// change a file in it.
	var gen uint64 = 1
	next := func() (id, out string) {
		gen++
		id = d.ID(fmt.Sprintf("lf-g%d", gen))
		r.resume(t, latest, id)
		startWaiting(t, d, id)
		shIn(t, d, id, fmt.Sprintf("echo %d > /w/g%d && rm -f /w/g%d; echo END", gen, gen, gen-1))
		return id, filepath.Join(r.env.dir, fmt.Sprintf("lf.g%d.json", gen))
	}

	// An uninterrupted suspend sets the range of the random kill times.
	id, out := next()
	start := time.Now()
	if _, code := runCLI(t, d, args(id, out)[4:]...); code != 0 {
		t.Fatalf("uninterrupted suspend of an incarnation: exit %d", code)
	}
	full := time.Since(start)
	latest = out
	t.Logf("an uninterrupted suspend of an incarnation takes %s", full)

	seed := testenv.Seed(t, testenv.RandomSeed())
	rng := rand.New(rand.NewPCG(seed, 0))
	type trial struct {
		step  string
		delay time.Duration
	}
	var trials []trial
	for range 2 {
		for _, s := range laterFaultSteps {
			trials = append(trials, trial{step: s})
		}
	}
	for range 4 {
		trials = append(trials, trial{delay: time.Duration(rng.Int64N(int64(full)))})
	}
	seen := map[string]int{}
	for _, tr := range trials {
		id, out := next()
		before := leaseBlobs(t, ctx, d, run)
		prev := r.record(t, run)
		how := "at fault point " + tr.step
		if tr.step != "" {
			killCLIAt(t, tr.step, args(id, out)...)
		} else {
			how = fmt.Sprintf("after %s", tr.delay.Round(time.Millisecond))
			if _, killed := killCLIAfter(t, tr.delay, args(id, out)...); !killed {
				how += " (it had finished)"
			}
		}
		s := r.observeLater(t, ctx, id, run, out, gen, before)
		t.Logf("generation %d: killed %s: %v", gen, how, s)
		if tr.step != "" {
			seen[tr.step]++
			wantAtLaterStep(t, tr.step, s)
		}
		r.checkLaterInvariants(t, s)

		stdout, code := runCLI(t, d, append([]string{"--output", "json"}, args(id, out)[4:]...)...)
		switch {
		case code == 0:
		case code == 2 && !s.exists && s.refFile != nil:
			// Killed after the incarnation was deleted: the suspend had
			// finished; the rerun finds no container.
		default:
			t.Fatalf("generation %d: rerun after a kill %s: exit %d: %s", gen, how, code, stdout)
		}
		after := r.observeLater(t, ctx, id, run, out, gen, before)
		r.checkLaterInvariants(t, after)
		ref, err := snapshot.OpenRef(after.refFile, r.env.trust)
		if err != nil {
			t.Fatalf("generation %d: the ref file after the rerun: %v", gen, err)
		}
		if after.exists || after.record.State != ledger.StateSuspended || !after.recorded() || ref.Generation != gen ||
			ref.Parent != prev.Ref || after.record.Fence != prev.Fence {
			t.Fatalf("generation %d: after the rerun %v; ref generation %d parent %s (the previous record %s)", gen, after, ref.Generation, ref.Parent, prev)
		}
		if s.recorded() && s.record.Ref != after.record.Ref {
			t.Fatalf("generation %d: the rerun recorded %s, the killed suspend %s", gen, after.record.Ref, s.record.Ref)
		}
		// The task stayed paused and the creation time is on the
		// container: a rerun stores what the killed suspend had stored.
		if s.refBlob != "" && s.refBlob != after.refBlob {
			t.Fatalf("generation %d: the killed suspend stored ref blob %s, the rerun %s", gen, s.refBlob, after.refBlob)
		}
		if gen > snapshot.MaxLayers && len(ref.Layers) > snapshot.MaxLayers {
			t.Fatalf("generation %d: %d layers", gen, len(ref.Layers))
		}
		latest = out
	}
	for _, step := range laterFaultSteps {
		if seen[step] < 2 {
			t.Errorf("fault point %s seen %d times, want 2", step, seen[step])
		}
	}
	// The last generation resumes.
	last := d.ID("lf-last")
	r.resume(t, latest, last)
	startWaiting(t, d, last)
	if got := shIn(t, d, last, fmt.Sprintf("cat /w/g%d; test -e /w/g%d || echo GONE; echo END", gen, gen-1)); !strings.Contains(got, fmt.Sprint(gen)) || !strings.Contains(got, "GONE") {
		t.Fatalf("the last generation's incarnation sees %q", got)
	}
}
