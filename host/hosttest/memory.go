package hosttest

import (
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// MemoryFixture is one fresh setup of RunMemory: a host and its Probe, a
// container whose task runs with standard streams CRIU can dump
// (/dev/null or pipes), and a unique lease id.
type MemoryFixture struct {
	Host      host.Host
	Probe     Probe
	Container string
	LeaseID   string
}

// RunMemory runs the part of the suite suspend --memory and a memory
// resume rely on (docs/design.md "Memory"): MemoryFacts, CheckpointTask
// leaving the task paused with its image under the lease, and RestoreTask
// once into a container without a task.
func RunMemory(t *testing.T, newFixture func(t *testing.T) MemoryFixture) {
	t.Run("CheckpointRestore", func(t *testing.T) { testCheckpointRestore(t, newFixture(t)) })
}

func testCheckpointRestore(t *testing.T, f MemoryFixture) {
	ctx := ctx(t)
	if err := f.Host.CreateLease(ctx, f.LeaseID, nil); err != nil {
		t.Fatal(err)
	}
	state := func(want snapshot.TaskState) {
		t.Helper()
		c, err := f.Host.Container(ctx, f.Container)
		if err != nil {
			t.Fatal(err)
		}
		if c.Task != want {
			t.Fatalf("task = %q, want %q", c.Task, want)
		}
	}
	if _, err := f.Host.CheckpointTask(ctx, f.Container, f.LeaseID); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("checkpoint of a running task: %v, want errdefs.ErrFailedPrecondition", err)
	}
	rt, mh, err := f.Host.MemoryFacts(ctx, snapshot.MemoryFormatCRIU)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Tool != snapshot.MemoryToolCRIU || rt.Version == "" || rt.BinaryDigest.Validate() != nil || mh.Kernel == "" || mh.CPU.Vendor == "" {
		t.Fatalf("memory facts %+v %+v: want criu with a version and digest, a kernel and a CPU vendor", rt, mh)
	}
	if _, _, err := f.Host.MemoryFacts(ctx, "other/1"); !errdefs.IsNotImplemented(err) {
		t.Fatalf("memory facts of format other/1: %v, want errdefs.ErrNotImplemented", err)
	}
	if err := f.Host.PauseTask(ctx, f.Container); err != nil {
		t.Fatal(err)
	}
	mem, err := f.Host.CheckpointTask(ctx, f.Container, f.LeaseID)
	if err != nil {
		t.Fatal(err)
	}
	state(snapshot.TaskPaused)
	if mem.Format != snapshot.MemoryFormatCRIU || len(mem.Blobs) != 1 || mem.Blobs[0].MediaType != snapshot.MediaTypeMemoryCRIU {
		t.Fatalf("memory %+v: want one %s blob of format %s", mem, snapshot.MediaTypeMemoryCRIU, snapshot.MemoryFormatCRIU)
	}
	if mem.Runtime != rt || mem.Host.Kernel != mh.Kernel || mem.Host.CPU.Vendor != mh.CPU.Vendor {
		t.Fatalf("memory records %+v %+v, MemoryFacts says %+v %+v", mem.Runtime, mem.Host, rt, mh)
	}
	b := mem.Blobs[0]
	if ok, err := f.Probe.LeaseHolds(ctx, f.LeaseID, b.Digest); err != nil || !ok {
		t.Fatalf("lease does not hold the memory blob %s (err %v)", b.Digest, err)
	}
	data, err := f.Probe.Blob(ctx, b.Digest)
	if err != nil || int64(len(data)) != b.Size || digest.FromBytes(data) != b.Digest {
		t.Fatalf("memory blob %s: %d bytes, err %v; want %d bytes with that digest", b.Digest, len(data), err, b.Size)
	}
	if err := f.Host.StopTask(ctx, f.Container); err != nil {
		t.Fatal(err)
	}
	state(snapshot.TaskNone)
	bad := mem
	bad.Blobs = []snapshot.Descriptor{{MediaType: b.MediaType, Digest: digest.FromString("no such image"), Size: b.Size}}
	if _, err := f.Host.RestoreTask(ctx, f.Container, bad); !errdefs.IsNotFound(err) {
		t.Fatalf("restore from an absent blob: %v, want errdefs.ErrNotFound", err)
	}
	pid, err := f.Host.RestoreTask(ctx, f.Container, mem)
	if err != nil {
		t.Fatal(err)
	}
	if pid == 0 {
		t.Fatal("restored task has pid 0")
	}
	state(snapshot.TaskRunning)
	if _, err := f.Host.RestoreTask(ctx, f.Container, mem); !errdefs.IsAlreadyExists(err) {
		t.Fatalf("second restore into a container with a running task: %v, want errdefs.ErrAlreadyExists", err)
	}
	if err := f.Host.StopTask(ctx, f.Container); err != nil {
		t.Fatal(err)
	}
}
