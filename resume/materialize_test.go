package resume_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/resume/fake"
	"github.com/sandbox-resume/sandbox-resume/resume/materializertest"
)

// materializable is a fixture whose rootfs diff is a real zstd layer.
func materializable(t *testing.T, config string) (*fixture, *fake.Materializer) {
	t.Helper()
	fx := newFixture(t, config)
	blob, d := materializertest.Diff(t, map[string]string{"data.txt": "hello\n"})
	fx.facts.PutBlob(blob)
	fx.ref.Layers[0] = d
	return fx, fake.NewMaterializer(fx.facts, fx.claims)
}

func resumeWith(fx *fixture, m resume.Materializer, opt resume.ResumeOptions) *resume.Verdict {
	return resume.Resume(context.Background(), fx.facts, fx.claims, m, fx.request(fx.signed()), opt)
}

func TestResumeMaterializes(t *testing.T) {
	config := strings.Replace(baseConfig, `"A": "1"`, `"A": "1", "HOMEISH": "${localEnv:HOME}"`, 1)
	fx, m := materializable(t, config)
	v := resumeWith(fx, m, resume.ResumeOptions{Start: true})
	wantVerdict(t, v, 0, "", "")
	id := resume.DefaultContainerID(testRun)
	if v.Container != id || v.Pid == 0 || v.Materialize == nil || v.Materialize.Result != resume.ResultPass {
		t.Fatalf("container %q pid %d materialize %+v", v.Container, v.Pid, v.Materialize)
	}
	if want := []string{"/containerEnv/HOMEISH", "/mounts/0", "/remoteUser"}; !slices.Equal(v.NotApplied, want) {
		t.Errorf("notApplied %v, want %v", v.NotApplied, want)
	}
	c, ok := m.Container(id)
	if !ok {
		t.Fatal("no container")
	}
	if !slices.Contains(c.Env, "A=1") || !slices.Contains(c.Env, "LANG=C.UTF-8") || slices.ContainsFunc(c.Env, func(e string) bool { return strings.HasPrefix(e, "HOMEISH=") }) {
		t.Errorf("env %v: want A and LANG, not HOMEISH", c.Env)
	}
	if c.Labels["io.sandbox-resume.run"] != testRun || c.Labels["io.sandbox-resume.manifest"] != fx.ref.Manifest {
		t.Errorf("labels %v", c.Labels)
	}
	// The claim remains: a second resume is 8 naming the holder's container.
	v = resumeWith(fx, m, resume.ResumeOptions{Container: "other"})
	wantVerdict(t, v, 8, resume.ClassClaimConflict, resume.CheckClaim)
	if !strings.Contains(v.Failed().Detail, id) {
		t.Errorf("detail %q does not name %s", v.Failed().Detail, id)
	}
	if slices.Contains(m.Containers(), "other") {
		t.Error("the refused resume created a container")
	}
	// Decide (--check) creates nothing and also sees the claim.
	wantVerdict(t, fx.decide(), 8, resume.ClassClaimConflict, resume.CheckClaim)
}

func TestResumeReleasesClaimOnFailure(t *testing.T) {
	fx, m := materializable(t, baseConfig)
	good := fx.ref.Layers[0]
	fx.ref.Layers[0].DiffID = digest.FromString("wrong")
	v := resumeWith(fx, m, resume.ResumeOptions{})
	if v.ExitCode != 7 || v.Class != resume.ClassSnapshotMissing || v.Container != "" || v.Materialize == nil || v.Materialize.Result != resume.ResultFail {
		t.Fatalf("wrong diffID: %s", dump(v))
	}
	if c, _ := fx.claims.ClaimHolder(context.Background(), testRun); c != nil {
		t.Fatalf("claim kept after a failed materialization: %+v", c)
	}
	if len(m.Containers()) != 0 {
		t.Fatalf("containers %v", m.Containers())
	}
	// An existing container id is 8 and releases the claim too.
	fx.ref.Layers[0] = good
	first := resumeWith(fx, m, resume.ResumeOptions{Container: "taken"})
	wantVerdict(t, first, 0, "", "")
	fx.claims.DeleteClaim(testRun) // as discard would, keeping the container
	v = resumeWith(fx, m, resume.ResumeOptions{Container: "taken"})
	if v.ExitCode != 8 || v.Materialize == nil || !strings.Contains(v.Materialize.Detail, "taken") {
		t.Fatalf("existing container id: %s", dump(v))
	}
	if c, _ := fx.claims.ClaimHolder(context.Background(), testRun); c != nil {
		t.Fatalf("claim kept after an existing container id: %+v", c)
	}
}

func TestResumeTakesOverStaleClaim(t *testing.T) {
	fx, m := materializable(t, baseConfig)
	h, err := resume.Holder("gone", testHostID)
	if err != nil {
		t.Fatal(err)
	}
	h.StartTime += "0"
	fx.claims.SetClaim(testRun, h) // ContainerExists and ProcessAlive false: stale
	v := resumeWith(fx, m, resume.ResumeOptions{})
	wantVerdict(t, v, 0, "", "")
	if !strings.Contains(v.Check(resume.CheckClaim).Detail, "took over") {
		t.Errorf("claim detail %q", v.Check(resume.CheckClaim).Detail)
	}
	// A live holder without a container (still materializing) is kept.
	fx2, m2 := materializable(t, baseConfig)
	live, err := resume.Holder("busy", testHostID)
	if err != nil {
		t.Fatal(err)
	}
	live.ProcessAlive = true
	fx2.claims.SetClaim(testRun, live)
	wantVerdict(t, resumeWith(fx2, m2, resume.ResumeOptions{}), 8, resume.ClassClaimConflict, resume.CheckClaim)
}
