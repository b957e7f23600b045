package integration

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/resume"
	ctrd "github.com/sandbox-resume/sandbox-resume/runtime/containerd"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// The fault trials of `resume` without --check (issue 7 item 4, issue 10
// item 2): the resume process is SIGKILLed at its fault points (the steps
// resume.Resume lists) and at random moments; what it left is read back
// from the daemon (claim lease and takeover lock, the snapshots under the
// claim, the container and its task, the run lease's content) and a rerun
// must exit 0, or 8 naming the container the killed run had created.

// resumeFaultSteps are the fault points of resume.Resume and
// runtime/containerd's Materializer, in order.
var resumeFaultSteps = []string{
	"resume-takeover", "resume-claimed", "resume-diffchecked", "resume-applied",
	"resume-prepared", "resume-created", "resume-task", "resume-started",
}

// The states a killed resume can leave (by what the daemon holds).
const (
	rstNothing  = "no claim of the killed run"                     // killed before check 10
	rstLock     = "takeover lock left, claim not the killed run's" // killed while taking over a stale claim
	rstClaim    = "claim only"                                     // the claim names the killed process; nothing under it
	rstApplying = "layers being applied"                           // snapshots under the claim, the diff's chain snapshot not committed
	rstApplied  = "layers applied, no snapshot"                    // the diff's chain snapshot exists, no snapshot <container>
	rstPrepared = "snapshot prepared, no container"                // snapshot <container>, no container
	rstCreated  = "container created"                              // any state with the container, and one of:
	rstNoTask   = "no task"                                        //   no task
	rstTaskMade = "task created, not started"                      //   a created task
	rstStarted  = "task started"                                   //   a started task (running, or busybox's sh already exited)
	rstDone     = "complete (the kill came after the exit)"        // the process had finished
)

// Task states as resumeFaultState records them.
const (
	taskNone    = ""
	taskCreated = "created"
	taskStarted = "started" // running, paused or stopped
)

// resumeFaultState is what a killed resume process left.
type resumeFaultState struct {
	claim      *resume.Claim // the run's claim (nil: none)
	mine       bool          // the claim names the killed process and its container
	lock       bool          // the takeover lock lease exists
	chain      bool          // the chain snapshot of base + diff exists
	claimSnaps []string      // snapshots the claim lease holds
	snapshot   bool          // the snapshot <container> exists
	container  bool          // the container exists
	labels     map[string]string
	task       string   // taskNone, taskCreated or taskStarted
	ingests    []string // content ingests in progress
	exited     bool     // the process had exited before the kill
}

func (s resumeFaultState) String() string {
	c := "none"
	if s.claim != nil {
		c = fmt.Sprintf("%q pid %d (mine %t)", s.claim.Container, s.claim.PID, s.mine)
	}
	return fmt.Sprintf("claim=%s lock=%t chain=%t claimSnapshots=%v snapshot=%t container=%t task=%q ingests=%v",
		c, s.lock, s.chain, s.claimSnaps, s.snapshot, s.container, s.task, s.ingests)
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
		if s.exited {
			out = append(out, rstDone)
		}
		return out
	case s.lock && !s.mine:
		return []string{rstLock}
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
// trial's containers are deleted afterwards, which leaves the claim stale
// (its holder exited, its container gone), so the next resume takes it
// over; or the claim is deleted too, so the next resume creates it.
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
	if s.claim, err = r.rt.ClaimHolder(ctx, r.s.run); err != nil {
		t.Fatal(err)
	}
	s.mine = s.claim != nil && s.claim.PID == pid && s.claim.Container == container
	claimID := snapshot.ClaimLease(r.s.run)
	ls := r.d.Client.LeasesService()
	all, err := ls.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range all {
		switch l.ID {
		case claimID + "/takeover":
			s.lock = true
		case claimID:
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
// claim lease or a container) and the run lease still holds the diff, the
// ref blob and the base; the ref file is untouched; no ingest is left; a
// container has its snapshot, its labels and the claim naming it.
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
		if s.labels[snapshot.LabelRun] != r.s.run || s.labels[snapshot.LabelManifest] != r.ref.Manifest {
			t.Errorf("container %s labels %v", container, s.labels)
		}
		if s.claim == nil || s.claim.Container != container {
			t.Errorf("container %s exists but the claim is %v", container, s)
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
	case "resume-takeover":
		ok = slices.Equal(names, []string{rstLock}) && s.claim != nil
	case "resume-claimed", "resume-diffchecked":
		ok = slices.Equal(names, []string{rstClaim}) && len(s.claimSnaps) == 0
	case "resume-applied":
		ok = slices.Equal(names, []string{rstApplied}) && len(s.claimSnaps) > 0
	case "resume-prepared":
		ok = slices.Equal(names, []string{rstPrepared})
	case "resume-created":
		ok = slices.Equal(names, []string{rstCreated, rstNoTask})
	case "resume-task":
		ok = slices.Equal(names, []string{rstCreated, rstTaskMade})
	case "resume-started":
		ok = slices.Equal(names, []string{rstCreated, rstStarted})
	default:
		t.Fatalf("unknown step %q", step)
	}
	if !ok {
		t.Errorf("killed at fault point %s, found %v %v", step, names, s)
	}
}

// rerun resumes again with --container container after a resume of killed
// left s: exit 0 when the killed run had not created its container, else 8
// naming it (and no second container).
func (r *resumeRig) rerun(t *testing.T, ctx context.Context, killed, container string, s resumeFaultState) {
	t.Helper()
	code, v := resumeCLI(t, r.s, "--container", container, "--start")
	after := r.observe(t, ctx, container, -1)
	if s.container {
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
	if !after.container || after.task != taskStarted || after.claim == nil || after.claim.Container != container {
		t.Errorf("after the rerun: %v", after)
	}
	if s.lock == false && after.lock {
		t.Errorf("the rerun left its takeover lock lease")
	}
	r.checkInvariants(t, ctx, container, -1, after)
	if killed != container {
		// What the killed run prepared under its claim went with it.
		if statSnapshot(t, ctx, r.d.Client.SnapshotService("overlayfs"), killed) || containers(t, r.d)[killed] {
			t.Errorf("the killed run's snapshot or container %s is left after the rerun", killed)
		}
	}
}

// reset deletes the containers ids (tasks killed, snapshots removed) and
// the takeover lock; the claim stays, stale. With dropClaim the claim lease
// is deleted too (synchronously, so what it held is collected).
func (r *resumeRig) reset(t *testing.T, ctx context.Context, dropClaim bool, ids ...string) {
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
	ls := r.d.Client.LeasesService()
	id := snapshot.ClaimLease(r.s.run)
	if err := ls.Delete(ctx, leases.Lease{ID: id + "/takeover"}); err != nil && !errdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	if dropClaim {
		if err := ls.Delete(ctx, leases.Lease{ID: id}, leases.SynchronousDelete); err != nil && !errdefs.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

// TestResumeFaultTrials SIGKILLs `resume --start` (no --check) of one
// suspended run at each fault point (twice each: the rerun once with the
// same --container, once with another) and at random moments (the seed is
// logged), classifies what it left, checks the invariants and reruns it:
// exit 0, or 8 naming the container the killed run had created. The
// claim-only and container-created states (and every other step) must be
// observed at least twice. Before a trial the previous one's containers are
// deleted, leaving its claim stale (taken over) or, every other trial, no
// claim (created).
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
	r.content = r.runContent(t, ctx)
	for _, want := range []digest.Digest{ref.Layers[0].Digest, digest.FromBytes(file), ref.Base.ManifestDigest, ref.Base.ConfigDigest} {
		if _, ok := r.content[want]; !ok {
			t.Fatalf("the run lease does not hold %s: %v", want, r.content)
		}
	}

	// Two uninterrupted resumes (the first creates the claim, the second
	// takes it over): they succeed, and the quicker one sets the range of
	// the random kill times.
	full := time.Duration(1<<63 - 1)
	for i, id := range []string{"rf-warm-a", "rf-warm-b"} {
		start := time.Now()
		code, v := resumeCLI(t, s, "--container", id, "--start")
		full = min(full, time.Since(start))
		if code != 0 || v.Container != id {
			t.Fatalf("uninterrupted resume %d: exit %d: %s", i, code, failDetail(v))
		}
		r.reset(t, ctx, false, id)
	}
	t.Logf("an uninterrupted resume --start process takes %s", full)

	seed := uint64(time.Now().UnixNano())
	t.Logf("random kill times: seed %d", seed)
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
		// A stale claim for the takeover fault point and every other trial;
		// none for the rest.
		if tr.step != "resume-takeover" && n%2 == 1 {
			r.reset(t, ctx, true)
		}
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
		r.reset(t, ctx, false, killed, again)
	}

	var summary []string
	for name, c := range counts {
		summary = append(summary, fmt.Sprintf("%s: %d", name, c))
	}
	slices.Sort(summary)
	t.Logf("%d trials: %s", len(trials), strings.Join(summary, "; "))
	for _, name := range []string{rstLock, rstClaim, rstApplied, rstPrepared, rstCreated, rstNoTask, rstTaskMade, rstStarted} {
		if counts[name] < 2 {
			t.Errorf("state %q observed %d times, want at least 2", name, counts[name])
		}
	}
}

// TestResumeTakeoverLockHolder: the takeover lock lease of a stale claim
// blocks a resume while its holder process lives (exit 8, no container,
// the lock kept) and not once that holder is gone (another start time),
// though the lock has not expired: the resume takes the claim over.
func TestResumeTakeoverLockHolder(t *testing.T) {
	d := harness.Start(t, "rlock")
	s := suspendRun(t, d, "rlock-1")
	ctx := d.Context(t)
	ls := d.Client.LeasesService()
	claimID := snapshot.ClaimLease(s.run)
	lockID := claimID + "/takeover"

	live, err := resume.Holder("taker", "")
	if err != nil {
		t.Fatal(err)
	}
	dead := live
	dead.Container, dead.StartTime = "gone", live.StartTime+"0"
	if _, err := ls.Create(ctx, leases.WithID(claimID), leases.WithLabels(resume.ClaimLabels(dead))); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Create(ctx, leases.WithID(lockID), leases.WithExpiration(ctrd.TakeoverLockExpiry), leases.WithLabels(resume.ClaimLabels(live))); err != nil {
		t.Fatal(err)
	}
	code, v := resumeCLI(t, s, "--container", "rlock-a")
	if code != 8 || containers(t, d)["rlock-a"] {
		t.Fatalf("resume under a live taker's lock: exit %d %s; container made %t", code, failDetail(v), containers(t, d)["rlock-a"])
	}
	if l, err := ls.List(ctx, "id=="+strconv.Quote(lockID)); err != nil || len(l) != 1 {
		t.Fatalf("the live taker's lock lease: %v, %v", l, err)
	}

	// The taker dies inside the lock: its labels name a gone process.
	if err := ls.Delete(ctx, leases.Lease{ID: lockID}); err != nil {
		t.Fatal(err)
	}
	taker := live
	taker.StartTime += "0"
	if _, err := ls.Create(ctx, leases.WithID(lockID), leases.WithExpiration(ctrd.TakeoverLockExpiry), leases.WithLabels(resume.ClaimLabels(taker))); err != nil {
		t.Fatal(err)
	}
	code, v = resumeCLI(t, s, "--container", "rlock-b")
	if code != 0 || v.Container != "rlock-b" || !strings.Contains(v.Check(resume.CheckClaim).Detail, "took over") {
		t.Fatalf("resume under a dead taker's lock: exit %d container %q: %s", code, v.Container, failDetail(v))
	}
	if l, err := ls.List(ctx, "id=="+strconv.Quote(lockID)); err != nil || len(l) != 0 {
		t.Errorf("lock lease after the takeover: %v, %v", l, err)
	}
}
