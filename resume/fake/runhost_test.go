package fake_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/resume/fake"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// TestMaterializerRunHost: the fake Materializer is the RunHost of
// resume.Discard: the run's containers sorted with their task state, its
// run lease (stored refs) and `/1` claim lease deleted once, others not
// found.
func TestMaterializerRunHost(t *testing.T) {
	ctx := context.Background()
	f, err := fake.NewFacts(snapshot.Host{ID: "h", IDSource: snapshot.IDSourceIntrospection, Platform: "linux/amd64"})
	if err != nil {
		t.Fatal(err)
	}
	m := fake.NewMaterializer(f)
	var h resume.RunHost = m
	f.PutContainer("b", map[string]string{snapshot.LabelRun: "r"}, 7)
	f.PutContainer("a", map[string]string{snapshot.LabelRun: "r"}, 0)
	f.PutContainer("c", map[string]string{snapshot.LabelRun: "other"}, 0)
	cs, err := h.RunContainers(ctx, "r")
	if err != nil || len(cs) != 2 || cs[0].ID != "a" || cs[0].Running || cs[1].ID != "b" || !cs[1].Running {
		t.Fatalf("RunContainers = %+v, %v", cs, err)
	}
	if err := m.StoreRef(ctx, "r", []byte("ref")); err != nil {
		t.Fatal(err)
	}
	f.SetLegacyClaim("r", "a")
	if lc, err := h.LegacyClaim(ctx, "r"); err != nil || lc == nil || lc.Container != "a" {
		t.Fatalf("LegacyClaim = %+v, %v", lc, err)
	}
	for _, id := range []string{snapshot.RunLease("r"), snapshot.ClaimLease("r")} {
		if err := h.DeleteLease(ctx, id); err != nil {
			t.Errorf("DeleteLease(%s) = %v", id, err)
		}
		if err := h.DeleteLease(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("DeleteLease(%s) again = %v, want not found", id, err)
		}
	}
	if refs := f.Refs("r"); len(refs) != 0 {
		t.Errorf("refs left: %v", refs)
	}
	if err := h.DeleteContainer(ctx, "a"); err != nil || !slices.Equal(m.Containers(), []string{"b", "c"}) {
		t.Errorf("DeleteContainer: %v, left %v", err, m.Containers())
	}
}
