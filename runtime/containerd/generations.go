package containerd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// This file implements the host methods of later generations
// (snapshot/generations.go; docs/design.md "SnapshotRef", "Suspend").

// CreateFlatDiff implements host.Differ: a View of the chain
// snapshot identity.ChainID(base) (key "<lease>/flatten-<unique>", under
// the lease, removed afterwards) is the lower, the container's active
// snapshot's mounts the upper, and the diff service's Compare writes the
// layer (media type ocispec.MediaTypeImageLayerZstd; gzip when the daemon
// cannot make zstd) under the lease with ingest ref "<lease>/flatten".
// The blob is then read back as CreateDiff's is: its uncompressed size
// measured and its digest checked against the diffID the differ labelled
// it with. p (nil: none) gets the bytes written while the daemon writes
// them. An absent chain snapshot wraps errdefs.ErrNotFound.
func (r *Runtime) CreateFlatDiff(ctx context.Context, lease string, c snapshot.Container, base []digest.Digest, p snapshot.Progress) (snapshot.Layer, error) {
	lctx := leases.WithLease(ctx, lease)
	sn := r.client.SnapshotService(c.Snapshotter)
	chain := ""
	if len(base) > 0 {
		chain = identity.ChainID(base).String()
		if _, err := sn.Stat(ctx, chain); err != nil {
			return snapshot.Layer{}, fmt.Errorf("flatten snapshot %s/%s: base chain snapshot %s: %w", c.Snapshotter, c.SnapshotKey, chain, native(err))
		}
	}
	viewKey := fmt.Sprintf("%s/flatten-%d", lease, time.Now().UnixNano())
	lower, err := sn.View(lctx, viewKey, chain)
	if err != nil {
		return snapshot.Layer{}, fmt.Errorf("flatten snapshot %s/%s: view of %s: %w", c.Snapshotter, c.SnapshotKey, chain, native(err))
	}
	defer func() { _ = sn.Remove(context.WithoutCancel(ctx), viewKey) }()
	upper, err := sn.Mounts(ctx, c.SnapshotKey)
	if err != nil {
		return snapshot.Layer{}, fmt.Errorf("flatten snapshot %s/%s: mounts: %w", c.Snapshotter, c.SnapshotKey, native(err))
	}
	ref := lease + "/flatten"
	done := r.watchIngest(ctx, ref, p)
	desc, err := r.client.DiffService().Compare(lctx, lower, upper,
		diff.WithMediaType(ocispec.MediaTypeImageLayerZstd), diff.WithReference(ref))
	if errdefs.IsNotImplemented(native(err)) {
		desc, err = r.client.DiffService().Compare(lctx, lower, upper,
			diff.WithMediaType(ocispec.MediaTypeImageLayerGzip), diff.WithReference(ref))
	}
	done(desc.Size)
	if err != nil {
		if aerr := r.client.ContentStore().Abort(ctx, ref); aerr != nil && !errdefs.IsNotFound(native(aerr)) {
			err = errors.Join(err, fmt.Errorf("abort ingest %s: %w", ref, native(aerr)))
		}
		return snapshot.Layer{}, fmt.Errorf("flatten snapshot %s/%s against %s: %w", c.Snapshotter, c.SnapshotKey, chain, native(err))
	}
	if err := r.addContent(ctx, lease, desc.Digest); err != nil {
		return snapshot.Layer{}, err
	}
	cs := r.client.ContentStore()
	diffID, err := images.GetDiffID(lctx, cs, desc)
	if err != nil {
		return snapshot.Layer{}, fmt.Errorf("flattened diff %s: diffID: %w", desc.Digest, native(err))
	}
	n, computed, err := uncompressedDigest(lctx, cs, desc)
	if err != nil {
		return snapshot.Layer{}, err
	}
	if computed != diffID {
		return snapshot.Layer{}, fmt.Errorf("flattened diff %s: decompressed content is %s, but the differ labelled it %s: %w", desc.Digest, computed, diffID, errdefs.ErrDataLoss)
	}
	return snapshot.Layer{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, DiffID: diffID, UncompressedSize: n}, nil
}

// ReleaseBlob implements host.Leases
// (LeasesService.DeleteResource of the content resource d). A blob the
// lease does not hold is no error; an absent lease wraps
// errdefs.ErrNotFound.
func (r *Runtime) ReleaseBlob(ctx context.Context, lease string, d digest.Digest) error {
	l, err := r.lease(ctx, lease)
	if err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("lease %s in namespace %s: %w", lease, r.namespace, errdefs.ErrNotFound)
	}
	err = r.client.LeasesService().DeleteResource(ctx, *l, leases.Resource{ID: d.String(), Type: leaseResourceContent})
	if err != nil && !errdefs.IsNotFound(native(err)) {
		return fmt.Errorf("lease %s: release content %s: %w", lease, d, native(err))
	}
	return nil
}

// ingestPollInterval is how often watchIngest reads an ingest's offset.
const ingestPollInterval = 200 * time.Millisecond

// watchIngest reports, to p (nothing when it is nil), the bytes the daemon has written to the ingest ref —
// a diff the daemon is writing — by reading its status every
// ingestPollInterval. The function it returns stops the watch and reports
// what is left up to size, the blob's final size (0 or less: nothing).
func (r *Runtime) watchIngest(ctx context.Context, ref string, p snapshot.Progress) func(size int64) {
	if p == nil {
		return func(int64) {}
	}
	var (
		mu   sync.Mutex
		seen int64
	)
	report := func(offset int64) {
		mu.Lock()
		defer mu.Unlock()
		if offset > seen {
			p.Add(offset - seen)
			seen = offset
		}
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(ingestPollInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if st, err := r.client.ContentStore().Status(ctx, ref); err == nil {
					report(st.Offset)
				}
			}
		}
	}()
	return func(size int64) {
		close(stop)
		<-finished
		report(size)
	}
}
