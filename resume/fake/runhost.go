package fake

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

var _ resume.RunHost = (*Materializer)(nil)

// LegacyClaim is Facts.LegacyClaim of the facts m is over.
func (m *Materializer) LegacyClaim(ctx context.Context, run string) (*resume.LegacyClaim, error) {
	return m.facts.LegacyClaim(ctx, run)
}

// RunContainers returns the containers of the fake host labelled with run
// (snapshot.LabelRun), sorted by id, with their labels and whether their
// task runs.
func (m *Materializer) RunContainers(ctx context.Context, run string) ([]resume.ContainerState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := m.facts.state
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []resume.ContainerState
	for _, id := range slices.Sorted(maps.Keys(st.containers)) {
		c := st.containers[id]
		if c.Labels[snapshot.LabelRun] == run {
			out = append(out, resume.ContainerState{ID: id, Labels: maps.Clone(c.Labels), Running: c.Pid != 0 && !c.Stopped})
		}
	}
	return out, nil
}

// DeleteLease deletes a lease of the fake host: a run lease
// (snapshot.RunLease) exists while StoreRef has stored a ref of its run,
// and deleting it forgets them (Facts.Refs); a claim lease
// (snapshot.ClaimLease) is the `/1` claim SetLegacyClaim recorded. Any
// other id, or a lease that does not exist, is errdefs.ErrNotFound.
func (m *Materializer) DeleteLease(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st := m.facts.state
	st.mu.Lock()
	defer st.mu.Unlock()
	for run := range st.refs {
		if snapshot.RunLease(run) == id {
			delete(st.refs, run)
			return nil
		}
	}
	for run := range st.legacy {
		if snapshot.ClaimLease(run) == id {
			delete(st.legacy, run)
			return nil
		}
	}
	return fmt.Errorf("lease %s: %w", id, errdefs.ErrNotFound)
}
