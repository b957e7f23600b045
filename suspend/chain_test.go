package suspend_test

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	ledgerfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// chainOf is ref's chain: base diffIDs + layers' diffIDs.
func chainOf(ref *snapshot.Ref) []digest.Digest {
	chain := slices.Clone(ref.Base.DiffIDs)
	for _, l := range ref.Layers {
		chain = append(chain, l.DiffID)
	}
	return chain
}

// wantChained checks that res committed the chain snapshot of its ref
// with suspend.ChainLabels.
func wantChained(t *testing.T, f *memhost.Machine, res *suspend.Result) {
	t.Helper()
	labels, err := f.ChainSnapshot(context.Background(), chainOf(res.Ref))
	if !res.Chained || err != nil || !maps.Equal(labels, suspend.ChainLabels(res.Ref)) {
		t.Fatalf("generation %d: chained %t, chain snapshot labels %v (%v), want %v", res.Ref.Generation, res.Chained, labels, err, suspend.ChainLabels(res.Ref))
	}
}

// TestSuspendCommitsChain: generation 1 of the runtime's container and
// generation 2 of its incarnation commit their snapshots as their chain
// snapshots (docs/design.md "Resume on the same host without
// extracting"); the runtime's container is then on it; --keep-running
// commits nothing.
func TestSuspendCommitsChain(t *testing.T) {
	f, e, l, res := laterFixture(t, `{"image":"busybox:1"}`)
	wantChained(t, f, res)
	if c := container(t, f, "Box-1"); c.ParentChainID != identity.ChainID(chainOf(res.Ref)).String() {
		t.Fatalf("the suspended container's snapshot is on %s, want the chain snapshot", c.ParentChainID)
	}
	res2, err := suspend.Run(context.Background(), f, l, e.req("inc", ""))
	if err != nil {
		t.Fatal(err)
	}
	wantChained(t, f, res2)
	if !res2.Deleted {
		t.Fatal("the incarnation was not deleted")
	}

	f, e = newFake(), newEnv(t, `{"image":"busybox:1"}`)
	req := e.req("Box-1", "kept")
	req.KeepRunning = true
	kept, err := suspend.Run(context.Background(), f, ledgerfake.New(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ChainSnapshot(context.Background(), chainOf(kept.Ref)); kept.Chained || !errdefs.IsNotFound(err) {
		t.Fatalf("kept running: chained %t, chain snapshot %v; want none", kept.Chained, err)
	}
}

// TestSuspendKeepGenerationsReleasesChain: a generation past
// --keep-generations releases its chain snapshot from the run lease with
// its layers; it stays while a later chain snapshot is on it, and goes
// with it.
func TestSuspendKeepGenerationsReleasesChain(t *testing.T) {
	f, e, l, res := laterFixture(t, `{"image":"busybox:1"}`)
	// The runtime's container (on generation 1's chain snapshot) goes.
	if err := f.DeleteContainer(context.Background(), "Box-1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e.out()); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	req := e.req("inc", "")
	req.KeepGenerations = 1
	n := len(f.Ops())
	res2, err := suspend.Run(context.Background(), f, l, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(f.Ops()[n:], memhost.OpReleaseChain) {
		t.Fatalf("operations %v: no ReleaseChain", f.Ops()[n:])
	}
	wantChained(t, f, res2)
	lease := snapshot.RunLease(res.Ref.Run)
	if held := f.LeaseChains(lease); !slices.Equal(held, []digest.Digest{identity.ChainID(chainOf(res2.Ref))}) {
		t.Fatalf("the run lease holds chain snapshots %v, want only generation 2's", held)
	}
	if _, err := f.ChainSnapshot(context.Background(), chainOf(res.Ref)); err != nil {
		t.Fatalf("generation 1's chain snapshot, under generation 2's: %v", err)
	}
	if err := f.ReleaseChain(context.Background(), lease, chainOf(res2.Ref)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ChainSnapshot(context.Background(), chainOf(res.Ref)); !errdefs.IsNotFound(err) {
		t.Fatalf("generation 1's chain snapshot, nothing on it: %v, want gone", err)
	}
}
