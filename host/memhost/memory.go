package memhost

import (
	"context"
	"fmt"
	"slices"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// memoryState is the in-memory host's model of checkpoint and restore
// (docs/design.md "Memory").
type memoryState struct {
	runtime    snapshot.MemoryRuntime
	host       snapshot.MemoryHost
	undumpable map[string]string        // container id → why it cannot be dumped
	restored   map[string]digest.Digest // container id → the image blob its task came from
	images     int                      // checkpoints taken (each image's bytes differ)
}

// DefaultMemoryRuntime and DefaultMemoryHost are the memory facts a New
// host reports until SetMemoryFacts changes them.
var (
	DefaultMemoryRuntime = snapshot.MemoryRuntime{Tool: snapshot.MemoryToolCRIU, Version: "4.1.1", BinaryDigest: digest.FromString("memhost criu 4.1.1")}
	DefaultMemoryHost    = snapshot.MemoryHost{Kernel: "6.18.44", CPU: snapshot.CPU{Vendor: "GenuineIntel", Family: 6, Model: 143, Flags: []string{"avx2", "fpu", "sse4_2"}}}
)

func (m *memoryState) facts() (snapshot.MemoryRuntime, snapshot.MemoryHost) {
	rt, mh := m.runtime, m.host
	if rt.Tool == "" {
		rt = DefaultMemoryRuntime
	}
	if mh.Kernel == "" {
		mh = DefaultMemoryHost
	}
	mh.CPU.Flags = slices.Clone(mh.CPU.Flags)
	return rt, mh
}

// SetMemoryFacts sets the CRIU and the kernel and CPU MemoryFacts reports
// and CheckpointTask records.
func (h *Machine) SetMemoryFacts(rt snapshot.MemoryRuntime, mh snapshot.MemoryHost) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mem.runtime, h.mem.host = rt, mh
}

// SetUndumpable makes CheckpointTask of container id refuse with
// host.ErrCannotCheckpoint for the reason why ("" allows it again).
func (h *Machine) SetUndumpable(id, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mem.undumpable == nil {
		h.mem.undumpable = map[string]string{}
	}
	if why == "" {
		delete(h.mem.undumpable, id)
		return
	}
	h.mem.undumpable[id] = why
}

// RestoredFrom returns the memory image blob container id's task was
// restored from ("" when its task was started, or it has none).
func (h *Machine) RestoredFrom(id string) digest.Digest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mem.restored[id]
}

// MemoryFacts implements host.Info: the facts SetMemoryFacts set (by
// default DefaultMemoryRuntime, DefaultMemoryHost) for criu/1; another
// format is errdefs.ErrNotImplemented.
func (h *Machine) MemoryFacts(ctx context.Context, format string) (snapshot.MemoryRuntime, snapshot.MemoryHost, error) {
	if err := h.enter(ctx, OpMemoryFacts); err != nil {
		return snapshot.MemoryRuntime{}, snapshot.MemoryHost{}, err
	}
	defer h.mu.Unlock()
	if format != snapshot.MemoryFormatCRIU {
		return snapshot.MemoryRuntime{}, snapshot.MemoryHost{}, fmt.Errorf("memory format %q: %w", format, errdefs.ErrNotImplemented)
	}
	rt, mh := h.mem.facts()
	return rt, mh, nil
}

// CheckpointTask implements host.Tasks: the task must be paused and stays
// paused; the image is one blob (naming the container, its pid and the
// checkpoint's sequence number) stored under the lease.
func (h *Machine) CheckpointTask(ctx context.Context, id, leaseID string) (snapshot.Memory, error) {
	if err := h.enter(ctx, OpCheckpointTask); err != nil {
		return snapshot.Memory{}, err
	}
	defer h.mu.Unlock()
	c, err := h.container(id)
	if err != nil {
		return snapshot.Memory{}, err
	}
	if c.Task != snapshot.TaskPaused {
		return snapshot.Memory{}, fmt.Errorf("container %q: checkpoint: task is %q, not paused: %w", id, c.Task, errdefs.ErrFailedPrecondition)
	}
	if why := h.mem.undumpable[id]; why != "" {
		return snapshot.Memory{}, fmt.Errorf("container %q: checkpoint: %s: %w", id, why, host.ErrCannotCheckpoint)
	}
	h.mem.images++
	data := fmt.Appendf(nil, "memhost criu image %d of container %s pid %d\n", h.mem.images, id, c.pid)
	desc, err := h.writeBlob(leaseID, snapshot.MediaTypeMemoryCRIU, data)
	if err != nil {
		return snapshot.Memory{}, err
	}
	rt, mh := h.mem.facts()
	return snapshot.Memory{
		Format:  snapshot.MemoryFormatCRIU,
		Blobs:   []snapshot.Descriptor{{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}},
		Runtime: rt, Host: mh,
	}, nil
}

// RestoreTask implements host.Tasks: every blob is checked against its
// digest and size, then the task runs with the next pid and RestoredFrom
// names the first blob.
func (h *Machine) RestoreTask(ctx context.Context, id string, mem snapshot.Memory) (uint32, error) {
	if err := h.enter(ctx, OpRestoreTask); err != nil {
		return 0, err
	}
	defer h.mu.Unlock()
	c, ok := h.containers[id]
	if !ok {
		return 0, fmt.Errorf("container %s: %w", id, errdefs.ErrNotFound)
	}
	if c.running() {
		return 0, fmt.Errorf("container %s: task: %w", id, errdefs.ErrAlreadyExists)
	}
	if len(mem.Blobs) == 0 {
		return 0, fmt.Errorf("container %s: restore: no memory blobs: %w", id, errdefs.ErrInvalidArgument)
	}
	for i, b := range mem.Blobs {
		data, ok := h.blobs[b.Digest]
		switch {
		case !ok:
			return 0, fmt.Errorf("container %s: memory/blobs/%d: blob %s: %w", id, i, b.Digest, errdefs.ErrNotFound)
		case int64(len(data)) != b.Size || digest.FromBytes(data) != b.Digest:
			return 0, fmt.Errorf("container %s: memory/blobs/%d: blob %s is not the recorded bytes: %w", id, i, b.Digest, snapshot.ErrBlobCorrupt)
		}
	}
	if h.mem.restored == nil {
		h.mem.restored = map[string]digest.Digest{}
	}
	h.nextPID++
	c.pid, c.Task = h.nextPID, snapshot.TaskRunning
	h.mem.restored[id] = mem.Blobs[0].Digest
	return c.pid, nil
}
