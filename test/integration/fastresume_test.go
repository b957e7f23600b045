package integration

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// The tests of docs/design.md "Resume on the same host without
// extracting" against a real daemon: a suspend commits the container's
// snapshot as its generation's chain snapshot, held by the run lease, and
// a resume on the same host uses it as it is — no extraction snapshot is
// made, the chain snapshot keeps its creation time, no blob is hashed —
// or, when it is gone, extracts and verifies as before.

// chainName is the chain snapshot name of ref's file system.
func chainName(ref *snapshot.Ref) string {
	chain := slices.Clone(ref.Base.DiffIDs)
	for _, l := range ref.Layers {
		chain = append(chain, l.DiffID)
	}
	return identity.ChainID(chain).String()
}

// chainInfo stats the chain snapshot of ref; ok is false when it is absent.
func chainInfo(t testing.TB, d *harness.Daemon, ref *snapshot.Ref) (snapshots.Info, bool) {
	t.Helper()
	info, err := d.Client.SnapshotService("overlayfs").Stat(d.Context(t), chainName(ref))
	if errdefs.IsNotFound(err) {
		return info, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return info, true
}

// wantChain checks the chain snapshot of ref as a suspend commits it:
// committed, on the chain of its layers but the last, labelled with the
// run, the run UID and the layers' diffIDs, held by the run lease.
func wantChain(t testing.TB, d *harness.Daemon, ref *snapshot.Ref) snapshots.Info {
	t.Helper()
	info, ok := chainInfo(t, d, ref)
	if !ok {
		t.Fatalf("generation %d: no chain snapshot %s", ref.Generation, chainName(ref))
	}
	below := *ref
	below.Layers = ref.Layers[:len(ref.Layers)-1]
	ids := make([]string, len(ref.Layers))
	for i, l := range ref.Layers {
		ids[i] = l.DiffID.String()
	}
	if info.Kind != snapshots.KindCommitted || info.Parent != chainName(&below) || info.Labels[snapshot.LabelRun] != ref.Run ||
		info.Labels[snapshot.LabelRunUID] != ref.RunUID || info.Labels[host.LabelChainDiffIDs] != strings.Join(ids, ",") {
		t.Fatalf("generation %d: chain snapshot %+v", ref.Generation, info)
	}
	if !leaseHoldsSnapshot(t, d, snapshot.RunLease(ref.Run), info.Name) {
		t.Fatalf("generation %d: the run lease does not hold chain snapshot %s", ref.Generation, info.Name)
	}
	return info
}

// leaseHoldsSnapshot reports whether the lease holds the overlayfs
// snapshot name.
func leaseHoldsSnapshot(t testing.TB, d *harness.Daemon, lease, name string) bool {
	t.Helper()
	rs, err := d.Client.LeasesService().ListResources(d.Context(t), leases.Lease{ID: lease})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(rs, leases.Resource{ID: name, Type: "snapshots/overlayfs"})
}

// resumeExtracting resumes refPath into id and reports whether it
// extracted: the snapshots it added beside id's own, and whether the
// verdict says the layers were verified (hashed) rather than used as they
// are.
func resumeExtracting(t *testing.T, r *genRig, refPath, id string) (added []string, verified bool) {
	t.Helper()
	before := snapshotNames(t, r.d)
	v := r.resume(t, refPath, id)
	for name := range snapshotNames(t, r.d) {
		if !before[name] && name != id {
			added = append(added, name)
		}
	}
	detail := v.Materialize.Detail
	reused := strings.Contains(detail, "used as it is")
	if reused == strings.Contains(detail, "verified") {
		t.Fatalf("materialize detail %q says neither or both", detail)
	}
	return added, !reused
}

// TestSameHostResumeNoExtract: generation 1 of a runtime container, then
// generation 2 of its incarnation, each resumed on the same host without
// extracting: the chain snapshot each suspend committed is used as it is
// (same creation time, no other snapshot made, the layer blobs not
// hashed), the incarnation's tree is exactly what was suspended, and the
// stopped runtime container keeps its rootfs on top of the chain snapshot.
func TestSameHostResumeNoExtract(t *testing.T) {
	r := newGenRig(t, "fastres")
	d := r.d
	const run = "fast-1"
	holder := scriptContainer(t, d, r.im.Name, "g1", idle)
	want := readTree(t, d, holder)
	work(t, d, holder, want, genWork(1)...)
	out1 := filepath.Join(r.env.dir, "fast.g1.json")
	_, ref1 := r.suspend(t, holder, run, out1)
	info1 := wantChain(t, d, ref1)

	// The stopped runtime container: a new active snapshot under its key
	// on the chain snapshot, with the same tree.
	st, err := d.Client.SnapshotService("overlayfs").Stat(d.Context(t), holder)
	if err != nil || st.Kind != snapshots.KindActive || st.Parent != info1.Name {
		t.Fatalf("the suspended container's snapshot: %+v, %v; want active on %s", st, err, info1.Name)
	}
	startWaiting(t, d, holder)
	sameTree(t, "the suspended runtime container", walkTree(t, d, holder), want)
	stopTask(t, d, holder)

	inc := d.ID("g2")
	added, verified := resumeExtracting(t, r, out1, inc)
	if len(added) != 0 || verified {
		t.Fatalf("same-host resume of generation 1: snapshots %v added, verified %t; want none, not hashed", added, verified)
	}
	if again, _ := chainInfo(t, d, ref1); !again.Created.Equal(info1.Created) {
		t.Fatalf("chain snapshot created %v, then %v", info1.Created, again.Created)
	}
	startWaiting(t, d, inc)
	sameTree(t, "incarnation of generation 1", walkTree(t, d, inc), want)
	work(t, d, inc, want, genWork(2)...)

	out2 := filepath.Join(r.env.dir, "fast.g2.json")
	_, ref2 := r.suspend(t, inc, "", out2)
	info2 := wantChain(t, d, ref2)
	if !r.gone(t, inc) {
		t.Fatalf("incarnation %s was not deleted", inc)
	}
	if _, err := d.Client.SnapshotService("overlayfs").Stat(d.Context(t), inc); !errdefs.IsNotFound(err) {
		t.Fatalf("the snapshot of %s: %v, want not found", inc, err)
	}
	inc3 := d.ID("g3")
	added, verified = resumeExtracting(t, r, out2, inc3)
	if len(added) != 0 || verified {
		t.Fatalf("same-host resume of generation 2: snapshots %v added, verified %t; want none, not hashed", added, verified)
	}
	if again, _ := chainInfo(t, d, ref2); !again.Created.Equal(info2.Created) {
		t.Fatalf("chain snapshot created %v, then %v", info2.Created, again.Created)
	}
	startWaiting(t, d, inc3)
	sameTree(t, "incarnation of generation 2", walkTree(t, d, inc3), want)
}

// TestSameHostResumeFallback: when the chain snapshot a suspend committed
// is gone (here removed by the test, as a garbage collection after a
// discard of the run's lease could), the resume verifies every layer and
// extracts it again, and the tree is the same; the extracted chain
// snapshot is then held by the run lease.
func TestSameHostResumeFallback(t *testing.T) {
	r := newGenRig(t, "fastfb")
	d := r.d
	const run = "fastfb-1"
	holder := scriptContainer(t, d, r.im.Name, "g1", idle)
	want := readTree(t, d, holder)
	work(t, d, holder, want, genWork(1)...)
	out1 := filepath.Join(r.env.dir, "fastfb.g1.json")
	_, ref1 := r.suspend(t, holder, run, out1)
	info := wantChain(t, d, ref1)

	// The chain snapshot has a child (the stopped container's): remove
	// the container first.
	ctx := d.Context(t)
	c, err := d.Client.LoadContainer(ctx, holder)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
		t.Fatal(err)
	}
	if err := d.Client.SnapshotService("overlayfs").Remove(ctx, info.Name); err != nil {
		t.Fatalf("remove chain snapshot %s: %v", info.Name, err)
	}
	inc := d.ID("g2")
	added, verified := resumeExtracting(t, r, out1, inc)
	if !verified || len(added) == 0 {
		t.Fatalf("resume without the chain snapshot: snapshots %v added, verified %t; want the chain extracted and verified", added, verified)
	}
	again, ok := chainInfo(t, d, ref1)
	if !ok || !again.Created.After(info.Created) {
		t.Fatalf("chain snapshot after the fallback: %+v (%t), removed one created %v", again, ok, info.Created)
	}
	if !leaseHoldsSnapshot(t, d, snapshot.RunLease(run), again.Name) {
		t.Errorf("the run lease does not hold the extracted chain snapshot %s", again.Name)
	}
	startWaiting(t, d, inc)
	sameTree(t, "incarnation extracted again", walkTree(t, d, inc), want)
}

// stopTask kills and deletes container id's task.
func stopTask(t testing.TB, d *harness.Daemon, id string) {
	t.Helper()
	ctx := d.Context(t)
	c, err := d.Client.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Delete(ctx, client.WithProcessKill); err != nil {
		t.Fatal(err)
	}
}
