package memhost

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// chainSnap is a chain snapshot CommitChain recorded: its labels and the
// chain snapshot it is on ("" for none).
type chainSnap struct {
	labels map[string]string
	parent digest.Digest
}

// CommitChain implements host.Containers in memory: the chain snapshot
// identity.ChainID(chain) is recorded with the labels and held by the
// lease, and the container's snapshot then reports it as its parent (its
// files do not change); one that exists is only held by the lease.
func (h *Machine) CommitChain(ctx context.Context, leaseID string, sc snapshot.Container, chain []digest.Digest, labels map[string]string) (bool, error) {
	if err := h.enter(ctx, OpCommitChain); err != nil {
		return false, err
	}
	defer h.mu.Unlock()
	if len(chain) == 0 {
		return false, fmt.Errorf("commit the snapshot of container %q: no chain: %w", sc.ID, errdefs.ErrInvalidArgument)
	}
	name := identity.ChainID(chain)
	l, err := h.lease(leaseID)
	if err != nil {
		return false, err
	}
	if l.chains == nil {
		l.chains = map[digest.Digest]bool{}
	}
	if _, ok := h.chains[name]; ok {
		l.chains[name] = true
		return false, nil
	}
	c, err := h.container(sc.ID)
	if err != nil {
		return false, err
	}
	parent := identity.ChainID(chain[:len(chain)-1]).String()
	cur := c.parent
	if cur == "" {
		ch := c.chain
		if !c.created {
			ch = append(h.imageDiffIDs(c.Image), c.Layers...)
		}
		if len(ch) > 0 {
			cur = identity.ChainID(ch).String()
		}
	}
	if cur != parent {
		return false, fmt.Errorf("container %q: snapshot on %q, not on %s: %w", sc.ID, cur, parent, errdefs.ErrFailedPrecondition)
	}
	l.chains[name] = true
	h.chains[name] = chainSnap{labels: maps.Clone(labels), parent: digest.Digest(parent)}
	c.parent = name.String()
	return true, nil
}

// ChainSnapshot implements host.Containers: the labels of a chain
// snapshot CommitChain recorded (this host extracts nothing, so no other
// chain snapshot exists).
func (h *Machine) ChainSnapshot(ctx context.Context, chain []digest.Digest) (map[string]string, error) {
	if err := h.enter(ctx, OpChainSnapshot); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	cs, ok := h.chains[identity.ChainID(chain)]
	if !ok {
		return nil, notFound("chain snapshot %s", identity.ChainID(chain))
	}
	return maps.Clone(cs.labels), nil
}

// ReleaseChain implements host.Leases: the lease no longer holds the
// chain snapshot, which goes unless another lease holds it or a
// container's snapshot is on it.
func (h *Machine) ReleaseChain(ctx context.Context, leaseID string, chain []digest.Digest) error {
	if err := h.enter(ctx, OpReleaseChain); err != nil {
		return err
	}
	defer h.mu.Unlock()
	l, err := h.lease(leaseID)
	if err != nil {
		return err
	}
	delete(l.chains, identity.ChainID(chain))
	h.gcChains()
	return nil
}

// RemoveChain removes a chain snapshot as if it had been collected (a
// test's fallback case).
func (h *Machine) RemoveChain(chain []digest.Digest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.chains, identity.ChainID(chain))
}

// LeaseChains returns the chain snapshots (by chain id) the lease holds,
// sorted; nil when the lease does not exist.
func (h *Machine) LeaseChains(leaseID string) []digest.Digest {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.leases[leaseID]
	if !ok {
		return nil
	}
	out := slices.Collect(maps.Keys(l.chains))
	slices.Sort(out)
	return out
}

// gcChains removes the chain snapshots that no lease holds, no
// container's snapshot is on and no kept chain snapshot is on, as
// containerd's garbage collection would.
func (h *Machine) gcChains() {
	keep := map[digest.Digest]bool{}
	for _, l := range h.leases {
		for d := range l.chains {
			keep[d] = true
		}
	}
	for _, c := range h.containers {
		if c.parent != "" {
			keep[digest.Digest(c.parent)] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for d := range keep {
			if p := h.chains[d].parent; p != "" && !keep[p] {
				keep[p], changed = true, true
			}
		}
	}
	for d := range h.chains {
		if !keep[d] {
			delete(h.chains, d)
		}
	}
}
