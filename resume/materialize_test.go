package resume_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/host/hosttest"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// materializable is a fixture whose rootfs diff is a real zstd layer.
func materializable(t *testing.T, config string) (*fixture, *memhost.Machine) {
	t.Helper()
	fx := newFixture(t, config)
	blob, d := hosttest.Diff(t, map[string]string{"data.txt": "hello\n"})
	fx.facts.PutBlob(blob)
	fx.ref.Layers[0] = d
	return fx, fx.facts
}

func resumeWith(fx *fixture, m resume.Materializer, opt resume.ResumeOptions) *resume.Verdict {
	return resume.Resume(context.Background(), fx.facts, fx.ledger, m, fx.request(fx.signed()), opt)
}

// record returns the run's ledger record (nil when there is none).
func (fx *fixture) record() *ledger.Record {
	fx.t.Helper()
	r, err := fx.ledger.Get(context.Background(), testRun)
	if err != nil {
		return nil
	}
	return &r
}

// TestResumeMaterializes resumes a `/1` ref: its incarnation is created
// as the previous release created it (the image config plus the
// containerEnv entries without ${…}, under runc) and notApplied names what
// its core declares that it does not get.
func TestResumeMaterializes(t *testing.T) {
	config := strings.Replace(baseConfig, `"A": "1"`, `"A": "1", "HOMEISH": "${localEnv:HOME}"`, 1)
	fx, m := materializable(t, config)
	fx.v1()
	v := resumeWith(fx, m, resume.ResumeOptions{Start: true})
	wantVerdict(t, v, 0, "", "")
	id := resume.DefaultContainerID(testRun, 1)
	if v.Container != id || v.Pid == 0 || v.Materialize == nil || v.Materialize.Result != resume.ResultPass {
		t.Fatalf("container %q pid %d materialize %+v", v.Container, v.Pid, v.Materialize)
	}
	if v.Run != testRun || v.Generation != 1 || v.Fence != 1 || v.TakenOver != nil {
		t.Errorf("run %q generation %d fence %d takenOver %v; want %q, 1, 1, none", v.Run, v.Generation, v.Fence, v.TakenOver, testRun)
	}
	if want := []string{"/containerEnv/HOMEISH", "/mounts/0", "/remoteUser"}; !slices.Equal(v.NotApplied, want) {
		t.Errorf("notApplied %v, want %v", v.NotApplied, want)
	}
	c, ok := m.Incarnation(id)
	if !ok {
		t.Fatal("no container")
	}
	if !slices.Contains(c.Env, "A=1") || !slices.Contains(c.Env, "LANG=C.UTF-8") || slices.ContainsFunc(c.Env, func(e string) bool { return strings.HasPrefix(e, "HOMEISH=") }) {
		t.Errorf("env %v: want A and LANG, not HOMEISH", c.Env)
	}
	if c.Spec.Runtime.Name != resume.DefaultRuntime || c.Spec.Runtime.Options != nil {
		t.Errorf("runtime %+v, want %s without options", c.Spec.Runtime, resume.DefaultRuntime)
	}
	if !strings.Contains(string(c.Spec.Spec), `"cgroupsPath":"/`+memhost.DefaultNamespace+`/`+id+`"`) {
		t.Errorf("spec %s: cgroupsPath is not the new container's", c.Spec.Spec)
	}
	refFile := fx.signed()
	want := map[string]string{
		snapshot.LabelRun: testRun, snapshot.LabelManifest: fx.ref.Manifest, snapshot.LabelGeneration: "1",
		snapshot.LabelRef: digest.FromBytes(refFile).String(), snapshot.LabelFence: "1",
	}
	for k, val := range want {
		if c.Labels[k] != val {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], val)
		}
	}
	if refs := fx.facts.Refs(testRun); !slices.Equal(refs, []string{digest.FromBytes(refFile).String()}) {
		t.Errorf("refs stored under the run lease %v, want the ref file's digest", refs)
	}
	rec := fx.record()
	if rec == nil || rec.State != ledger.StateLive || rec.Fence != 1 || rec.Holder == nil || rec.Holder.ID != id ||
		rec.Holder.Namespace != memhost.DefaultNamespace || rec.Holder.Host != testHostID || rec.Generation != 1 || rec.Ref != digest.FromBytes(refFile) {
		t.Fatalf("record %v, want live at generation 1 with fence 1 held by %s", rec, id)
	}
	// The run is live: a second resume is 8 naming the incarnation.
	v = resumeWith(fx, m, resume.ResumeOptions{Container: "other"})
	wantVerdict(t, v, 8, resume.ClassClaimConflict, resume.CheckClaim)
	if !strings.Contains(v.Failed().Detail, id) || !strings.Contains(v.Failed().Detail, testHostID) {
		t.Errorf("detail %q does not name %s and its host", v.Failed().Detail, id)
	}
	if slices.Contains(m.Containers(), "other") {
		t.Error("the refused resume created a container")
	}
	// Decide (--check) creates nothing and also sees the holder.
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
	if !strings.Contains(v.Materialize.Detail, "released") {
		t.Errorf("materialize detail %q does not say the claim was released", v.Materialize.Detail)
	}
	if rec := fx.record(); rec == nil || rec.State != ledger.StateSuspended || rec.Holder != nil || rec.Fence != 1 || rec.Generation != 1 {
		t.Fatalf("record after a failed materialization %v, want suspended at generation 1, fence 1", rec)
	}
	if len(m.Containers()) != 0 {
		t.Fatalf("containers %v", m.Containers())
	}
	// The same generation with another ref (re-signed over another diff)
	// is forked now that the ledger recorded the first.
	fx.ref.Layers[0] = good
	wantVerdict(t, resumeWith(fx, m, resume.ResumeOptions{}), 6, resume.ClassForked, resume.CheckClaim)

	// A failure to create the container releases too; the released
	// generation then resumes.
	fx2, m2 := materializable(t, baseConfig)
	v = resumeWith(fx2, failCreate{m2}, resume.ResumeOptions{})
	if v.ExitCode != 1 || v.Materialize == nil || !strings.Contains(v.Materialize.Detail, "released") {
		t.Fatalf("failed create: %s", dump(v))
	}
	wantVerdict(t, resumeWith(fx2, m2, resume.ResumeOptions{}), 0, "", "")
	if rec := fx2.record(); rec == nil || rec.State != ledger.StateLive || rec.Fence != 2 {
		t.Fatalf("record %v, want live with fence 2", rec)
	}
}

// failCreate fails CreateContainer with a daemon error.
type failCreate struct{ *memhost.Machine }

func (failCreate) CreateContainer(context.Context, host.ContainerSpec) error {
	return errors.New("create container: connection reset by peer")
}
