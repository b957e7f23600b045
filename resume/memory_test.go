package resume_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// withMemoryImage records a criu/1 memory image (one stored blob) taken with
// memhost's default CRIU on its default CPU in fx.ref.
func withMemoryImage(fx *fixture) digest.Digest {
	img := []byte("criu image of " + testRun)
	d := fx.facts.PutBlob(img)
	mh := memhost.DefaultMemoryHost
	fx.ref.Memory = &snapshot.Memory{
		Format:  snapshot.MemoryFormatCRIU,
		Blobs:   []snapshot.Descriptor{{MediaType: snapshot.MediaTypeMemoryCRIU, Digest: d, Size: int64(len(img))}},
		Runtime: memhost.DefaultMemoryRuntime,
		Host:    mh,
	}
	return d
}

// memRequest is fx.request with DuplicateProcess: the fixture's refs are
// copies (fixture.request sets Copy), and a copy of a memory generation is
// restored only with --duplicate-process (TestMemoryCopyNeedsDuplicate).
func memRequest(fx *fixture) resume.Request {
	req := fx.request(fx.signed())
	req.DuplicateProcess = true
	return req
}

func memResume(fx *fixture, m resume.Materializer, opt resume.ResumeOptions) *resume.Verdict {
	return resume.Resume(context.Background(), fx.facts, fx.ledger, m, memRequest(fx), opt)
}

// TestMemoryCopyNeedsDuplicate: --copy or --take-over of a memory
// generation is 64 at check 12 without --no-memory or --duplicate-process
// (docs/design.md "No duplicate processes by default").
func TestMemoryCopyNeedsDuplicate(t *testing.T) {
	for _, takeOver := range []bool{false, true} {
		fx := newFixture(t, baseConfig)
		withMemoryImage(fx)
		req := fx.request(fx.signed())
		req.Copy, req.TakeOver = !takeOver, takeOver
		v := resume.Decide(context.Background(), fx.facts, fx.ledger, req)
		wantVerdict(t, v, 64, resume.ClassUsage, resume.CheckMemory)
		if d := memoryDetail(t, v); !strings.Contains(d, "--duplicate-process") || !strings.Contains(d, "--no-memory") {
			t.Errorf("check 12 detail %q", d)
		}
		req.NoMemory = true
		if v := resume.Decide(context.Background(), fx.facts, fx.ledger, req); v.Class == resume.ClassUsage {
			t.Errorf("--no-memory with copy %t take-over %t: %s", req.Copy, takeOver, dump(v))
		}
	}
}

func memoryDetail(t *testing.T, v *resume.Verdict) string {
	t.Helper()
	for _, c := range v.Checks {
		if c.Name == resume.CheckMemory {
			return c.Detail
		}
	}
	t.Fatal("no memory check")
	return ""
}

// TestMemoryCheck is check 12 (docs/design.md "Memory"): always reported;
// a compatible CRIU (same major, at least the recorded version) and CPU
// flags pass; an older or other-major CRIU, a CPU flag this host lacks or
// an unknown tool is 10 naming the field and both values; --no-memory
// passes and needs no memory blob; a missing memory blob is check 9's (7).
func TestMemoryCheck(t *testing.T) {
	rt := memhost.DefaultMemoryRuntime
	cases := []struct {
		name   string
		edit   func(fx *fixture)
		code   int
		class  resume.Class
		failAt string
		detail []string
	}{
		{"no memory", func(fx *fixture) { fx.ref.Memory = nil }, 0, "", "", []string{"no memory"}},
		{"compatible", func(fx *fixture) {}, 0, "", "", []string{"restorable", "criu 4.1.1"}},
		{"newer minor here", func(fx *fixture) {
			r := rt
			r.Version = "4.2"
			fx.facts.SetMemoryFacts(r, memhost.DefaultMemoryHost)
		}, 0, "", "", []string{"criu 4.2 here (recorded 4.1.1)"}},
		{"older here", func(fx *fixture) {
			r := rt
			r.Version = "4.1"
			fx.facts.SetMemoryFacts(r, memhost.DefaultMemoryHost)
		}, 10, resume.ClassMemoryIncompatible, resume.CheckMemory, []string{"/ref/memory/runtime/version", "4.1.1", "4.1"}},
		{"other major here", func(fx *fixture) {
			r := rt
			r.Version = "5.0"
			fx.facts.SetMemoryFacts(r, memhost.DefaultMemoryHost)
		}, 10, resume.ClassMemoryIncompatible, resume.CheckMemory, []string{"/ref/memory/runtime/version", "5.0"}},
		{"cpu flag missing", func(fx *fixture) {
			fx.ref.Memory.Host.CPU.Flags = append([]string{"amx_tile"}, fx.ref.Memory.Host.CPU.Flags...)
		}, 10, resume.ClassMemoryIncompatible, resume.CheckMemory, []string{"/ref/memory/host/cpu/flags", "amx_tile"}},
		{"runsc format", func(fx *fixture) {
			fx.ref.Memory.Format, fx.ref.Memory.Runtime.Tool, fx.ref.Memory.Runtime.Platform = snapshot.MemoryFormatRunsc, snapshot.MemoryToolRunsc, "systrap"
			fx.ref.Memory.Blobs[0].MediaType = snapshot.MediaTypeMemoryRunsc
		}, 10, resume.ClassMemoryIncompatible, resume.CheckMemory, []string{"/ref/memory/format", "runsc/1"}},
		{"blob missing", func(fx *fixture) {
			fx.ref.Memory.Blobs[0].Digest = digest.FromString("absent")
		}, 7, resume.ClassSnapshotMissing, resume.CheckSnapshot, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := newFixture(t, baseConfig)
			withMemoryImage(fx)
			c.edit(fx)
			v := resume.Decide(context.Background(), fx.facts, fx.ledger, memRequest(fx))
			wantVerdict(t, v, c.code, c.class, c.failAt)
			d := memoryDetail(t, v)
			for _, w := range c.detail {
				if !strings.Contains(d, w) {
					t.Errorf("check 12 detail %q does not name %q", d, w)
				}
			}
		})
	}
	t.Run("no-memory", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		withMemoryImage(fx)
		fx.ref.Memory.Blobs[0].Digest = digest.FromString("absent") // not needed
		fx.ref.Memory.Host.CPU.Flags = []string{"amx_tile"}         // not judged
		req := memRequest(fx)
		req.NoMemory = true
		v := resume.Decide(context.Background(), fx.facts, fx.ledger, req)
		wantVerdict(t, v, 0, "", "")
		if d := memoryDetail(t, v); !strings.Contains(d, "not restored (--no-memory)") {
			t.Errorf("check 12 detail %q", d)
		}
	})
}

// TestMemoryResumeRestores: a memory generation's incarnation is
// restored after Live from the recorded image (not started, even without
// --start); a second resume of it is refused; --no-memory starts it.
func TestMemoryResumeRestores(t *testing.T) {
	fx, m := materializable(t, baseConfig)
	img := withMemoryImage(fx)
	v := memResume(fx, m, resume.ResumeOptions{})
	wantVerdict(t, v, 0, "", "")
	id := resume.DefaultContainerID(testRun, 1)
	if v.Container != id || v.Pid == 0 || m.RestoredFrom(id) != img || !strings.Contains(v.Materialize.Detail, "task restored") {
		t.Fatalf("container %q pid %d restored from %q (want %s); materialize %+v", v.Container, v.Pid, m.RestoredFrom(id), img, v.Materialize)
	}
	if r := fx.record(); r == nil || r.State != ledger.StateLive {
		t.Fatalf("record %+v, want live", r)
	}
	if v := memResume(fx, m, resume.ResumeOptions{Container: "other"}); v.Accepted || m.RestoredFrom("other") != "" {
		t.Fatalf("a second resume of the memory generation: %+v", v)
	}

	fx2, m2 := materializable(t, baseConfig)
	withMemoryImage(fx2)
	req := memRequest(fx2)
	req.NoMemory = true
	v = resume.Resume(context.Background(), fx2.facts, fx2.ledger, m2, req, resume.ResumeOptions{Start: true})
	wantVerdict(t, v, 0, "", "")
	if v.Pid == 0 || m2.RestoredFrom(v.Container) != "" {
		t.Fatalf("--no-memory --start: pid %d restored from %q, want a started task", v.Pid, m2.RestoredFrom(v.Container))
	}
}

// TestMemoryRestoreFailureUnwinds: a restore that fails after Live deletes
// the container and runs Unwound (the record is suspended again at this
// generation), so that the same resume can run again and restore once.
func TestMemoryRestoreFailureUnwinds(t *testing.T) {
	fx, m := materializable(t, baseConfig)
	img := withMemoryImage(fx)
	m.Hook = func(op string) error {
		if op == memhost.OpRestoreTask {
			return errors.New("criu restore failed")
		}
		return nil
	}
	v := memResume(fx, m, resume.ResumeOptions{})
	id := resume.DefaultContainerID(testRun, 1)
	if v.Accepted || v.ExitCode != 1 || v.Container != "" || v.Materialize == nil ||
		!strings.Contains(v.Materialize.Detail, "criu restore failed") || !strings.Contains(v.Materialize.Detail, "unwound") {
		t.Fatalf("failed restore: %+v (materialize %+v)", v, v.Materialize)
	}
	if st, err := m.ContainerState(context.Background(), id); err != nil || st != nil {
		t.Fatalf("container %s after the failed restore: %+v (err %v), want deleted", id, st, err)
	}
	if r := fx.record(); r == nil || r.State != ledger.StateSuspended || r.Generation != 1 {
		t.Fatalf("record %+v, want suspended at generation 1", r)
	}
	m.Hook = nil
	v = memResume(fx, m, resume.ResumeOptions{})
	wantVerdict(t, v, 0, "", "")
	if m.RestoredFrom(id) != img {
		t.Fatalf("the rerun restored from %q, want %s", m.RestoredFrom(id), img)
	}
}

// TestMemoryRestoreRerun: a memory resume stopped between Live and the
// restore (here: the incarnation went live without a task) is finished by
// running the same resume again: the task is restored into that container
// with the record's fence and no new claim; once it runs, another rerun is
// refused.
func TestMemoryRestoreRerun(t *testing.T) {
	fx, m := materializable(t, baseConfig)
	img := withMemoryImage(fx)
	req := memRequest(fx)
	req.NoMemory = true
	v := resume.Resume(context.Background(), fx.facts, fx.ledger, m, req, resume.ResumeOptions{})
	wantVerdict(t, v, 0, "", "")
	id := v.Container
	before := fx.record()
	if before == nil || before.State != ledger.StateLive || v.Pid != 0 {
		t.Fatalf("the stopped resume: record %+v pid %d", before, v.Pid)
	}
	v = memResume(fx, m, resume.ResumeOptions{})
	wantVerdict(t, v, 0, "", "")
	if v.Container != id || v.Pid == 0 || m.RestoredFrom(id) != img || v.Fence != before.Fence {
		t.Fatalf("rerun: container %q pid %d restored from %q fence %d; want %s restored from %s with fence %d", v.Container, v.Pid, m.RestoredFrom(id), v.Fence, id, img, before.Fence)
	}
	if after := fx.record(); after == nil || after.Fence != before.Fence || after.State != ledger.StateLive {
		t.Fatalf("record after the rerun %+v, want live with the same fence", after)
	}
	if v := memResume(fx, m, resume.ResumeOptions{}); v.Accepted {
		t.Fatalf("a rerun once the restored task runs was accepted: %+v", v)
	}
}
