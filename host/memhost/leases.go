package memhost

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

type lease struct {
	l         snapshot.Lease
	resources map[digest.Digest]bool
	chains    map[digest.Digest]bool // chain snapshots held (CommitChain)
}

func (h *Machine) lease(id string) (*lease, error) {
	l, ok := h.leases[id]
	if !ok {
		return nil, notFound("lease %s", id)
	}
	return l, nil
}

// CreateLease implements host.Leases.
func (h *Machine) CreateLease(ctx context.Context, id string, labels map[string]string) error {
	if err := h.enter(ctx, OpCreateLease); err != nil {
		return err
	}
	defer h.mu.Unlock()
	return h.createLease(id, labels)
}

func (h *Machine) createLease(id string, labels map[string]string) error {
	if _, ok := h.leases[id]; ok {
		return fmt.Errorf("lease %q: %w", id, errdefs.ErrAlreadyExists)
	}
	h.leases[id] = &lease{
		l:         snapshot.Lease{ID: id, Labels: maps.Clone(labels), CreatedAt: time.Now().UTC()},
		resources: map[digest.Digest]bool{},
	}
	return nil
}

// Lease implements host.Leases.
func (h *Machine) Lease(ctx context.Context, id string) (snapshot.Lease, error) {
	if err := h.enter(ctx, OpLease); err != nil {
		return snapshot.Lease{}, err
	}
	defer h.mu.Unlock()
	l, ok := h.leases[id]
	if !ok {
		return snapshot.Lease{}, fmt.Errorf("lease %q: %w", id, errdefs.ErrNotFound)
	}
	out := l.l
	out.Labels = maps.Clone(out.Labels)
	return out, nil
}

// DeleteLease implements host.Leases: the lease is deleted and (as a
// synchronous GC would) every blob nothing else holds.
func (h *Machine) DeleteLease(ctx context.Context, id string) error {
	if err := h.enter(ctx, OpDeleteLease); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if _, err := h.lease(id); err != nil {
		return err
	}
	delete(h.leases, id)
	h.gc()
	return nil
}

// GC removes every blob that no lease, AddImage record or test holds, as
// containerd's garbage collection would.
func (h *Machine) GC() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gc()
}

func (h *Machine) gc() {
	keep := maps.Clone(h.pinned)
	for _, img := range h.records {
		for _, d := range recordBlobs(img) {
			keep[d] = true
		}
	}
	for _, l := range h.leases {
		for d := range l.resources {
			keep[d] = true
		}
	}
	for d := range h.blobs {
		if !keep[d] {
			delete(h.blobs, d)
		}
	}
	h.gcChains()
}

// TempLease implements host.Leases: leases "temp-1", "temp-2", …; release
// deletes the lease and the blobs it held that no other lease and no test
// holds.
func (h *Machine) TempLease(ctx context.Context) (string, func(), error) {
	if err := h.enter(ctx, OpTempLease); err != nil {
		return "", nil, err
	}
	defer h.mu.Unlock()
	h.temp++
	id := fmt.Sprintf("temp-%d", h.temp)
	if err := h.createLease(id, nil); err != nil {
		return "", nil, err
	}
	return id, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		l, ok := h.leases[id]
		if !ok {
			return
		}
		delete(h.leases, id)
		for d := range l.resources {
			kept := h.pinned[d]
			for _, other := range h.leases {
				kept = kept || other.resources[d]
			}
			if !kept {
				delete(h.blobs, d)
			}
		}
	}, nil
}

// AddToLease implements host.Leases.
func (h *Machine) AddToLease(ctx context.Context, id string, blobs ...digest.Digest) error {
	if err := h.enter(ctx, OpAddToLease); err != nil {
		return err
	}
	defer h.mu.Unlock()
	return h.addToLease(id, blobs...)
}

func (h *Machine) addToLease(id string, blobs ...digest.Digest) error {
	for _, d := range blobs {
		if _, ok := h.blobs[d]; !ok {
			return notFound("blob %s", d)
		}
		l, err := h.lease(id)
		if err != nil {
			return err
		}
		l.resources[d] = true
	}
	return nil
}

// ReleaseBlob implements host.Leases (the blob stays in the store until a
// GC finds nothing holding it).
func (h *Machine) ReleaseBlob(ctx context.Context, id string, d digest.Digest) error {
	if err := h.enter(ctx, OpReleaseBlob); err != nil {
		return err
	}
	defer h.mu.Unlock()
	l, err := h.lease(id)
	if err != nil {
		return err
	}
	delete(l.resources, d)
	return nil
}

// HoldBase implements host.Leases: the index, manifest, config and the
// layers of an AddImage record or of the stored manifest.
func (h *Machine) HoldBase(ctx context.Context, id string, base snapshot.Base) error {
	if err := h.enter(ctx, OpHoldBase); err != nil {
		return err
	}
	defer h.mu.Unlock()
	l, err := h.lease(id)
	if err != nil {
		return err
	}
	for _, d := range append([]digest.Digest{base.IndexDigest, base.ManifestDigest, base.ConfigDigest}, h.baseLayers(base)...) {
		if d == "" {
			continue
		}
		if _, ok := h.blobs[d]; !ok {
			return notFound("base content %s", d)
		}
		l.resources[d] = true
	}
	return nil
}

// StoreRef implements host.Leases: the run lease (labelled
// snapshot.LabelRun) is created when missing and holds the ref blob
// (media type snapshot.MediaTypeRef); Refs lists what was stored.
func (h *Machine) StoreRef(ctx context.Context, run string, ref []byte) error {
	if err := h.enter(ctx, OpStoreRef); err != nil {
		return err
	}
	defer h.mu.Unlock()
	id := snapshot.RunLease(run)
	if err := h.createLease(id, map[string]string{snapshot.LabelRun: run}); err != nil && !errdefs.IsAlreadyExists(err) {
		return err
	}
	desc, err := h.writeBlob(id, snapshot.MediaTypeRef, ref)
	if err != nil {
		return err
	}
	if h.refs[run] == nil {
		h.refs[run] = map[digest.Digest]bool{}
	}
	h.refs[run][desc.Digest] = true
	return nil
}

// Refs returns the digests of the refs StoreRef stored that run's run
// lease still holds.
func (h *Machine) Refs(run string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.leases[snapshot.RunLease(run)]
	if !ok {
		return nil
	}
	var out []string
	for d := range h.refs[run] {
		if l.resources[d] {
			out = append(out, d.String())
		}
	}
	slices.Sort(out)
	return out
}

// LegacyClaim implements host.Leases: the lease snapshot.ClaimLease(run)
// and its host.LabelLegacyClaimContainer label.
func (h *Machine) LegacyClaim(ctx context.Context, run string) (*host.LegacyClaim, error) {
	if err := h.enter(ctx, OpLegacyClaim); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	id := snapshot.ClaimLease(run)
	l, ok := h.leases[id]
	if !ok {
		return nil, nil
	}
	return &host.LegacyClaim{Lease: id, Container: l.l.Labels[host.LabelLegacyClaimContainer]}, nil
}

// SetLegacyClaim records a `/1` claim lease of run naming container (the
// lease snapshot.ClaimLease(run), replaced when it exists).
func (h *Machine) SetLegacyClaim(run, container string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := snapshot.ClaimLease(run)
	delete(h.leases, id)
	_ = h.createLease(id, map[string]string{host.LabelLegacyClaimContainer: container})
}

// DeleteLegacyClaim removes run's `/1` claim lease, reporting whether it
// existed.
func (h *Machine) DeleteLegacyClaim(run string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := snapshot.ClaimLease(run)
	_, ok := h.leases[id]
	delete(h.leases, id)
	return ok
}

// LeaseHolds reports whether the lease holds the blob; an absent lease
// wraps errdefs.ErrNotFound.
func (h *Machine) LeaseHolds(_ context.Context, id string, d digest.Digest) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, err := h.lease(id)
	if err != nil {
		return false, err
	}
	return l.resources[d], nil
}

// Holds reports whether the lease exists and holds the blob.
func (h *Machine) Holds(id string, d digest.Digest) bool {
	ok, err := h.LeaseHolds(context.Background(), id, d)
	return err == nil && ok
}

// Leases returns the ids of the leases, sorted.
func (h *Machine) Leases() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.leases))
}

// LeaseLabels returns the labels of the lease (nil when it has none or
// does not exist).
func (h *Machine) LeaseLabels(id string) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l, ok := h.leases[id]; ok {
		return maps.Clone(l.l.Labels)
	}
	return nil
}
