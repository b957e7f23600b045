package containerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// This file holds what export, import, push and pull share (DESIGN "Moving
// runs"): the migration artifact written into the content store, the run
// lease, temporary leases, and the bounded diffID check.

// TempLeaseExpiry is how long a temporary import or pull lease lives if the
// process dies before deleting it.
const TempLeaseExpiry = time.Hour

// StoredArtifact is the migration artifact of a run as written into the
// content store by StoreArtifact: the ref (decoded, not signature-checked:
// the receiving host verifies it), the artifact manifest's descriptor, the
// base image's platform manifest descriptor (the subject), and the run
// lease that holds them.
type StoredArtifact struct {
	Ref      *snapshot.Ref
	Manifest ocispec.Descriptor
	Config   ocispec.Descriptor
	Layer    ocispec.Descriptor
	Base     ocispec.Descriptor
	Lease    string
}

// StoreArtifact writes the migration artifact of the run recorded in
// refFile into the content store (DESIGN "Moving runs"): the config blob
// (media type snapshot.MediaTypeRef, refFile's exact bytes) and the
// artifact manifest (snapshot.ArtifactManifest), both held by the run
// lease snapshot.RunLease(run) (created when absent, labelled with the run
// and the ref's creation time), and returns their descriptors. The same
// ref always gives the same manifest digest.
//
// refFile goes through snapshot.OpenRefUnsafe (parse, schema,
// integrity: the receiving host checks the signature). Errors: those of the
// ref (exit 2 or 6); snapshot.ErrSnapshotMissing when the rootfs diff is
// absent or has another size (exit 7); snapshot.ErrImageUnresolved when the
// base platform manifest is absent (exit 5); daemon errors classified with
// errdefs. Each names the digest.
func (r *Runtime) StoreArtifact(ctx context.Context, refFile []byte) (*StoredArtifact, error) {
	ref, err := snapshot.OpenRefUnsafe(refFile)
	if err != nil {
		return nil, err
	}
	cs := r.client.ContentStore()
	d := ref.Layers[0]
	info, err := cs.Info(ctx, d.Digest)
	switch {
	case errdefs.IsNotFound(native(err)):
		return nil, fmt.Errorf("run %s: rootfsDiff %s is not in the content store of namespace %s: %w", ref.Run, d.Digest, r.namespace, snapshot.ErrSnapshotMissing)
	case err != nil:
		return nil, fmt.Errorf("run %s: rootfsDiff %s: %w", ref.Run, d.Digest, native(err))
	case info.Size != d.Size:
		return nil, fmt.Errorf("run %s: rootfsDiff %s is %d bytes in the content store, the ref records %d: %w", ref.Run, d.Digest, info.Size, d.Size, snapshot.ErrSnapshotMissing)
	}
	base, err := r.baseManifest(ctx, ref)
	if err != nil {
		return nil, err
	}
	body, mdesc, err := snapshot.ArtifactManifest(refFile, ref, base)
	if err != nil {
		return nil, err
	}
	lease, err := r.ensureRunLease(ctx, ref)
	if err != nil {
		return nil, err
	}
	cfg, err := r.WriteBlob(ctx, lease, lease+"/ref", snapshot.MediaTypeRef, refFile)
	if err != nil {
		return nil, err
	}
	if _, err := r.WriteBlob(ctx, lease, lease+"/artifact", ocispec.MediaTypeImageManifest, body); err != nil {
		return nil, err
	}
	// Children labels, so that the artifact manifest keeps its config and
	// layer alive for whoever names it, as pulled images do.
	labels := map[string]string{
		"containerd.io/gc.ref.content.config": cfg.Digest.String(),
		"containerd.io/gc.ref.content.l.0":    d.Digest.String(),
	}
	if _, err := cs.Update(ctx, content.Info{Digest: mdesc.Digest, Labels: labels},
		"labels.containerd.io/gc.ref.content.config", "labels.containerd.io/gc.ref.content.l.0"); err != nil {
		return nil, fmt.Errorf("artifact manifest %s: label: %w", mdesc.Digest, native(err))
	}
	if err := r.addContent(ctx, lease, d.Digest, base.Digest); err != nil {
		return nil, err
	}
	return &StoredArtifact{
		Ref: ref, Manifest: mdesc, Config: cfg, Base: base, Lease: lease,
		Layer: ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size},
	}, nil
}

// baseManifest returns the descriptor of the ref's base platform manifest
// from the content store, or an error wrapping snapshot.ErrImageUnresolved.
func (r *Runtime) baseManifest(ctx context.Context, ref *snapshot.Ref) (ocispec.Descriptor, error) {
	dg := ref.Base.ManifestDigest
	data, err := readBlob(ctx, r.client.ContentStore(), ocispec.Descriptor{Digest: dg})
	if errdefs.IsNotFound(err) {
		return ocispec.Descriptor{}, fmt.Errorf("run %s: base manifest %s (%s) is not in the content store of namespace %s: %w",
			ref.Run, dg, ref.Base.Name, r.namespace, snapshot.ErrImageUnresolved)
	}
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("run %s: base manifest: %w", ref.Run, err)
	}
	mt, err := detectMediaType(data)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("run %s: base manifest %s: %w", ref.Run, dg, err)
	}
	return ocispec.Descriptor{MediaType: mt, Digest: dg, Size: int64(len(data))}, nil
}

// ensureRunLease creates the run lease of ref when it does not exist and
// returns its id.
func (r *Runtime) ensureRunLease(ctx context.Context, ref *snapshot.Ref) (string, error) {
	id := snapshot.RunLease(ref.Run)
	err := r.CreateLease(ctx, id, map[string]string{snapshot.LabelRun: ref.Run, snapshot.LabelCreated: ref.Created})
	if err != nil && !errdefs.IsAlreadyExists(err) {
		return "", err
	}
	return id, nil
}

// tempLease creates a lease with a random id expiring after
// TempLeaseExpiry; done deletes it (synchronously: whatever only it held is
// collected when done returns).
func (r *Runtime) tempLease(ctx context.Context) (string, func(), error) {
	ls := r.client.LeasesService()
	l, err := ls.Create(ctx, leases.WithRandomID(), leases.WithExpiration(TempLeaseExpiry),
		leases.WithLabel(snapshot.LabelPrefix+"temporary", "move"))
	if err != nil {
		return "", nil, fmt.Errorf("create temporary lease: %w", native(err))
	}
	return l.ID, func() {
		_ = ls.Delete(context.WithoutCancel(ctx), l, leases.SynchronousDelete)
	}, nil
}

// checkStored checks that every digest is in the content store with the
// given size; a difference wraps snapshot.ErrArtifactRefused.
func (r *Runtime) checkStored(ctx context.Context, sizes map[digest.Digest]int64) error {
	cs := r.client.ContentStore()
	for d, n := range sizes {
		info, err := cs.Info(ctx, d)
		if errdefs.IsNotFound(native(err)) {
			return fmt.Errorf("blob %s is not in the content store after the import: %w", d, snapshot.ErrArtifactRefused)
		}
		if err != nil {
			return fmt.Errorf("blob %s: %w", d, native(err))
		}
		if info.Size != n {
			return fmt.Errorf("blob %s is %d bytes in the content store, %d expected: %w", d, info.Size, n, snapshot.ErrArtifactRefused)
		}
	}
	return nil
}

// VerifyDiff checks the rootfs diff blob in the content store against the
// verified ref with snapshot.VerifyDiff (size, digest, diffID, a
// decompression bounded by d.UncompressedSize), for a blob that came with
// an archive or from a registry: a mismatch wraps both
// snapshot.ErrDiffCorrupt and snapshot.ErrArtifactRefused (the artifact is
// refused, exit 2) and names the digests; an absent blob wraps
// errdefs.ErrNotFound.
func (r *Runtime) VerifyDiff(ctx context.Context, d snapshot.Layer) error {
	err := r.CheckDiff(ctx, d)
	if errors.Is(err, snapshot.ErrDiffCorrupt) {
		return fmt.Errorf("%w: %w", err, snapshot.ErrArtifactRefused)
	}
	return err
}

// holdRun adds the digests to the run lease of ref (created when absent)
// and returns the lease id.
func (r *Runtime) holdRun(ctx context.Context, ref *snapshot.Ref, dgsts ...digest.Digest) (string, error) {
	lease, err := r.ensureRunLease(ctx, ref)
	if err != nil {
		return "", err
	}
	return lease, r.addContent(ctx, lease, dgsts...)
}

// writeSmall writes a small verified blob under the lease in ctx.
func (r *Runtime) writeSmall(ctx context.Context, ref string, desc ocispec.Descriptor, data []byte) error {
	if err := content.WriteBlob(ctx, r.client.ContentStore(), ref, bytes.NewReader(data), desc); err != nil && !errdefs.IsAlreadyExists(native(err)) {
		return fmt.Errorf("write blob %s: %w", desc.Digest, native(err))
	}
	return nil
}
