package resume

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// memoryFacts is what check 12 looked up of this host (host.Info's
// MemoryFacts).
type memoryFacts struct {
	runtime snapshot.MemoryRuntime
	host    snapshot.MemoryHost
}

// snapshotBlobs lists the blobs check 9 looks for, in order: the layer
// blobs (layerBlobs), then, unless Request.NoMemory, the memory image's
// blobs (docs/design.md "Memory": present and verified belong to check 9).
func (s *state) snapshotBlobs(ref *snapshot.Ref) []refBlob {
	out := layerBlobs(ref)
	if m := ref.Memory; m != nil && !s.req.NoMemory {
		for i, b := range m.Blobs {
			out = append(out, refBlob{fmt.Sprintf("/ref/memory/blobs/%d", i), b.Digest, b.Size})
		}
	}
	return out
}

// restoresMemory reports whether the incarnation is to be restored from
// the ref's memory image (a ref with memory, without --no-memory).
func (s *state) restoresMemory() bool { return s.ref.Memory != nil && !s.req.NoMemory }

// memoryCheck is check 12 (docs/design.md "Memory"): a ref without memory
// passes ("no memory"), as does --no-memory ("not restored"). Otherwise
// the format is one this build restores, the checkpoint tool here is the
// recorded one with the same major version and a version ≥ the recorded
// one, and the recorded CPU flags are a subset of this host's; else
// memory-incompatible (10), naming the field and both values. With
// --copy or --take-over it needs Request.DuplicateProcess (else usage,
// 64: docs/design.md "No duplicate processes by default").
func (s *state) memoryCheck(_ context.Context) (string, error) {
	m := s.ref.Memory
	switch {
	case m == nil:
		return "no memory", nil
	case s.req.NoMemory:
		return fmt.Sprintf("not restored (--no-memory): the %s image is left; the process restarts from the recorded args", m.Format), nil
	}
	if (s.req.Copy || s.req.TakeOver) && !s.req.DuplicateProcess {
		flag := "--copy"
		if s.req.TakeOver {
			flag = "--take-over"
		}
		return "", refusef(CheckMemory, ClassUsage, "/ref/memory: %s of a generation with memory would restore a second copy of its process (same tokens, same random state, same sessions): add --no-memory to restart it from the filesystem, or --duplicate-process to restore it anyway", flag)
	}
	f, err := s.look.memory.get()
	switch {
	case errdefs.IsNotImplemented(err):
		return "", refusef(CheckMemory, ClassMemoryIncompatible, "/ref/memory/format: %q, this host restores none of that format: %v", m.Format, err)
	case errdefs.IsNotFound(err):
		return "", refusef(CheckMemory, ClassMemoryIncompatible, "/ref/memory/runtime/tool: %q recorded, not found here: %v", m.Runtime.Tool, err)
	case err != nil:
		return "", internal(CheckMemory, fmt.Errorf("memory facts of this host: %w", err))
	}
	here := f.runtime
	if here.Tool != m.Runtime.Tool {
		return "", refusef(CheckMemory, ClassMemoryIncompatible, "/ref/memory/runtime/tool: recorded %q, this host has %q", m.Runtime.Tool, here.Tool)
	}
	if !compatibleVersion(m.Runtime.Version, here.Version) {
		return "", refusef(CheckMemory, ClassMemoryIncompatible, "/ref/memory/runtime/version: recorded %s %s, this host has %s (same major version and at least the recorded one needed)", m.Runtime.Tool, m.Runtime.Version, here.Version)
	}
	if m.Runtime.Platform != here.Platform {
		return "", refusef(CheckMemory, ClassMemoryIncompatible, "/ref/memory/runtime/platform: recorded %q, this host has %q", m.Runtime.Platform, here.Platform)
	}
	var missing []string
	for _, fl := range m.Host.CPU.Flags {
		if !slices.Contains(f.host.CPU.Flags, fl) {
			missing = append(missing, fl)
		}
	}
	if len(missing) > 0 {
		return "", refusef(CheckMemory, ClassMemoryIncompatible, "/ref/memory/host/cpu/flags: recorded %d flags, this host's %s %d/%d lacks %s (recorded on %s %d/%d)",
			len(m.Host.CPU.Flags), f.host.CPU.Vendor, f.host.CPU.Family, f.host.CPU.Model, strings.Join(missing, " "), m.Host.CPU.Vendor, m.Host.CPU.Family, m.Host.CPU.Model)
	}
	var size int64
	for _, b := range m.Blobs {
		size += b.Size
	}
	return fmt.Sprintf("%s image (%d blobs, %d bytes) restorable: %s %s here (recorded %s), %d recorded CPU flags present; kernel %s here (recorded %s)",
		m.Format, len(m.Blobs), size, here.Tool, here.Version, m.Runtime.Version, len(m.Host.CPU.Flags), f.host.Kernel, m.Host.Kernel), nil
}

// compatibleVersion reports whether the tool version here restores an
// image the recorded version wrote: the same major version, and here ≥
// recorded compared numerically component by component ("4.1.1" < "4.2").
// A version that does not start with a number is compatible only with
// itself.
func compatibleVersion(recorded, here string) bool {
	if recorded == here {
		return true
	}
	r, ok1 := versionParts(recorded)
	h, ok2 := versionParts(here)
	if !ok1 || !ok2 || r[0] != h[0] {
		return false
	}
	for i := 0; i < max(len(r), len(h)); i++ {
		var a, b uint64
		if i < len(r) {
			a = r[i]
		}
		if i < len(h) {
			b = h[i]
		}
		if a != b {
			return b > a
		}
	}
	return true
}

// versionParts splits "4.1.1" (anything after a '-' or '+' ignored) into
// numbers.
func versionParts(v string) ([]uint64, bool) {
	v, _, _ = strings.Cut(v, "-")
	v, _, _ = strings.Cut(v, "+")
	var out []uint64
	for _, p := range strings.Split(v, ".") {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
	}
	return out, len(out) > 0
}

// restore is the last step of a memory resume (docs/design.md "Materialize
// with memory"): after Live, the task is restored from the verified image
// (Tasks.RestoreTask verifies every blob before any byte reaches the
// runtime) instead of being started. A restore that fails runs the
// ledger's Unwound (the record returns to suspended at this generation,
// fence kept) and deletes the container: exit 1, naming both outcomes.
func (s *state) restore(ctx context.Context, v *Verdict, id, detail string) *Verdict {
	cc := s.cc
	faultpoint.Reach("resume-restoring")
	pid, err := s.mat.RestoreTask(ctx, id, *s.ref.Memory)
	if err == nil {
		v.Pid = pid
		v.Materialize = &CheckResult{Name: CheckMaterialize, Result: ResultPass,
			Detail: fmt.Sprintf("%s; task restored from the %s image %s, pid %d", detail, s.ref.Memory.Format, s.ref.Memory.Blobs[0].Digest, pid)}
		faultpoint.Reach("resume-restored")
		return v
	}
	class := ClassInternal
	if errors.Is(err, snapshot.ErrBlobCorrupt) || errdefs.IsNotFound(err) {
		class = ClassSnapshotMissing
	}
	err = fmt.Errorf("%s; restore the task from the %s image: %w", detail, s.ref.Memory.Format, err)
	bg := context.WithoutCancel(ctx)
	if derr := s.mat.DeleteContainer(bg, id); derr != nil {
		err = fmt.Errorf("%w; deleting container %s failed: %v", err, id, derr)
	} else {
		err = fmt.Errorf("%w; container %s deleted", err, id)
	}
	if _, uerr := s.ledger.Unwound(bg, ledger.UnwindRequest{Run: cc.run, Fence: cc.fence, Container: cc.target}); uerr != nil {
		err = fmt.Errorf("%w; unwinding the run in the ledger failed: %v", err, uerr)
	} else {
		err = fmt.Errorf("%w; run %q unwound to suspended at generation %d (resume it again)", err, cc.run, cc.gen)
	}
	v.Accepted, v.Class, v.ExitCode, v.Container, v.NotApplied = false, class, class.Code(), "", nil
	v.Materialize = &CheckResult{Name: CheckMaterialize, Result: ResultFail, Detail: err.Error()}
	return v
}

// pendingRestore is the claim check's rerun rule of a memory resume
// (docs/design.md "Materialize with memory"): a resume killed between
// Live and the restore leaves a live incarnation with no task; the same
// resume run again (same ref, same container) finds the record live at
// this generation and ref with that container as holder, the container
// labelled with the record's fence and this ref and without a task, and
// passes the check without a new claim. ok is false when the rule does not
// apply (the claim check goes on as usual).
func (s *state) pendingRestore(ctx context.Context) (detail string, ok bool, err error) {
	cc := s.cc
	rec := cc.rec
	if !s.restoresMemory() || rec == nil || rec.State != ledger.StateLive || rec.Holder == nil ||
		rec.Holder.Container != cc.target || rec.Generation != cc.gen || rec.Ref != cc.ref {
		return "", false, nil
	}
	cf, err := s.facts.ContainerState(ctx, cc.target.ID)
	if err != nil {
		return "", false, internal(CheckClaim, fmt.Errorf("container %s: %w", cc.target.ID, err))
	}
	if cf == nil || cf.Running || cf.Labels[snapshot.LabelFence] != strconv.FormatUint(rec.Fence, 10) || cf.Labels[snapshot.LabelRef] != cc.ref.String() {
		return "", false, nil
	}
	cc.fence, cc.pendingRestore = rec.Fence, true
	return fmt.Sprintf("run %q generation %d (ref %s) is live with %s (fence %d), which has no task: a memory resume stopped between Live and the restore; the restore is retried into it, no new claim",
		cc.run, cc.gen, cc.ref, cc.target, rec.Fence), true, nil
}

// retryRestore finishes a memory resume that pendingRestore found stopped
// between Live and the restore: the task is restored into the existing
// incarnation.
func (s *state) retryRestore(ctx context.Context, v *Verdict) *Verdict {
	id := s.cc.target.ID
	v.Container = id
	v.NotApplied = s.notApplied()
	return s.restore(ctx, v, id, fmt.Sprintf("container %s exists, live with fence %d and no task (a memory resume stopped before its restore)", id, s.cc.fence))
}
