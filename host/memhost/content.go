package memhost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Put stores b under its sha256 digest, kept by the garbage collection,
// and returns its descriptor (digest and size, no media type).
func (h *Machine) Put(b []byte) ocispec.Descriptor {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.putLocked(b)
	h.pinned[d] = true
	return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
}

// PutBlob stores b as Put does and returns its digest.
func (h *Machine) PutBlob(b []byte) digest.Digest { return h.Put(b).Digest }

func (h *Machine) putLocked(b []byte) digest.Digest {
	d := digest.FromBytes(b)
	h.blobs[d] = slices.Clone(b)
	return d
}

// Blob returns a stored blob as it is stored (no check), or an error
// wrapping errdefs.ErrNotFound.
func (h *Machine) Blob(_ context.Context, d digest.Digest) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.blobs[d]
	if !ok {
		return nil, notFound("blob %s", d)
	}
	return slices.Clone(b), nil
}

// Len returns the number of stored blobs.
func (h *Machine) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.blobs)
}

// CorruptBlob replaces the stored bytes of blob d (a test's way to damage
// content: ReadBlob then reports errdefs.ErrDataLoss).
func (h *Machine) CorruptBlob(d digest.Digest, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.blobs[d] = slices.Clone(data)
	h.pinned[d] = true
}

// DeleteBlob removes blob d from the content store, whatever holds it;
// an absent blob is ignored.
func (h *Machine) DeleteBlob(d digest.Digest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.blobs, d)
	delete(h.pinned, d)
}

// Children returns the children SetChildren recorded for parent.
func (h *Machine) Children(parent digest.Digest) []digest.Digest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.children[parent])
}

// blob returns the stored bytes of d (not a copy); errdefs.ErrInvalidArgument
// for an invalid digest, errdefs.ErrNotFound for an absent blob. h.mu is
// held.
func (h *Machine) blob(d digest.Digest) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("digest %q: %w: %w", d, errdefs.ErrInvalidArgument, err)
	}
	b, ok := h.blobs[d]
	if !ok {
		return nil, notFound("blob %s", d)
	}
	return b, nil
}

// ReadBlob implements host.Content.
func (h *Machine) ReadBlob(ctx context.Context, d digest.Digest) ([]byte, error) {
	if err := h.enter(ctx, OpReadBlob); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	b, ok := h.blobs[d]
	if !ok {
		return nil, notFound("blob %s", d)
	}
	if len(b) > snapshot.MaxBlobRead {
		return nil, fmt.Errorf("blob %s: %d bytes, more than %d: %w", d, len(b), snapshot.MaxBlobRead, errdefs.ErrInvalidArgument)
	}
	if got := digest.FromBytes(b); got != d {
		return nil, fmt.Errorf("blob %s: the store holds bytes with digest %s: %w", d, got, errdefs.ErrDataLoss)
	}
	return slices.Clone(b), nil
}

// ReadSpec implements host.Content with snapshot.ReadBlob.
func (h *Machine) ReadSpec(ctx context.Context, d snapshot.Descriptor) ([]byte, error) {
	if err := h.enter(ctx, OpReadSpec); err != nil {
		return nil, err
	}
	b, err := h.blob(d.Digest)
	h.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return snapshot.ReadBlob(bytes.NewReader(b), d)
}

// BlobSize implements host.Content.
func (h *Machine) BlobSize(ctx context.Context, d digest.Digest) (int64, error) {
	if err := h.enter(ctx, OpBlobSize); err != nil {
		return 0, err
	}
	defer h.mu.Unlock()
	b, err := h.blob(d)
	return int64(len(b)), err
}

type storedBlob struct{ *bytes.Reader }

func (storedBlob) Close() error { return nil }

// OpenBlob implements host.Content: a reader of a copy of the blob.
func (h *Machine) OpenBlob(ctx context.Context, desc ocispec.Descriptor) (host.StoredBlob, error) {
	if err := h.enter(ctx, OpOpenBlob); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	b, err := h.blob(desc.Digest)
	if err != nil {
		return nil, err
	}
	return storedBlob{bytes.NewReader(slices.Clone(b))}, nil
}

// MissingContent implements host.Content: the absent digests among
// manifest, its config and layers (config first, then layers in order); an
// absent manifest is returned alone; errdefs.ErrInvalidArgument when the
// blob is not a manifest.
func (h *Machine) MissingContent(ctx context.Context, manifest digest.Digest) ([]digest.Digest, error) {
	if err := h.enter(ctx, OpMissingContent); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	return h.missing(manifest)
}

func (h *Machine) missing(manifest digest.Digest) ([]digest.Digest, error) {
	b, err := h.blob(manifest)
	if errdefs.IsNotFound(err) {
		return []digest.Digest{manifest}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: presence check: %w", manifest, err)
	}
	m, err := parseManifest(manifest, b)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: presence check: %w", manifest, err)
	}
	var missing []digest.Digest
	for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if _, err := h.blob(d.Digest); err != nil {
			missing = append(missing, d.Digest)
		}
	}
	return missing, nil
}

// WriteBlob implements host.Content.
func (h *Machine) WriteBlob(ctx context.Context, leaseID, _, mediaType string, data []byte) (ocispec.Descriptor, error) {
	if err := h.enter(ctx, OpWriteBlob); err != nil {
		return ocispec.Descriptor{}, err
	}
	defer h.mu.Unlock()
	return h.writeBlob(leaseID, mediaType, data)
}

func (h *Machine) writeBlob(leaseID, mediaType string, data []byte) (ocispec.Descriptor, error) {
	l, ok := h.leases[leaseID]
	if !ok {
		return ocispec.Descriptor{}, notFound("lease %s", leaseID)
	}
	d := h.putLocked(data)
	l.resources[d] = true
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}, nil
}

// SetChildren implements host.Content (Children reports what it
// recorded).
func (h *Machine) SetChildren(ctx context.Context, parent digest.Digest, children ...digest.Digest) error {
	if err := h.enter(ctx, OpSetChildren); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if _, ok := h.blobs[parent]; !ok {
		return notFound("blob %s", parent)
	}
	h.children[parent] = slices.Clone(children)
	return nil
}

// CheckDiff implements host.Content with snapshot.VerifyDiff, the full
// layer verifier: size, digest, and the decompression (by magic number:
// zstd, gzip or none) bounded by d.UncompressedSize with sha256 d.DiffID.
// It checks the diffID here because CreateContainer extracts nothing the
// daemon's way. A mismatch wraps snapshot.ErrDiffCorrupt; an absent blob
// errdefs.ErrNotFound.
func (h *Machine) CheckDiff(ctx context.Context, d snapshot.Layer) error {
	if err := h.enter(ctx, OpCheckDiff); err != nil {
		return err
	}
	b, err := h.blob(d.Digest)
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	return snapshot.VerifyDiff(bytes.NewReader(b), d)
}

func parseManifest(d digest.Digest, b []byte) (ocispec.Manifest, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("manifest %s: %w: %w", d, errdefs.ErrInvalidArgument, err)
	}
	if m.MediaType == ocispec.MediaTypeImageIndex || m.Config.Digest == "" {
		return m, fmt.Errorf("manifest %s: not an image manifest: %w", d, errdefs.ErrInvalidArgument)
	}
	return m, nil
}
