package resume_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// commitFixtureChain commits, as this host's suspend would, the chain
// snapshot of the fixture's ref (base + its layer) from a stopped
// container on the base, labelled with labels.
func commitFixtureChain(t *testing.T, fx *fixture, m *memhost.Machine, labels map[string]string) []digest.Digest {
	t.Helper()
	ctx := context.Background()
	m.AddContainer(memhost.Container{ID: "src", Image: testImage})
	c, err := m.Container(ctx, "src")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateLease(ctx, snapshot.RunLease(testRun), nil); err != nil {
		t.Fatal(err)
	}
	chain := append(slices.Clone(fx.ref.Base.DiffIDs), fx.ref.Layers[0].DiffID)
	if ok, err := m.CommitChain(ctx, snapshot.RunLease(testRun), c, chain, labels); err != nil || !ok {
		t.Fatalf("CommitChain: %t, %v", ok, err)
	}
	return chain
}

func suspendLabels(fx *fixture) map[string]string {
	return map[string]string{snapshot.LabelRun: testRun, snapshot.LabelRunUID: testRunUID, host.LabelChainDiffIDs: fx.ref.Layers[0].DiffID.String()}
}

// TestResumeUsesSameHostChain: the chain snapshot this host's suspend
// committed is used as it is: no layer blob is hashed (no CheckDiff; check
// 9 found it with its size) and the detail says so (docs/design.md
// "Resume on the same host without extracting").
func TestResumeUsesSameHostChain(t *testing.T) {
	fx, m := materializable(t, baseConfig)
	commitFixtureChain(t, fx, m, suspendLabels(fx))
	n := len(m.Ops())
	v := resumeWith(fx, m, resume.ResumeOptions{})
	wantVerdict(t, v, 0, "", "")
	if slices.Contains(m.Ops()[n:], memhost.OpCheckDiff) || !strings.Contains(v.Materialize.Detail, "used as it is") {
		t.Fatalf("operations %v, detail %q: want no CheckDiff and the chain snapshot used", m.Ops()[n:], v.Materialize.Detail)
	}
}

// TestResumeVerifiesWithoutSameHostChain: the layers are verified as
// before when the chain snapshot is gone (the fallback), labelled for
// another run UID.
func TestResumeVerifiesWithoutSameHostChain(t *testing.T) {
	for _, tc := range []string{"removed", "other run UID"} {
		t.Run(tc, func(t *testing.T) {
			fx, m := materializable(t, baseConfig)
			labels := suspendLabels(fx)
			if tc == "other run UID" {
				labels[snapshot.LabelRunUID] = "ruid:ffffffffffffffffffffffffffffffff"
			}
			chain := commitFixtureChain(t, fx, m, labels)
			if tc == "removed" {
				m.RemoveChain(chain)
			}
			n := len(m.Ops())
			v := resumeWith(fx, m, resume.ResumeOptions{})
			wantVerdict(t, v, 0, "", "")
			if !slices.Contains(m.Ops()[n:], memhost.OpCheckDiff) || !strings.Contains(v.Materialize.Detail, "verified") {
				t.Fatalf("operations %v, detail %q: want the layers verified", m.Ops()[n:], v.Materialize.Detail)
			}
		})
	}
}
