package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	ctrd "github.com/sandbox-resume/sandbox-resume/runtime/containerd"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// The fault trials of `resume` without --check (issue 7 item 4, issue 10
// item 2, issue 15 item 6): the resume process is SIGKILLed at its fault
// points (the steps resume.Resume lists: before the claim, after it, after
// the container, after Live, ...) and at random moments; what it left is
// read back from the ledger (the run's record) and the daemon (the
// snapshots under the materialization lease, the container and its task,
// the run lease's content) and a rerun must complete (exit 0, replacing the
// killed resumer, which is gone) or, once the killed run went live, answer 8
// naming its incarnation — never two incarnations.

// resumeFaultSteps are the fault points of resume.Resume and
// runtime/containerd's Materializer, in order.
var resumeFaultSteps = []string{
	"resume-judged", "resume-claimed", "resume-diffchecked", "resume-applied",
	"resume-prepared", "resume-created", "resume-live", "resume-task", "resume-started",
}

// The states a killed resume can leave (by what the daemon holds).
const (
	rstNothing  = "no claim of the killed run"              // killed before the Claim transition
	rstClaim    = "claim only"                              // the record is resuming with the killed process as holder; nothing made
	rstApplying = "layers being applied"                    // snapshots under the materialization lease, the diff's chain snapshot not committed
	rstApplied  = "layers applied, no snapshot"             // the diff's chain snapshot exists, no snapshot <container>
	rstPrepared = "snapshot prepared, no container"         // snapshot <container>, no container
	rstCreated  = "container created"                       // any state with the container, and one of:
	rstNoTask   = "no task"                                 //   no task
	rstTaskMade = "task created, not started"               //   a created task
	rstStarted  = "task started"                            //   a started task (running, or busybox's sh already exited)
	rstLive     = "live"                                    //   and the record is live with the container
	rstDone     = "complete (the kill came after the exit)" // the process had finished
)

// Task states as resumeFaultState records them.
const (
	taskNone    = ""
	taskCreated = "created"
	taskStarted = "started" // running, paused or stopped
)

// resumeFaultState is what a killed resume process left.
type resumeFaultState struct {
	rec        *ledger.Record // the run's record (nil: none)
	mine       bool           // the record is resuming with the killed process and its container as holder
	live       bool           // the record is live with the killed run's container
	chain      bool           // the chain snapshot of base + diff exists
	claimSnaps []string       // snapshots the materialization leases hold
	snapshot   bool           // the snapshot <container> exists
	container  bool           // the container exists
	labels     map[string]string
	task       string   // taskNone, taskCreated or taskStarted
	ingests    []string // content ingests in progress
	exited     bool     // the process had exited before the kill
}

func (s resumeFaultState) String() string {
	c := "none"
	if s.rec != nil {
		c = fmt.Sprintf("%s (mine %t, live %t)", s.rec, s.mine, s.live)
	}
	return fmt.Sprintf("record=%s chain=%t leaseSnapshots=%v snapshot=%t container=%t task=%q ingests=%v",
		c, s.chain, s.claimSnaps, s.snapshot, s.container, s.task, s.ingests)
}

// names are the states s counts as.
func (s resumeFaultState) names() []string {
	switch {
	case s.container:
		out := []string{rstCreated}
		switch s.task {
		case taskNone:
			out = append(out, rstNoTask)
		case taskCreated:
			out = append(out, rstTaskMade)
		default:
			out = append(out, rstStarted)
		}
		if s.live {
			out = append(out, rstLive)
		}
		if s.exited {
			out = append(out, rstDone)
		}
		return out
	case !s.mine:
		return []string{rstNothing}
	case s.snapshot:
		return []string{rstPrepared}
	case s.chain:
		return []string{rstApplied}
	case len(s.claimSnaps) > 0:
		return []string{rstApplying}
	}
	return []string{rstClaim}
}

// resumeRig is one suspended run on one daemon, resumed over and over: a
// trial's containers are deleted afterwards and the record reset — purged
// (the next resume claims a free run id) or resuming with a gone holder
// (the next resume replaces it).
type resumeRig struct {
	d       *harness.Daemon
	rt      *ctrd.Runtime
	s       *suspendedRun
	refFile []byte
	ref     *snapshot.Ref
	chainID digest.Digest           // of base layers + the rootfs diff
	content map[digest.Digest]int64 // the run lease's blobs after suspend, with sizes
}

func (r *resumeRig) args(container string) []string {
	return []string{"--address", r.d.Address, "--namespace", r.d.Namespace, "--output", "json",
		"resume", "--ref", r.s.ref, "--config", r.s.cfg, "--trust", r.s.pub, "--container", container, "--start"}
}

// observe reads what a resume of container by process pid left.
func (r *resumeRig) observe(t *testing.T, ctx context.Context, container string, pid int) resumeFaultState {
	t.Helper()
	var s resumeFaultState
	var err error
	rec, err := daemonLedger(t, r.d, "").Get(ctx, r.s.run)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
	case err != nil:
		t.Fatal(err)
	default:
		s.rec = &rec
	}
	if h := rec.Holder; s.rec != nil && h != nil && h.ID == container {
		s.mine = rec.State == ledger.StateResuming && (pid < 0 || h.PID == pid)
		s.live = rec.State == ledger.StateLive
	}
	ls := r.d.Client.LeasesService()
	all, err := ls.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range all {
		switch {
		case l.Labels[snapshot.LabelPrefix+"temporary"] == "materialize" && l.Labels[snapshot.LabelRun] == r.s.run:
			rs, err := ls.ListResources(ctx, l)
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range rs {
				if strings.HasPrefix(res.Type, "snapshots/") {
					s.claimSnaps = append(s.claimSnaps, res.ID)
				}
			}
		}
	}
	sn := r.d.Client.SnapshotService("overlayfs")
	s.chain = statSnapshot(t, ctx, sn, r.chainID.String())
	s.snapshot = statSnapshot(t, ctx, sn, container)
	c, err := r.d.Client.LoadContainer(ctx, container)
	switch {
	case err == nil:
		s.container = true
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.labels = info.Labels
		task, err := c.Task(ctx, nil)
		switch {
		case err == nil:
			st, err := task.Status(ctx)
			if err != nil && !errdefs.IsNotFound(err) {
				t.Fatal(err)
			}
			s.task = taskStarted
			if st.Status == client.Created {
				s.task = taskCreated
			}
		case !errdefs.IsNotFound(err):
			t.Fatal(err)
		}
	case !errdefs.IsNotFound(err):
		t.Fatal(err)
	}
	sts, err := r.d.Client.ContentStore().ListStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		s.ingests = append(s.ingests, st.Ref)
	}
	return s
}

// statSnapshot reports whether snapshot key exists.
func statSnapshot(t *testing.T, ctx context.Context, sn snapshots.Snapshotter, key string) bool {
	t.Helper()
	_, err := sn.Stat(ctx, key)
	switch {
	case err == nil:
		return true
	case errdefs.IsNotFound(err):
		return false
	}
	t.Fatalf("stat snapshot %s: %v", key, err)
	return false
}

// runContent returns the blobs the run lease holds, each with the size the
// content store reports (so each is still stored).
func (r *resumeRig) runContent(t *testing.T, ctx context.Context) map[digest.Digest]int64 {
	t.Helper()
	rs, err := r.d.Client.LeasesService().ListResources(ctx, leases.Lease{ID: snapshot.RunLease(r.s.run)})
	if err != nil {
		t.Fatalf("run lease: %v", err)
	}
	out := map[digest.Digest]int64{}
	for _, res := range rs {
		if res.Type != "content" {
			continue
		}
		info, err := r.d.Client.ContentStore().Info(ctx, digest.Digest(res.ID))
		if err != nil {
			t.Errorf("run lease blob %s: %v", res.ID, err)
			continue
		}
		out[info.Digest] = info.Size
	}
	return out
}

// checkInvariants holds for every state a kill or a rerun leaves: after a
// garbage collection the state is the same (everything made is held by the
// materialization lease or a container) and the run lease still holds the
// diff, the ref blob and the base; the ref file is untouched; no ingest is
// left; a container has its snapshot, its labels (fence included) and the
// record naming it as holder.
func (r *resumeRig) checkInvariants(t *testing.T, ctx context.Context, container string, pid int, s resumeFaultState) {
	t.Helper()
	collectGarbage(t, r.d, r.d.Namespace)
	if again := r.observe(t, ctx, container, pid); again.String() != s.String() {
		t.Errorf("garbage collection changed the state:\n before %v\n after  %v", s, again)
	}
	if got := r.runContent(t, ctx); !maps.Equal(got, r.content) {
		t.Errorf("run lease content %v, want %v", got, r.content)
	}
	if b, err := os.ReadFile(r.s.ref); err != nil || !bytes.Equal(b, r.refFile) {
		t.Errorf("the ref file changed (%d bytes, %v)", len(b), err)
	}
	if len(s.ingests) > 0 {
		t.Errorf("ingests left: %v", s.ingests)
	}
	if s.container {
		if !s.snapshot {
			t.Errorf("container %s without its snapshot: %v", container, s)
		}
		if s.labels[snapshot.LabelRun] != r.s.run || s.labels[snapshot.LabelManifest] != r.ref.Manifest ||
			s.labels[snapshot.LabelGeneration] != "1" || s.labels[snapshot.LabelRef] != digest.FromBytes(r.refFile).String() {
			t.Errorf("container %s labels %v", container, s.labels)
		}
		if s.rec == nil || s.rec.Holder == nil || s.rec.Holder.ID != container || s.labels[snapshot.LabelFence] != strconv.FormatUint(s.rec.Fence, 10) {
			t.Errorf("container %s (labels %v) exists but the record is %v", container, s.labels, s)
		}
	}
	if s.snapshot && !s.chain {
		t.Errorf("snapshot %s without its parent chain %s", container, r.chainID)
	}
}

// wantAtResumeStep is the state each fault point must leave.
func wantAtResumeStep(t *testing.T, step string, s resumeFaultState) {
	t.Helper()
	names := s.names()
	var ok bool
	switch step {
	case "resume-judged":
		ok = slices.Equal(names, []string{rstNothing})
	case "resume-claimed", "resume-diffchecked":
		// resume-diffchecked: every layer blob's size and digest are
		// checked (the diffID is the apply's to check), nothing applied.
		ok = slices.Equal(names, []string{rstClaim}) && len(s.claimSnaps) == 0
	case "resume-applied":
		ok = slices.Equal(names, []string{rstApplied}) && len(s.claimSnaps) > 0
	case "resume-prepared":
		ok = slices.Equal(names, []string{rstPrepared})
	case "resume-created":
		ok = slices.Equal(names, []string{rstCreated, rstNoTask})
	case "resume-live":
		ok = slices.Equal(names, []string{rstCreated, rstNoTask, rstLive})
	case "resume-task":
		ok = slices.Equal(names, []string{rstCreated, rstTaskMade, rstLive})
	case "resume-started":
		ok = slices.Equal(names, []string{rstCreated, rstStarted, rstLive})
	default:
		t.Fatalf("unknown step %q", step)
	}
	if !ok {
		t.Errorf("killed at fault point %s, found %v %v", step, names, s)
	}
}

// rerun resumes again with --container container after a resume of killed
// left s: 8 naming the killed run's container when it went live (and no
// second container); else exit 0 — the killed resumer is gone, so the rerun
// replaces it and deletes what it made.
func (r *resumeRig) rerun(t *testing.T, ctx context.Context, killed, container string, s resumeFaultState) {
	t.Helper()
	code, v := resumeCLI(t, r.s, "--container", container, "--start")
	after := r.observe(t, ctx, container, -1)
	if s.live {
		if code != 8 || v.Class != resume.ClassClaimConflict || !strings.Contains(failDetail(v), fmt.Sprintf("container %q", killed)) {
			t.Errorf("rerun after %v: exit %d %s; want 8 naming %s", s, code, failDetail(v), killed)
		}
		if killed != container && (after.container || after.snapshot) {
			t.Errorf("the refused rerun left %v", after)
		}
		return
	}
	if code != 0 || v.Container != container || v.Pid == 0 {
		t.Fatalf("rerun after %v: exit %d container %q pid %d: %s", s, code, v.Container, v.Pid, failDetail(v))
	}
	if !after.container || after.task != taskStarted || !after.live {
		t.Errorf("after the rerun: %v", after)
	}
	r.checkInvariants(t, ctx, container, -1, after)
	if killed != container {
		// What the killed run made went with it.
		if statSnapshot(t, ctx, r.d.Client.SnapshotService("overlayfs"), killed) || containers(t, r.d)[killed] {
			t.Errorf("the killed run's snapshot or container %s is left after the rerun", killed)
		}
	}
}

// reset deletes the containers ids (tasks killed, snapshots removed) and
// the leases of killed materializations (synchronously, so what they held
// is collected), and resets the record: purged and generation 1 recorded
// again (the fence kept) or, with
// stale, resuming with a gone holder (a resumer killed before it made its
// container).
func (r *resumeRig) reset(t *testing.T, ctx context.Context, stale bool, ids ...string) {
	t.Helper()
	for _, id := range ids {
		c, err := r.d.Client.LoadContainer(ctx, id)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if task, err := c.Task(ctx, nil); err == nil {
			if _, err := task.Delete(ctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
				t.Fatalf("delete task of %s: %v", id, err)
			}
		}
		if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
			t.Fatalf("delete container %s: %v", id, err)
		}
		if statSnapshot(t, ctx, r.d.Client.SnapshotService("overlayfs"), id) {
			t.Fatalf("snapshot %s outlived its container", id)
		}
	}
	// What killed materializations left under their (expiring) leases
	// goes too, synchronously.
	ls := r.d.Client.LeasesService()
	all, err := ls.List(ctx, fmt.Sprintf("labels.%q==materialize,labels.%q==%s", snapshot.LabelPrefix+"temporary", snapshot.LabelRun, r.s.run))
	if err != nil {
		t.Fatal(err)
	}
	for _, ml := range all {
		if err := ls.Delete(ctx, ml, leases.SynchronousDelete); err != nil && !errdefs.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	// And what the deleted containers alone referenced (the chain
	// snapshot, which the run lease also holds once a resume extracted
	// it: released here) is collected now, not in the middle of the next
	// trial.
	if err := ls.DeleteResource(ctx, leases.Lease{ID: snapshot.RunLease(r.s.run)}, leases.Resource{ID: r.chainID.String(), Type: "snapshots/overlayfs"}); err != nil && !errdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	collectGarbage(t, r.d, r.d.Namespace)
	l := daemonLedger(t, r.d, "")
	if _, err := l.Discard(ctx, r.s.run, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Purge(ctx, r.s.run); err != nil {
		t.Fatal(err)
	}
	host, err := r.rt.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Turn 3: a purged run is never claimed again; generation 1 is
	// recorded once more (as its suspend did), from the purged fence on.
	if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: r.s.run, Generation: 1, Ref: digest.FromBytes(r.refFile),
		Container: ledger.Container{Host: host.ID, Namespace: r.d.Namespace, ID: "rf-reset"}, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if stale {
		h, err := resume.Self(ledger.Container{Host: host.ID, Namespace: r.d.Namespace, ID: "rf-gone"})
		if err != nil {
			t.Fatal(err)
		}
		h.Start += "0"
		if _, err := l.Claim(ctx, ledger.ClaimRequest{Run: r.s.run, Generation: 1, Ref: digest.FromBytes(r.refFile), Holder: h}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResumeFaultTrials SIGKILLs `resume --start` (no --check) of one
// suspended run at each fault point (twice each: the rerun once with the
// same --container, once with another) and at random moments (the seed is
// logged), classifies what it left, checks the invariants and reruns it:
// exit 0, or 8 naming the container the killed run had made live; never
// two incarnations. The claim-only, container-created and live states (and
// every other step) must be observed at least twice. Before a trial the
// previous one's containers are deleted and the record reset: resuming with
// a gone holder (replaced) or, every other trial, purged (claimed afresh).
func TestResumeFaultTrials(t *testing.T) {
	d := harness.Start(t, "rfault")
	s := suspendRun(t, d, "rfault-1")
	ctx := d.Context(t)
	file, err := os.ReadFile(s.ref)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := envelope.LoadTrust(s.pub)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := snapshot.OpenRef(file, trust)
	if err != nil {
		t.Fatal(err)
	}
	r := &resumeRig{d: d, rt: d.Connect(t, ""), s: s, refFile: file, ref: ref,
		chainID: identity.ChainID(append(slices.Clone(ref.Base.DiffIDs), ref.Layers[0].DiffID))}
	// The trials exercise the extract: the chain snapshot the suspend
	// committed (docs/design.md "Resume on the same host without
	// extracting", whose path fastresume_test.go tests) goes first, with
	// the stopped source container on it.
	src, err := d.Client.LoadContainer(ctx, d.ID("src-"+s.run))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Delete(ctx, client.WithSnapshotCleanup); err != nil {
		t.Fatal(err)
	}
	if err := d.Client.SnapshotService("overlayfs").Remove(ctx, r.chainID.String()); err != nil {
		t.Fatalf("remove the chain snapshot %s: %v", r.chainID, err)
	}
	r.content = r.runContent(t, ctx)
	for _, want := range []digest.Digest{ref.Layers[0].Digest, digest.FromBytes(file), ref.Base.ManifestDigest, ref.Base.ConfigDigest} {
		if _, ok := r.content[want]; !ok {
			t.Fatalf("the run lease does not hold %s: %v", want, r.content)
		}
	}

	// Two uninterrupted resumes (the first claims a run the ledger does not
	// know, the second one replacing a gone resumer): they succeed, and the
	// quicker one sets the range of the random kill times.
	full := time.Duration(1<<63 - 1)
	for i, id := range []string{"rf-warm-a", "rf-warm-b"} {
		start := time.Now()
		code, v := resumeCLI(t, s, "--container", id, "--start")
		full = min(full, time.Since(start))
		if code != 0 || v.Container != id {
			t.Fatalf("uninterrupted resume %d: exit %d: %s", i, code, failDetail(v))
		}
		r.reset(t, ctx, i == 0, id)
	}
	t.Logf("an uninterrupted resume --start process takes %s", full)

	seed := testenv.Seed(t, testenv.RandomSeed()) // the random kill times; logged, SANDBOX_RESUME_TEST_SEED replays them
	rng := rand.New(rand.NewPCG(seed, 0))
	type trial struct {
		step  string        // a fault point, or "" for a random kill
		delay time.Duration // the random kill time
		same  bool          // the rerun uses the killed run's --container
	}
	var trials []trial
	for rep := range 2 {
		for _, st := range resumeFaultSteps {
			trials = append(trials, trial{step: st, same: rep == 0})
		}
	}
	for i := range 8 {
		// Within the first three quarters: a later kill mostly finds the
		// process finished.
		trials = append(trials, trial{delay: time.Duration(rng.Int64N(int64(full) * 3 / 4)), same: i%2 == 0})
	}

	counts := map[string]int{}
	for i, tr := range trials {
		n := i + 1
		killed := fmt.Sprintf("rf-%d", n)
		again := killed
		if !tr.same {
			again = killed + "-rerun"
		}
		// A gone resumer to replace every other trial; a purged record for
		// the rest.
		r.reset(t, ctx, n%2 == 0)
		var pid int
		var exited bool
		how := "at fault point " + tr.step
		if tr.step != "" {
			pid = killCLIAt(t, tr.step, r.args(killed)...)
		} else {
			var killedBySignal bool
			pid, killedBySignal = killCLIAfter(t, tr.delay, r.args(killed)...)
			exited = !killedBySignal
			how = fmt.Sprintf("after %s", tr.delay.Round(time.Millisecond))
			if exited {
				how += " (it had finished)"
			}
			// Let the daemon finish a request the killed client had in flight.
			time.Sleep(250 * time.Millisecond)
		}
		st := r.observe(t, ctx, killed, pid)
		st.exited = exited
		names := st.names()
		t.Logf("trial %d: killed %s: %s [%v]", n, how, strings.Join(names, ", "), st)
		for _, name := range names {
			counts[name]++
		}
		if tr.step != "" {
			wantAtResumeStep(t, tr.step, st)
		}
		r.checkInvariants(t, ctx, killed, pid, st)
		r.rerun(t, ctx, killed, again, st)
		if n := incarnations(t, r.d, r.s.run); n > 1 {
			t.Errorf("trial %d: %d incarnations of run %s", i+1, n, r.s.run)
		}
		r.reset(t, ctx, false, killed, again)
	}

	var summary []string
	for name, c := range counts {
		summary = append(summary, fmt.Sprintf("%s: %d", name, c))
	}
	slices.Sort(summary)
	t.Logf("%d trials: %s", len(trials), strings.Join(summary, "; "))
	for _, name := range []string{rstNothing, rstClaim, rstApplied, rstPrepared, rstCreated, rstNoTask, rstTaskMade, rstStarted, rstLive} {
		if counts[name] < 2 {
			t.Errorf("state %q observed %d times, want at least 2", name, counts[name])
		}
	}
}

// incarnations counts the incarnations of run: containers labelled with
// the run and a generation (the runtime's own container carries the run
// label only).
func incarnations(t *testing.T, d *harness.Daemon, run string) int {
	t.Helper()
	cs, err := d.Client.Containers(d.Context(t), fmt.Sprintf("labels.%q==%s,labels.%q", snapshot.LabelRun, run, snapshot.LabelGeneration))
	if err != nil {
		t.Fatal(err)
	}
	return len(cs)
}

// TestResumeStaleTakeoverRace races the scenario that gave the previous
// release two winners: a run whose resumer died before making its
// container (a resuming record with a gone holder), resumed by two
// processes at once. Each round exactly one replaces the gone holder and
// resumes (0); the other is 8; one container.
func TestResumeStaleTakeoverRace(t *testing.T) {
	d := harness.Start(t, "rstale")
	s := suspendRun(t, d, "rstale-1")
	ctx := d.Context(t)
	file, err := os.ReadFile(s.ref)
	if err != nil {
		t.Fatal(err)
	}
	r := &resumeRig{d: d, rt: d.Connect(t, ""), s: s, refFile: file}
	const rounds = 10
	for i := range rounds {
		r.reset(t, ctx, true)
		ids := []string{fmt.Sprintf("rstale-%d-a", i), fmt.Sprintf("rstale-%d-b", i)}
		codes := make([]int, 2)
		verdicts := make([]*resume.Verdict, 2)
		var wg sync.WaitGroup
		for j := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[j], verdicts[j] = resumeCLI(t, s, "--container", ids[j])
			}()
		}
		wg.Wait()
		won := 0
		for j := range ids {
			switch codes[j] {
			case 0:
				won++
			case 8:
			default:
				t.Errorf("round %d: %s exit %d: %s", i, ids[j], codes[j], failDetail(verdicts[j]))
			}
		}
		if won != 1 || incarnations(t, d, s.run) != 1 {
			t.Fatalf("round %d: exits %v, %d incarnations; want one winner and one incarnation", i, codes, incarnations(t, d, s.run))
		}
		r.reset(t, ctx, false, ids...)
	}
}
