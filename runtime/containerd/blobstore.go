package containerd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// This file implements host.Content, Leases, Images and Archiver on *Runtime: the content store,
// leases and archive code that export, import, push and pull run over.
// What to send and what to accept is decided in migrate.

// TempLeaseExpiry is how long a temporary lease (TempLease: import and
// pull) lives if the process dies before deleting it.
const TempLeaseExpiry = time.Hour

// ReadBlob implements host.Content: the
// bytes of a small blob (at most 4 MiB, snapshot.MaxBlobRead: an index, a
// manifest, a config, a ref file, a runtime spec), digest checked. Errors name
// the digest: errdefs.ErrNotFound when absent, errdefs.ErrInvalidArgument
// when too large or the digest is invalid, errdefs.ErrDataLoss when the
// bytes do not match.
func (r *Runtime) ReadBlob(ctx context.Context, d digest.Digest) ([]byte, error) {
	return readBlob(ctx, r.client.ContentStore(), ocispec.Descriptor{Digest: d})
}

// OpenBlob implements host.Content: a reader of the blob in place
// (the blob file itself when the daemon's directory is visible here,
// localcontent.go). An absent blob wraps errdefs.ErrNotFound.
func (r *Runtime) OpenBlob(ctx context.Context, desc ocispec.Descriptor) (host.StoredBlob, error) {
	ra, err := r.blobProvider(ctx).ReaderAt(ctx, desc)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", desc.Digest, native(err))
	}
	return ra, nil
}

// SetChildren implements host.Content with containerd's garbage
// collection labels on parent: "containerd.io/gc.ref.content.config" for
// the first child, "containerd.io/gc.ref.content.l.<i>" for the others.
func (r *Runtime) SetChildren(ctx context.Context, parent digest.Digest, children ...digest.Digest) error {
	labels := map[string]string{}
	var fields []string
	for i, c := range children {
		key := "containerd.io/gc.ref.content.config"
		if i > 0 {
			key = fmt.Sprintf("containerd.io/gc.ref.content.l.%d", i-1)
		}
		labels[key] = c.String()
		fields = append(fields, "labels."+key)
	}
	if _, err := r.client.ContentStore().Update(ctx, content.Info{Digest: parent, Labels: labels}, fields...); err != nil {
		return fmt.Errorf("blob %s: label its children: %w", parent, native(err))
	}
	return nil
}

// TempLease implements host.Leases: a lease with a random id expiring
// after TempLeaseExpiry, labelled io.sandbox-resume.temporary; release
// deletes it synchronously (whatever only it held is collected when
// release returns).
func (r *Runtime) TempLease(ctx context.Context) (string, func(), error) {
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

// AddToLease implements host.Leases: each blob becomes a content
// resource of the lease (idempotent).
func (r *Runtime) AddToLease(ctx context.Context, lease string, blobs ...digest.Digest) error {
	return r.addContent(ctx, lease, blobs...)
}

// WriteArchive implements host.Archiver with containerd's archive
// exporter (core/images/archive.Export, which checks each blob's digest as
// it copies it, over the content store: blob files read in place when the
// daemon's directory is visible here, else read ahead readBufferSize bytes
// at a time; localcontent.go) and archive.WithSkipDockerManifest
// (no Docker manifest.json that would present a ref as an image config).
func (r *Runtime) WriteArchive(ctx context.Context, w io.Writer, entries ...host.ArchiveEntry) error {
	eopts := []archive.ExportOpt{archive.WithSkipDockerManifest()}
	for _, e := range entries {
		if e.Name != "" {
			eopts = append(eopts, archive.WithManifest(e.Desc, e.Name))
		} else {
			eopts = append(eopts, archive.WithManifest(e.Desc))
		}
	}
	if err := archive.Export(ctx, r.blobProvider(ctx), w, eopts...); err != nil {
		return native(err)
	}
	return nil
}

// ImportArchive implements host.Archiver with containerd's
// archive.ImportIndex under the lease: it stores the blobs and creates no
// image records.
func (r *Runtime) ImportArchive(ctx context.Context, lease string, rd io.Reader) (digest.Digest, error) {
	idx, err := archive.ImportIndex(leases.WithLease(ctx, lease), r.client.ContentStore(), rd)
	if err != nil {
		return "", native(err)
	}
	return idx.Digest, nil
}

// ImageTarget implements host.Images: the target of the image record
// name in this namespace; errdefs.ErrNotFound when there is none.
func (r *Runtime) ImageTarget(ctx context.Context, name string) (ocispec.Descriptor, error) {
	img, err := r.client.ImageService().Get(ctx, name)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("image %s in namespace %s: %w", name, r.namespace, native(err))
	}
	return img.Target, nil
}

// CreateImage implements host.Images: an image record name → target in
// this namespace, created only (images.Store.Create): an existing name is
// errdefs.ErrAlreadyExists and keeps its target.
func (r *Runtime) CreateImage(ctx context.Context, name string, target ocispec.Descriptor) error {
	if _, err := r.client.ImageService().Create(ctx, images.Image{Name: name, Target: target}); err != nil {
		return fmt.Errorf("create image %s in namespace %s: %w", name, r.namespace, native(err))
	}
	return nil
}
