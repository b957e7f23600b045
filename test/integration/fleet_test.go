package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/test/integration/etcdharness"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// TestFleet is issue 17's fleet (docs/design.md "The run ledger",
// "Materialize"): hosts A and B share one 3-member etcd cluster, every
// command is a separate CLI process with --ledger etcd://…, and each
// subtest works under its own key prefix.
func TestFleet(t *testing.T) {
	f := startFleet(t)
	t.Run("race", f.testRace)
	t.Run("superseded", f.testSuperseded)
	t.Run("fencing", f.testFencing)
	t.Run("sigkill", f.testSIGKILL)
	t.Run("take-over", f.testTakeOver)
	t.Run("runs and discard", f.testRunsDiscard)
	t.Run("leader killed", f.testLeaderKilled)
	t.Run("quorum lost", f.testQuorumLost)
	t.Run("tls", f.testTLS)
	var total time.Duration
	for _, d := range f.generationTimings {
		total += d
	}
	if n := len(f.generationTimings); n > 0 {
		t.Logf("%d generations suspended, exported and imported twice in %s (%s each)", n, within(total), within(total/time.Duration(n)))
	}
}

// raceRounds is how many rounds testRace runs.
const raceRounds = 20

// race starts one resume of g on each host at once (with env added to
// their environment; during, when not nil, runs once both are started) and
// checks that exactly one exits 0 and the other 8, that exactly one
// incarnation exists across both daemons, and that the winner's fence is
// in its verdict, on its label and in the record. It returns the winning
// daemon and the exit codes.
func (f *fleet) race(t *testing.T, tn *tenant, g *gen, env []string, during func([2]*proc)) (*harness.Daemon, [2]int) {
	t.Helper()
	ds := [2]*harness.Daemon{f.a, f.b}
	ids := [2]string{"fa-" + g.run, "fb-" + g.run}
	var procs [2]*proc
	var wg sync.WaitGroup
	for j := range ds {
		wg.Go(func() { procs[j] = f.startResume(t, tn, ds[j], g, ids[j], env) })
	}
	wg.Wait()
	if during != nil {
		during(procs)
	}
	var codes [2]int
	var vs [2]*resume.Verdict
	for j := range procs {
		codes[j], vs[j] = procs[j].verdict(t)
	}
	na, nb := f.incarnationsOn(t, g.run)
	win := -1
	for j, c := range codes {
		switch {
		case c == 0 && win >= 0:
			t.Fatalf("%s: two winners: both resumes exited 0 (fences %d, %d); incarnations A %d B %d", g.run, vs[0].Fence, vs[1].Fence, na, nb)
		case c == 0:
			win = j
		case c == 8:
		default:
			t.Errorf("%s: the resume on %s exited %d: %s", g.run, ds[j].Name, c, failDetail(vs[j]))
		}
	}
	if win < 0 {
		t.Fatalf("%s: no winner: exits %v, incarnations A %d B %d: %s | %s", g.run, codes, na, nb, failDetail(vs[0]), failDetail(vs[1]))
	}
	lose := 1 - win
	if na+nb != 1 || incarnations(t, ds[win], g.run) != 1 || containers(t, ds[lose])[ids[lose]] {
		t.Errorf("%s: winner %s: incarnations A %d B %d; want exactly the winner's", g.run, ds[win].Name, na, nb)
	}
	v := vs[win]
	if v.Fence == 0 || v.Container != ids[win] || v.Generation != 1 || v.Run != g.run {
		t.Errorf("%s: winner's verdict: run %q generation %d fence %d container %q", g.run, v.Run, v.Generation, v.Fence, v.Container)
	}
	f.wantLive(t, tn, g.run, v.Fence, ds[win], ids[win])
	if codes[lose] == 8 {
		if d := failDetail(vs[lose]); vs[lose].Class != resume.ClassClaimConflict || !strings.Contains(d, ids[win]) {
			t.Errorf("%s: the loser's refusal does not name the winner's container %s: %s %s", g.run, ids[win], vs[lose].Class, d)
		}
	}
	return ds[win], codes
}

// testRace: raceRounds rounds of two resumes of one generation, one per
// host, started together; each round a fresh run, discarded everywhere
// afterwards.
func (f *fleet) testRace(t *testing.T) {
	tn := f.tenant(t, nil)
	wins := map[string]int{}
	var raced time.Duration
	for i := range raceRounds {
		g := f.generation(t, tn, fmt.Sprintf("race-%d", i))
		start := time.Now()
		w, _ := f.race(t, tn, g, nil, nil)
		raced += time.Since(start)
		wins[w.Name]++
		f.discardEverywhere(t, tn, g.run, w)
	}
	t.Logf("%d rounds: wins %v; %s per race", raceRounds, wins, within(raced/raceRounds))
}

// testSuperseded: generation N+1 recorded on B; resuming N on A is 9.
//
// Generation 2 is suspended from B's incarnation when the CLI can suspend
// an incarnation (later generations of suspend); until then the suspend is
// refused as needing generations (2) and generation 2 is recorded through
// the Go API against the same etcd prefix, as that suspend would record it
// (ledger.Suspended by B's incarnation with its fence).
func (f *fleet) testSuperseded(t *testing.T) {
	tn := f.tenant(t, nil)
	g := f.generation(t, tn, "superseded-1")
	id := "fb-" + g.run
	code, v := f.resume(t, tn, f.b, g, id, "--start")
	if code != 0 {
		t.Fatalf("resume on B: exit %d %s", code, failDetail(v))
	}
	f.recordNext(t, tn, g, f.b, id, v.Fence)
	code, v = f.resume(t, tn, f.a, g, "fa-"+g.run)
	if code != 9 || v.Class != resume.ClassSuperseded || !strings.Contains(failDetail(v), "generation 2") {
		t.Errorf("resume of generation 1 on A after generation 2 on B: exit %d %s %s; want 9 naming generation 2", code, v.Class, failDetail(v))
	}
	if a, _ := f.incarnationsOn(t, g.run); a != 0 {
		t.Errorf("%d incarnations on A", a)
	}
}

// needsGenerations reports whether a suspend's refusal is "suspending a
// resumed run needs generations" (suspend.ErrNeedsGenerations: the
// CLI cannot suspend an incarnation yet).
func needsGenerations(code int, stdout []byte, stderr string) bool {
	return code == 2 && strings.Contains(string(stdout)+stderr, "needs generations")
}

// recordNext records generation 2 of g from incarnation id on d holding
// fence: `suspend` of the incarnation when the CLI can, else
// ledger.Suspended through the Go API (the skip-free fallback while later
// generations of suspend are being built).
func (f *fleet) recordNext(t *testing.T, tn *tenant, g *gen, d *harness.Daemon, id string, fence uint64) {
	t.Helper()
	code, stdout, stderr := tn.run(t, d, "suspend", "--container", id, "--config", f.cfg, "--key", f.key,
		"--out", f.dir+"/"+g.run+"/g2.ref.json")
	switch {
	case code == 0:
		if rec := tn.get(t, g.run); rec.Generation != 2 {
			t.Fatalf("suspend of the incarnation: record %s, want generation 2", rec)
		}
		return
	case !needsGenerations(code, stdout, stderr):
		t.Fatalf("suspend of incarnation %s on %s: exit %d\n%s\n%s", id, d.Name, code, stdout, stderr)
	}
	t.Logf("the CLI cannot suspend an incarnation yet (exit 2, needs generations): recording generation 2 with ledger.Suspended through the Go API")
	c, err := d.Client.LoadContainer(d.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(d.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := tn.l.Suspended(ctx(t), ledger.SuspendRequest{
		Run: g.run, Generation: 2, Ref: digest.FromString("generation 2 of " + g.run),
		Container: f.holder(d, id), Created: info.CreatedAt, Fence: fence,
	})
	if err != nil || rec.Generation != 2 || rec.State != ledger.StateSuspended {
		t.Fatalf("Suspended generation 2 by %s: %s, %v", id, rec, err)
	}
}

// cannotSuspend checks that incarnation id on d, holding fence old, can
// no longer record a generation: the ledger refuses Suspended with that
// fence (8), and so does `suspend` of the container once the CLI can
// suspend an incarnation (until then that part skips, naming what it
// waits for). The record must be unchanged.
func (f *fleet) cannotSuspend(t *testing.T, tn *tenant, g *gen, d *harness.Daemon, id string, old uint64) {
	t.Helper()
	before := tn.get(t, g.run)
	_, err := tn.l.Suspended(ctx(t), ledger.SuspendRequest{
		Run: g.run, Generation: before.Generation + 1, Ref: digest.FromString("generation from fence " + strconv.FormatUint(old, 10)),
		Container: f.holder(d, id), Created: time.Now(), Fence: old,
	})
	if !errors.Is(errdef.Class(err), errdef.ErrClaimConflict) {
		t.Errorf("Suspended by %s with the old fence %d: %v; want claim-conflict", id, old, err)
	}
	t.Run("suspend through the CLI", func(t *testing.T) {
		code, stdout, stderr := tn.run(t, d, "suspend", "--container", id, "--config", f.cfg, "--key", f.key,
			"--out", f.dir+"/"+g.run+"/fenced-out.ref.json")
		switch {
		case needsGenerations(code, stdout, stderr):
			t.Skip("waits for later generations of suspend (suspending an incarnation is exit 2, needs generations, on this branch); the ledger's refusal of the old fence is checked above")
		case code != 8:
			t.Errorf("suspend of the fenced-out incarnation %s (fence %d): exit %d, want 8\n%s\n%s", id, old, code, stdout, stderr)
		}
	})
	if after := tn.get(t, g.run); after.Fence != before.Fence || after.State != before.State || after.Generation != before.Generation {
		t.Errorf("the refused suspends changed the record: %s → %s", before, after)
	}
}

// testFencing: A's resumer is stopped (SIGSTOP) right after its claim,
// past the claim TTL; B claims and resumes; A, continued, finds its claim
// lost: its Live is refused, it deletes its container and exits 8. An
// incarnation of the lost claim's fence cannot suspend.
func (f *fleet) testFencing(t *testing.T) {
	tn := f.tenant(t, nil)
	g := f.generation(t, tn, "fencing-1")
	idA, idB := "fa-"+g.run, "fb-"+g.run
	pa := f.startResume(t, tn, f.a, g, idA, pauseEnv("resume-claimed"), "--ledger-claim-ttl", "2s")
	pa.waitPause(t, "resume-claimed")
	rec := tn.get(t, g.run)
	if rec.State != ledger.StateResuming || rec.Holder == nil || rec.Holder.Container != f.holder(f.a, idA) || rec.Holder.PID != pa.cmd.Process.Pid {
		t.Fatalf("record after A's claim: %s; want resuming held by A's resumer pid %d", rec, pa.cmd.Process.Pid)
	}
	fenceA := rec.Fence
	pa.signal(t, syscall.SIGSTOP)
	took := tn.waitClaimExpired(t, g.run, 15*time.Second)
	t.Logf("A's claim (fence %d) expired %s after SIGSTOP", fenceA, within(took))

	code, v := f.resume(t, tn, f.b, g, idB)
	if code != 0 || v.Fence != fenceA+1 {
		t.Fatalf("resume on B after A's claim expired: exit %d fence %d (A's %d): %s", code, v.Fence, fenceA, failDetail(v))
	}
	if d := v.Check(resume.CheckClaim).Detail; !strings.Contains(d, "replaced the gone resuming holder") || !strings.Contains(d, idA) {
		t.Errorf("B's claim detail does not name A's gone claim: %s", d)
	}
	f.wantLive(t, tn, g.run, v.Fence, f.b, idB)

	pa.signal(t, syscall.SIGCONT)
	code, va := pa.verdict(t)
	if code != 8 || va.Class != resume.ClassClaimConflict || va.Materialize == nil || !strings.Contains(va.Materialize.Detail, "container "+idA+" deleted") {
		t.Errorf("A continued: exit %d %s; materialize %+v; want 8 with its container deleted", code, va.Class, va.Materialize)
	}
	if va.Container != "" {
		t.Errorf("A's verdict names container %q", va.Container)
	}
	if containers(t, f.a)[idA] {
		t.Errorf("A's fenced-out container %s is still there", idA)
	}
	if a, b := f.incarnationsOn(t, g.run); a != 0 || b != 1 {
		t.Errorf("incarnations A %d B %d; want 0 and 1", a, b)
	}
	f.wantLive(t, tn, g.run, v.Fence, f.b, idB)
	// The lost claim's fence records nothing (its container is gone; the
	// ledger refuses the fence whoever names it).
	_, err := tn.l.Suspended(ctx(t), ledger.SuspendRequest{
		Run: g.run, Generation: 2, Ref: digest.FromString("from the lost claim"),
		Container: f.holder(f.a, idA), Created: time.Now(), Fence: fenceA,
	})
	if !errors.Is(errdef.Class(err), errdef.ErrClaimConflict) {
		t.Errorf("Suspended with the lost claim's fence %d: %v; want claim-conflict", fenceA, err)
	}
}

// testSIGKILL: a resumer killed while it holds the claim: another host is
// refused (8) while the claim's lease lives, and claims the run once the
// TTL has passed.
func (f *fleet) testSIGKILL(t *testing.T) {
	tn := f.tenant(t, nil)
	g := f.generation(t, tn, "sigkill-1")
	idA, idB := "fa-"+g.run, "fb-"+g.run
	const ttl = 6 * time.Second
	pa := f.startResume(t, tn, f.a, g, idA, pauseEnv("resume-claimed"), "--ledger-claim-ttl", ttl.String())
	pa.waitPause(t, "resume-claimed")
	pa.signal(t, syscall.SIGKILL)
	killed := time.Now()
	if code, _, _ := pa.wait(t); code != -1 {
		t.Fatalf("the resumer was not ended by SIGKILL: exit %d", code)
	}
	code, v := f.resume(t, tn, f.b, g, idB)
	if time.Since(killed) < ttl/2 && (code != 8 || !strings.Contains(failDetail(v), idA)) {
		t.Errorf("resume on B while the killed resumer's claim lives: exit %d %s; want 8 naming %s", code, failDetail(v), idA)
	}
	if code == 0 {
		t.Fatalf("resume on B won %s after the kill, before the claim's TTL %s", within(time.Since(killed)), ttl)
	}
	took := tn.waitClaimExpired(t, g.run, ttl+10*time.Second)
	t.Logf("the killed resumer's claim expired %s after the kill (TTL %s)", within(time.Since(killed)), ttl)
	_ = took
	code, v = f.resume(t, tn, f.b, g, idB)
	if code != 0 || !strings.Contains(v.Check(resume.CheckClaim).Detail, "replaced the gone resuming holder") {
		t.Fatalf("resume on B after the TTL: exit %d %s; claim %q", code, failDetail(v), v.Check(resume.CheckClaim).Detail)
	}
	f.wantLive(t, tn, g.run, v.Fence, f.b, idB)
	if a, b := f.incarnationsOn(t, g.run); a != 0 || b != 1 {
		t.Errorf("incarnations A %d B %d; want 0 and 1", a, b)
	}
}

// testTakeOver: A holds the run live and its host is lost (its daemon
// stopped); B without --take-over is refused (8), with --take-over resumes
// (the verdict's takenOver names A's incarnation). A comes back: its
// incarnation, fenced out, cannot suspend.
func (f *fleet) testTakeOver(t *testing.T) {
	tn := f.tenant(t, nil)
	g := f.generation(t, tn, "takeover-1")
	idA, idB := "fa-"+g.run, "fb-"+g.run
	code, v := f.resume(t, tn, f.a, g, idA, "--start")
	if code != 0 || v.Pid == 0 {
		t.Fatalf("resume --start on A: exit %d pid %d %s", code, v.Pid, failDetail(v))
	}
	fenceA := v.Fence
	code, v = f.resume(t, tn, f.b, g, idB)
	if code != 8 || !strings.Contains(failDetail(v), idA) || !strings.Contains(failDetail(v), f.hostA) {
		t.Errorf("resume on B of a run live on A: exit %d %s; want 8 naming %s on host %s", code, failDetail(v), idA, f.hostA)
	}

	f.a.Stop(t) // host A is lost
	restarted := false
	defer func() {
		if !restarted { // a failure below must not leave A down for the next subtests
			f.a.Restart(t)
		}
	}()
	code, v = f.resume(t, tn, f.b, g, idB, "--take-over")
	if code != 0 {
		t.Fatalf("resume --take-over on B: exit %d %s", code, failDetail(v))
	}
	want := resume.TakenOver{Host: f.hostA, Namespace: f.a.Namespace, Container: idA, Fence: fenceA}
	if v.TakenOver == nil || *v.TakenOver != want || v.Fence != fenceA+1 {
		t.Errorf("take-over verdict: takenOver %+v fence %d; want %+v and fence %d", v.TakenOver, v.Fence, want, fenceA+1)
	}
	if d := v.Check(resume.CheckClaim).Detail; !strings.Contains(d, "operator's decision") || !strings.Contains(d, "not on this host") {
		t.Errorf("take-over claim detail: %s", d)
	}
	f.wantLive(t, tn, g.run, v.Fence, f.b, idB)

	f.a.Restart(t) // A comes back with its old incarnation
	restarted = true
	if fenceLabel(t, f.a, idA) != strconv.FormatUint(fenceA, 10) {
		t.Fatalf("A's old incarnation %s: fence label %q, want %d", idA, fenceLabel(t, f.a, idA), fenceA)
	}
	f.cannotSuspend(t, tn, g, f.a, idA, fenceA)
	f.wantLive(t, tn, g.run, v.Fence, f.b, idB)
}

// testRunsDiscard: `runs` on either host lists the fleet's records, the
// same on both; `discard` is fleet-wide: a run live on A is refused on B
// without --force (8), discarded from B with --force (a tombstone: A's
// generation can never resume again, 9), and A's fenced-out incarnation is
// deleted by a discard on A once its task is gone.
func (f *fleet) testRunsDiscard(t *testing.T) {
	tn := f.tenant(t, nil)
	g1 := f.generation(t, tn, "runs-1")
	g2 := f.generation(t, tn, "runs-2")
	idA := "fa-" + g1.run
	if code, v := f.resume(t, tn, f.a, g1, idA); code != 0 {
		t.Fatalf("resume on A: exit %d %s", code, failDetail(v))
	}
	var onA, onB runsJSON
	tn.must(t, f.a, &onA, "runs")
	tn.must(t, f.b, &onB, "runs")
	if len(onA.Runs) != 2 || onA.Runs[0].Run != g1.run || onA.Runs[1].Run != g2.run {
		t.Fatalf("runs on A: %+v; want %s and %s", onA.Runs, g1.run, g2.run)
	}
	if fmt.Sprint(onA.Runs) != fmt.Sprint(onB.Runs) {
		t.Errorf("runs differ between the hosts:\nA: %+v\nB: %+v", onA.Runs, onB.Runs)
	}
	r1, r2 := onA.Runs[0], onA.Runs[1]
	if r1.State != ledger.StateLive || r1.Holder == nil || r1.Holder.Container != f.holder(f.a, idA) || r1.Ref != g1.ref {
		t.Errorf("runs: %s: %s; want live held by A's %s", g1.run, r1, idA)
	}
	if r2.State != ledger.StateSuspended || r2.Generation != 1 || r2.Ref != g2.ref || r2.SuspendedBy == nil {
		t.Errorf("runs: %s: %s; want suspended at generation 1, suspended by the origin", g2.run, r2)
	}
	// The text listing names the holder and its host.
	code, text, _ := startProc(t, nil, append([]string{"--address", f.b.Address, "--namespace", f.b.Namespace, "runs"}, tn.flags...)...).wait(t)
	if code != 0 || !strings.Contains(string(text), idA+"@"+f.hostA) || !strings.Contains(string(text), g2.run) {
		t.Errorf("runs (text) on B: exit %d\n%s", code, text)
	}

	if code, stdout, _ := tn.run(t, f.b, "discard", "--run", g1.run); code != 8 {
		t.Errorf("discard on B of a run live on A, without --force: exit %d %s; want 8", code, stdout)
	}
	var res resume.DiscardResult
	tn.must(t, f.b, &res, "discard", "--run", g1.run, "--force")
	if res.State != ledger.StateDiscarded {
		t.Errorf("discard --force on B: %+v", res)
	}
	if !containers(t, f.a)[idA] {
		t.Errorf("a discard on B deleted A's incarnation")
	}
	if code, v := f.resume(t, tn, f.a, g1, "fa2-"+g1.run); code != 9 || !strings.Contains(failDetail(v), "discarded") {
		t.Errorf("resume of the discarded run on A: exit %d %s; want 9", code, failDetail(v))
	}
	tn.must(t, f.a, &res, "discard", "--run", g1.run)
	if res.State != ledger.StateDiscarded || !strings.Contains(strings.Join(res.Deleted, ","), idA) {
		t.Errorf("discard on A: %+v; want A's incarnation %s deleted", res, idA)
	}
	tn.must(t, f.a, &onA, "runs", "--run", g1.run)
	if len(onA.Runs) != 1 || onA.Runs[0].State != ledger.StateDiscarded {
		t.Errorf("runs --run %s after the discard: %+v", g1.run, onA.Runs)
	}
}

// leaderRounds is how many rounds testLeaderKilled runs.
const leaderRounds = 6

// testLeaderKilled: races as in testRace while the etcd leader is killed
// (SIGKILL) as the two claims are made: both resumers are held at the
// fault point resume-judged (checks passed, Claim not yet run), then
// continued together, and the leader is killed at a random moment from
// 20 ms before to 30 ms after; it is restarted after each round. Still
// exactly one winner per round: the ledger rides over the election.
func (f *fleet) testLeaderKilled(t *testing.T) {
	tn := f.tenant(t, nil)
	defer f.wholeCluster(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 17))
	t.Logf("seed %d", seed)
	wins := map[string]int{}
	for i := range leaderRounds {
		g := f.generation(t, tn, fmt.Sprintf("leader-%d", i))
		leader := f.etcd.WaitLeader(t)
		offset := time.Duration(rng.IntN(50)-20) * time.Millisecond
		start := time.Now()
		w, _ := f.race(t, tn, g, pauseEnv("resume-judged"), func(ps [2]*proc) {
			for _, p := range ps {
				p.waitPause(t, "resume-judged")
			}
			if offset < 0 {
				f.etcd.Kill(t, leader)
				time.Sleep(-offset)
			}
			for _, p := range ps {
				p.signal(t, syscall.SIGCONT)
			}
			if offset >= 0 {
				time.Sleep(offset)
				f.etcd.Kill(t, leader)
			}
		})
		t.Logf("round %d: leader m%d killed %s the claims; winner %s; %s", i, leader, offsetWord(offset), w.Name, within(time.Since(start)))
		wins[w.Name]++
		f.etcd.Restart(t, leader)
		f.discardEverywhere(t, tn, g.run, w)
	}
	t.Logf("%d rounds with the leader killed: wins %v", leaderRounds, wins)
}

// wholeCluster starts every member of the fleet's cluster that is not
// running and waits until all serve: deferred by the subtests that kill or
// stop members, so that a failure leaves the next subtests a whole cluster.
func (f *fleet) wholeCluster(t *testing.T) {
	t.Helper()
	down := false
	for i, m := range f.etcd.Members {
		if !m.Running() {
			f.etcd.StartMember(t, i)
			down = true
		}
	}
	if down {
		f.etcd.WaitServing(t)
	}
}

func offsetWord(d time.Duration) string {
	if d < 0 {
		return (-d).String() + " before"
	}
	return d.String() + " after"
}

// testQuorumLost: with 2 of 3 members stopped, resume fails closed: exit 1
// within --ledger-timeout naming the endpoints, nothing created; with the
// members back, the same generation resumes.
func (f *fleet) testQuorumLost(t *testing.T) {
	tn := f.tenant(t, nil)
	g := f.generation(t, tn, "quorum-1")
	id := "fa-" + g.run
	defer f.wholeCluster(t)
	f.etcd.Stop(t, 0)
	f.etcd.Stop(t, 1)
	const timeout = 3 * time.Second
	start := time.Now()
	code, v := f.resume(t, tn, f.a, g, id, "--ledger-timeout", timeout.String())
	took := time.Since(start)
	t.Logf("resume without quorum: exit %d after %s: %s", code, within(took), failDetail(v))
	if code != 1 || v.Class != resume.ClassInternal {
		t.Errorf("resume without quorum: exit %d %s; want 1", code, v.Class)
	}
	for _, ep := range f.etcd.Endpoints() {
		if !strings.Contains(failDetail(v), ep) {
			t.Errorf("the failure does not name endpoint %s: %s", ep, failDetail(v))
		}
	}
	if took > timeout+5*time.Second {
		t.Errorf("resume without quorum took %s with --ledger-timeout %s", within(took), timeout)
	}
	if containers(t, f.a)[id] || incarnations(t, f.a, g.run) != 0 {
		t.Errorf("a container was created without quorum")
	}
	if code, stdout, _ := tn.run(t, f.a, "runs", "--ledger-timeout", timeout.String()); code != 1 {
		t.Errorf("runs without quorum: exit %d %s; want 1", code, stdout)
	}
	f.etcd.StartMember(t, 0)
	f.etcd.StartMember(t, 1)
	f.etcd.WaitServing(t)
	code, v = f.resume(t, tn, f.a, g, id)
	if code != 0 || v.Generation != 1 {
		t.Fatalf("resume with the members back: exit %d %s", code, failDetail(v))
	}
	f.wantLive(t, tn, g.run, v.Fence, f.a, id)
}

// testTLS: a fleet on a cluster that requires client certificates: a
// resume without the right certificate is refused with a clear error
// (exit 1) and creates nothing; with it, the run resumes.
func (f *fleet) testTLS(t *testing.T) {
	c := etcdharness.StartTLS(t)
	tn := f.tenant(t, c)
	g := f.generation(t, tn, "tls-1")
	id := "fa-" + g.run
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"a client certificate of another CA", []string{"--ledger-cacert", c.TLS.CA, "--ledger-cert", c.TLS.OtherClientCert, "--ledger-key", c.TLS.OtherClientKey}, "refused this TLS client"},
		{"no client certificate", []string{"--ledger-cacert", c.TLS.CA}, "refused this TLS client"},
		{"no TLS", nil, "TLS"},
	} {
		bad := *tn
		bad.flags = append([]string{"--ledger", tn.url, "--ledger-timeout", "3s"}, tc.flags...)
		code, v := f.resume(t, &bad, f.a, g, id)
		t.Logf("%s: exit %d: %s", tc.name, code, failDetail(v))
		if code != 1 || v.Class != resume.ClassInternal || !strings.Contains(failDetail(v), tc.want) || !strings.Contains(failDetail(v), c.Endpoints()[0]) {
			t.Errorf("%s: exit %d %s %s; want 1 saying %q and naming the endpoints", tc.name, code, v.Class, failDetail(v), tc.want)
		}
		if containers(t, f.a)[id] {
			t.Fatalf("%s: a container was created", tc.name)
		}
	}
	if rec := tn.get(t, g.run); rec.State != ledger.StateSuspended || rec.Fence != 0 {
		t.Errorf("the refused clients changed the record: %s", rec)
	}
	code, v := f.resume(t, tn, f.a, g, id)
	if code != 0 {
		t.Fatalf("resume with the cluster's client certificate: exit %d %s", code, failDetail(v))
	}
	f.wantLive(t, tn, g.run, v.Fence, f.a, id)
}
