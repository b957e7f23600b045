package suspend

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ErrCannotCheckpoint is the refusal when, with Request.Memory, the task holds something its
// checkpoint tool cannot dump (a standard stream that is a host file, a
// terminal), or there is no task to checkpoint; refused before anything
// is dumped, the task resumed (docs/design.md "Memory"). It wraps
// host.ErrCannotCheckpoint when the host refused. Class "internal" (exit
// 1), naming what cannot be dumped.
var ErrCannotCheckpoint = host.ErrCannotCheckpoint

// checkpoint is the memory step of Request.Memory (docs/design.md
// "Memory"): after the pause and before the diff, the paused task's
// memory is checkpointed under the run lease (Tasks.CheckpointTask leaves
// it paused, so the files the diff sees are those the image saw). nil
// without Request.Memory. A container without a paused task is
// ErrCannotCheckpoint.
func (s *suspension) checkpoint(ctx context.Context) (*snapshot.Memory, error) {
	if !s.req.Memory {
		return nil, nil
	}
	if s.ctr.Task != snapshot.TaskRunning && s.ctr.Task != snapshot.TaskPausing && s.ctr.Task != snapshot.TaskPaused {
		return nil, fmt.Errorf("suspend --memory: container %q has no running task (its task is %q): nothing to checkpoint: %w", s.ctr.ID, s.ctr.Task, ErrCannotCheckpoint)
	}
	mem, err := s.c.CheckpointTask(ctx, s.ctr.ID, s.res.Lease)
	if err != nil {
		if errors.Is(err, host.ErrCannotCheckpoint) {
			return nil, fmt.Errorf("suspend --memory: %w", err)
		}
		return nil, fmt.Errorf("suspend --memory: checkpoint the task of %q under lease %s: %w", s.ctr.ID, s.res.Lease, err)
	}
	faultPoint("checkpoint")
	return &mem, nil
}

// releaseMemory is the memory retention rule (docs/design.md "Memory"):
// once a later generation is recorded, the parent generation's memory
// blobs leave the run lease (Result.ReleasedMemory), unless
// Request.KeepMemory; the older generations' were released by the suspends
// that wrote their children. A blob the lease no longer holds is no error.
func (s *suspension) releaseMemory(ctx context.Context) error {
	if s.req.KeepMemory || s.parent == nil || s.parent.Memory == nil {
		return nil
	}
	for _, b := range s.parent.Memory.Blobs {
		if err := s.c.ReleaseBlob(ctx, s.res.Lease, b.Digest); err != nil {
			return fmt.Errorf("release generation %d's memory blob %s from lease %s: %w", s.parent.Generation, b.Digest, s.res.Lease, err)
		}
		s.res.ReleasedMemory = append(s.res.ReleasedMemory, b.Digest)
	}
	return nil
}
