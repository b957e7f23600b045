package resume_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	lfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// runHost is an in-memory resume.RunHost: the four methods Discard calls
// (the other methods of its roles are the nil host.Host's, never called).
type runHost struct {
	host.Host
	leases     map[string]bool
	containers map[string]host.ContainerState
	legacy     *host.LegacyClaim
}

func (h *runHost) DeleteLease(_ context.Context, id string) error {
	if !h.leases[id] {
		return fmt.Errorf("lease %s: %w", id, errdefs.ErrNotFound)
	}
	delete(h.leases, id)
	return nil
}

func (h *runHost) RunContainers(_ context.Context, run string) ([]host.ContainerState, error) {
	var out []host.ContainerState
	for _, c := range h.containers {
		if c.Labels[snapshot.LabelRun] == run {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b host.ContainerState) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out, nil
}

func (h *runHost) LegacyClaim(context.Context, string) (*host.LegacyClaim, error) {
	return h.legacy, nil
}

func (h *runHost) DeleteContainer(_ context.Context, id string) error {
	delete(h.containers, id)
	return nil
}

// TestDiscard: a tombstone first (a live run only with force), then with
// purge the purged remainder; then the run lease, the previous release's
// claim lease and the stopped incarnations go, a running one is kept, the
// runtime's own container is left.
func TestDiscard(t *testing.T) {
	ctx := context.Background()
	l := lfake.New()
	inc := map[string]string{snapshot.LabelRun: "r", snapshot.LabelGeneration: "1"}
	h := &runHost{
		leases: map[string]bool{snapshot.RunLease("r"): true, snapshot.ClaimLease("r"): true},
		containers: map[string]host.ContainerState{
			"stopped": {ID: "stopped", Labels: inc},
			"running": {ID: "running", Labels: inc, Running: true},
			"old":     {ID: "old", Labels: map[string]string{snapshot.LabelRun: "r"}},
			"own":     {ID: "own", Labels: map[string]string{snapshot.LabelRun: "r"}},
		},
		legacy: &host.LegacyClaim{Lease: snapshot.ClaimLease("r"), Container: "old"},
	}
	c := ledger.Container{Host: "h", Namespace: "ns", ID: "running"}
	if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: "r", Generation: 1, Ref: digest.FromString("g1"), Container: c, Keep: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := resume.Discard(ctx, l, h, "r", resume.DiscardOptions{}); !errors.Is(err, errdef.ErrClaimConflict) || len(h.containers) != 4 || len(h.leases) != 2 {
		t.Fatalf("discard of a live run without force: %v; host %v", err, h)
	}
	res, err := resume.Discard(ctx, l, h, "r", resume.DiscardOptions{Force: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"old", "stopped", snapshot.RunLease("r"), snapshot.ClaimLease("r")}
	if res.Run != "r" || res.State != ledger.StatePurged || !slices.Equal(res.Deleted, want) || !slices.Equal(res.Kept, []string{"running"}) {
		t.Errorf("result %+v, want purged, deleted %v, kept running", res, want)
	}
	if _, ok := h.containers["own"]; !ok {
		t.Error("the runtime's own container was deleted")
	}
	if _, err := resume.Discard(ctx, l, h, "R/", resume.DiscardOptions{}); !errors.Is(err, snapshot.ErrInvalidRun) {
		t.Errorf("invalid run id: %v", err)
	}
}
