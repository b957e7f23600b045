package fake

import (
	"context"
	"maps"
	"sync"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// DefaultNamespace is the namespace a fake Facts reports until
// SetNamespace changes it.
const DefaultNamespace = "fake"

// hostState is the part of the fake host that the claim check reads and
// the fake Materializer writes: containers, `/1` claim leases, the
// resumer-liveness rule and the refs stored under run leases.
type hostState struct {
	mu         sync.Mutex
	namespace  string
	containers map[string]*Container
	legacy     map[string]resume.LegacyClaim
	alive      func(ledger.Holder) bool
	refs       map[string]map[string][]byte // run → ref digest → bytes
	// hostNamespace is SetHostNamespace's rule; nil: the default.
	hostNamespace func(nsType, path string) bool
}

func newHostState() *hostState {
	return &hostState{
		namespace:  DefaultNamespace,
		containers: map[string]*Container{},
		legacy:     map[string]resume.LegacyClaim{},
		refs:       map[string]map[string][]byte{},
	}
}

// SetNamespace sets the namespace Namespace reports.
func (f *Facts) SetNamespace(ns string) {
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	f.state.namespace = ns
}

// Namespace returns the namespace of the fake host (DefaultNamespace unless
// SetNamespace changed it).
func (f *Facts) Namespace() string {
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	return f.state.namespace
}

// SetResumerAlive replaces the rule ResumerAlive applies; nil restores the
// default, resume.ProcessAlive of the holder's pid, start time and boot id
// (the real /proc rule).
func (f *Facts) SetResumerAlive(alive func(ledger.Holder) bool) {
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	f.state.alive = alive
}

// ResumerAlive applies the rule SetResumerAlive set, by default
// resume.ProcessAlive.
func (f *Facts) ResumerAlive(h ledger.Holder) bool {
	f.state.mu.Lock()
	alive := f.state.alive
	f.state.mu.Unlock()
	if alive != nil {
		return alive(h)
	}
	return resume.ProcessAlive(h.PID, h.Start, h.Boot)
}

// SetLegacyClaim records a `/1` claim lease of run naming container;
// DeleteLegacyClaim removes it.
func (f *Facts) SetLegacyClaim(run, container string) {
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	f.state.legacy[run] = resume.LegacyClaim{Lease: snapshot.ClaimLease(run), Container: container}
}

// DeleteLegacyClaim removes run's `/1` claim lease, reporting whether it
// existed.
func (f *Facts) DeleteLegacyClaim(run string) bool {
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	_, ok := f.state.legacy[run]
	delete(f.state.legacy, run)
	return ok
}

// LegacyClaim returns run's `/1` claim lease, or nil.
func (f *Facts) LegacyClaim(ctx context.Context, run string) (*resume.LegacyClaim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	lc, ok := f.state.legacy[run]
	if !ok {
		return nil, nil
	}
	return &lc, nil
}

// ContainerState reports container id as the claim check sees it: its labels
// and whether its task runs; nil when it does not exist.
func (f *Facts) ContainerState(ctx context.Context, id string) (*resume.ContainerState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	c, ok := f.state.containers[id]
	if !ok {
		return nil, nil
	}
	return &resume.ContainerState{ID: id, Labels: maps.Clone(c.Labels), Running: c.Pid != 0 && !c.Stopped}, nil
}

// PutContainer adds (or replaces) a container as a test plays another
// process or the runtime: id, labels, and a task pid (0: no task).
func (f *Facts) PutContainer(id string, labels map[string]string, pid uint32) {
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	f.state.containers[id] = &Container{Spec: resume.ContainerSpec{ID: id}, Labels: maps.Clone(labels), Pid: pid}
}

// StopTask marks container id's task stopped (a crashed workload or a
// stopped incarnation); an unknown id is ignored.
func (f *Facts) StopTask(id string) {
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	if c, ok := f.state.containers[id]; ok {
		c.Stopped = true
	}
}

// Refs returns the ref digests stored under run's run lease (StoreRef).
func (f *Facts) Refs(run string) []string {
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	var out []string
	for d := range f.state.refs[run] {
		out = append(out, d)
	}
	return out
}
