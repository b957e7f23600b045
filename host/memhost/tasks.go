package memhost

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// PauseTask implements host.Tasks.
func (h *Machine) PauseTask(ctx context.Context, id string) error {
	if err := h.enter(ctx, OpPauseTask); err != nil {
		return err
	}
	defer h.mu.Unlock()
	c, err := h.container(id)
	if err != nil {
		return err
	}
	switch c.Task {
	case snapshot.TaskRunning, snapshot.TaskPausing, snapshot.TaskPaused:
		c.Task = snapshot.TaskPaused
		return nil
	}
	return fmt.Errorf("pause task of %q: task is %q: %w", id, c.Task, errdefs.ErrFailedPrecondition)
}

// ResumeTask implements host.Tasks.
func (h *Machine) ResumeTask(ctx context.Context, id string) error {
	if err := h.enter(ctx, OpResumeTask); err != nil {
		return err
	}
	defer h.mu.Unlock()
	c, err := h.container(id)
	if err != nil {
		return err
	}
	switch c.Task {
	case snapshot.TaskRunning, snapshot.TaskPaused, snapshot.TaskPausing:
		c.Task = snapshot.TaskRunning
		return nil
	}
	return fmt.Errorf("resume task of %q: task is %q: %w", id, c.Task, errdefs.ErrFailedPrecondition)
}

// StopTask implements host.Tasks: the container has no task afterwards.
func (h *Machine) StopTask(ctx context.Context, id string) error {
	if err := h.enter(ctx, OpStopTask); err != nil {
		return err
	}
	defer h.mu.Unlock()
	c, err := h.container(id)
	if err != nil {
		return err
	}
	c.Task = snapshot.TaskNone
	return nil
}

// StartTask implements host.Tasks: the task runs with pid 4001, 4002, …
// (one sequence per host); errdefs.ErrNotFound for an unknown container,
// errdefs.ErrAlreadyExists when it has a task that did not stop.
func (h *Machine) StartTask(ctx context.Context, id string) (uint32, error) {
	if err := h.enter(ctx, OpStartTask); err != nil {
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
	h.nextPID++
	c.pid, c.Task = h.nextPID, snapshot.TaskRunning
	return c.pid, nil
}

// ExitTask marks container id's task stopped, as a crashed workload or a
// stopped incarnation leaves it; an unknown id is ignored.
func (h *Machine) ExitTask(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.containers[id]; ok {
		c.Task = snapshot.TaskStopped
	}
}
