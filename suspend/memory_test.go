package suspend_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	ledgerfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// TestSuspendMemory: suspend with Request.Memory checkpoints the paused
// task before the diff (docs/design.md "Memory"), records the image under
// the run lease in the signed /3 ref, and stops the task after the record;
// with KeepRunning it thaws it instead.
func TestSuspendMemory(t *testing.T) {
	ctx := context.Background()
	for _, keep := range []bool{false, true} {
		f := newFake()
		e := newEnv(t, `{"image":"busybox:1"}`)
		l := ledgerfake.New()
		req := e.req("Box-1", "")
		req.Memory, req.KeepRunning = true, keep
		res, err := suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatal(err)
		}
		ops := f.Ops()
		ck, pause, diff, stop := slices.Index(ops, memhost.OpCheckpointTask), slices.Index(ops, memhost.OpPauseTask), slices.Index(ops, memhost.OpCreateDiff), slices.Index(ops, memhost.OpStopTask)
		if pause < 0 || ck < pause || diff < ck {
			t.Fatalf("operations %v: want pause, checkpoint, diff in that order", ops)
		}
		ref, err := snapshot.OpenRef(res.File, envelope.NewKeyRing(e.pub))
		if err != nil {
			t.Fatal(err)
		}
		m := ref.Memory
		if m == nil || m.Format != snapshot.MemoryFormatCRIU || len(m.Blobs) != 1 || m.Runtime != memhost.DefaultMemoryRuntime || m.Host.Kernel != memhost.DefaultMemoryHost.Kernel {
			t.Fatalf("memory %+v", m)
		}
		if !f.Holds(res.Lease, m.Blobs[0].Digest) {
			t.Fatalf("the run lease does not hold the memory blob %s", m.Blobs[0].Digest)
		}
		c := container(t, f, "Box-1")
		switch {
		case keep && (c.Task != snapshot.TaskRunning || stop >= 0):
			t.Fatalf("kept running: task %q, operations %v", c.Task, ops)
		case !keep && (c.Task != snapshot.TaskNone || stop < 0):
			t.Fatalf("stopped: task %q, operations %v", c.Task, ops)
		}
	}
}

// TestSuspendMemoryRefused: a task the host cannot dump is refused before
// anything is recorded (ErrCannotCheckpoint), the task thawed, no ref file
// and no record; a refused Suspended thaws a checkpointed task and the
// workload goes on.
func TestSuspendMemoryRefused(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	f.SetUndumpable("Box-1", "stdout is the host file /var/log/x")
	e := newEnv(t, `{"image":"busybox:1"}`)
	l := ledgerfake.New()
	req := e.req("Box-1", "")
	req.Memory = true
	if _, err := suspend.Run(ctx, f, l, req); !errors.Is(err, suspend.ErrCannotCheckpoint) {
		t.Fatalf("suspend --memory of an undumpable task: %v, want ErrCannotCheckpoint", err)
	}
	e.noRefFile(t)
	if c := container(t, f, "Box-1"); c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelSuspending] != "" {
		t.Fatalf("task %q labels %v, want running and not suspending", c.Task, c.Labels)
	}
	if _, err := l.Get(ctx, "box-1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("record after the refusal: %v", err)
	}

	f.SetUndumpable("Box-1", "")
	refuse := &testLedger{Ledger: l, suspended: func(context.Context, ledger.SuspendRequest) (ledger.Record, error) {
		return ledger.Record{}, &ledger.Error{Class: errdef.ErrClaimConflict, Op: "suspended", Run: "box-1", Reason: "test"}
	}}
	if _, err := suspend.Run(ctx, f, refuse, req); !errors.Is(err, suspend.ErrRunConflict) {
		t.Fatalf("refused Suspended: %v, want ErrRunConflict", err)
	}
	e.noRefFile(t)
	if c := container(t, f, "Box-1"); c.Task != snapshot.TaskRunning {
		t.Fatalf("task %q after a refused Suspended, want running (thawed)", c.Task)
	}
}

// TestSuspendMemoryRetention: once generation 2 is recorded, generation
// 1's memory blob leaves the run lease, unless KeepMemory.
func TestSuspendMemoryRetention(t *testing.T) {
	ctx := context.Background()
	for _, keepMemory := range []bool{false, true} {
		f := newFake()
		e := newEnv(t, `{"image":"busybox:1"}`)
		l := ledgerfake.New()
		req := e.req("Box-1", "")
		req.Memory, req.KeepRunning = true, true
		g1, err := suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatal(err)
		}
		req.KeepRunning, req.KeepMemory = false, keepMemory
		g2, err := suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatal(err)
		}
		b1, b2 := g1.Ref.Memory.Blobs[0].Digest, g2.Ref.Memory.Blobs[0].Digest
		if g2.Ref.Generation != 2 || b1 == b2 || !f.Holds(g2.Lease, b2) {
			t.Fatalf("generation %d memory %s (generation 1's %s), held %t", g2.Ref.Generation, b2, b1, f.Holds(g2.Lease, b2))
		}
		if held := f.Holds(g2.Lease, b1); held != keepMemory || (len(g2.ReleasedMemory) == 1) == keepMemory {
			t.Fatalf("KeepMemory %t: generation 1's memory blob held %t, released %v", keepMemory, held, g2.ReleasedMemory)
		}
	}
}
