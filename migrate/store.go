package migrate

import (
	"context"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// The blob-store seams of migration: what Export, Import, Push and Pull need
// of a content store and a registry. runtime/containerd implements them
// over containerd's content store, leases, archive code and resolver; the
// policy — what to send, what to accept, every verification — stays here.
// Errors carry github.com/containerd/errdefs classes (errdefs.ErrNotFound
// for an absent blob or lease, errdefs.ErrAlreadyExists for an existing
// lease) and name the digest or lease.

// BlobReader reads the content store.
type BlobReader interface {
	// BlobSize returns the size in bytes the store records for d;
	// errdefs.ErrNotFound when the blob is absent.
	BlobSize(ctx context.Context, d digest.Digest) (int64, error)
	// ReadBlob returns the bytes of a small blob (an index, a manifest, a
	// config) after checking their digest; errdefs.ErrNotFound when the
	// blob is absent.
	ReadBlob(ctx context.Context, d digest.Digest) ([]byte, error)
	// OpenBlob opens a blob for reading in place (snapshot.VerifyDiff);
	// errdefs.ErrNotFound when it is absent. The caller closes it.
	OpenBlob(ctx context.Context, desc ocispec.Descriptor) (StoredBlob, error)
	// MissingContent returns the digests among the image manifest, its
	// config and its layers that are absent from the store, in that order
	// (the manifest alone when it is absent), or nil.
	MissingContent(ctx context.Context, manifest digest.Digest) ([]digest.Digest, error)
}

// StoredBlob is an open blob of the content store.
type StoredBlob interface {
	snapshot.Blob
	io.Closer
}

// BlobWriter writes the content store.
type BlobWriter interface {
	// WriteBlob stores data (media type mediaType) under the lease, which
	// then holds it, and returns its descriptor; ref names the ingest. A
	// blob that exists already is not an error.
	WriteBlob(ctx context.Context, lease, ref, mediaType string, data []byte) (ocispec.Descriptor, error)
	// SetChildren records that the stored manifest parent references the
	// blobs children (config first, then layers), so that the store keeps
	// them for as long as it keeps parent, as it does for a pulled image.
	SetChildren(ctx context.Context, parent digest.Digest, children ...digest.Digest) error
}

// Leases hold content in the store.
type Leases interface {
	// CreateLease creates a lease with no expiry and these labels;
	// errdefs.ErrAlreadyExists when it exists.
	CreateLease(ctx context.Context, id string, labels map[string]string) error
	// TempLease creates a lease that expires by itself (if this process
	// dies) and returns its id and a function deleting it, with the
	// content only it held, synchronously.
	TempLease(ctx context.Context) (id string, release func(), err error)
	// AddToLease makes the lease hold the stored blobs (idempotent).
	AddToLease(ctx context.Context, lease string, blobs ...digest.Digest) error
}

// ArchiveEntry is a manifest or index an archive lists in its index.json,
// with Name as its image name ("" for none).
type ArchiveEntry struct {
	Desc ocispec.Descriptor
	Name string
}

// Archiver moves OCI image layout archives in and out of the store.
type Archiver interface {
	// WriteArchive writes to w an OCI image layout tar holding the entries
	// and every blob they reference, read from the store, and nothing
	// else: no Docker manifest.json.
	WriteArchive(ctx context.Context, w io.Writer, entries ...ArchiveEntry) error
	// ImportArchive stores every blob of the OCI image layout tar r under
	// the lease, each under the digest of its bytes, creates no image
	// record and no name, and returns the digest of the index.json it read.
	ImportArchive(ctx context.Context, lease string, r io.Reader) (digest.Digest, error)
}

// Store is the content store migration runs over, with its image names.
type Store interface {
	BlobReader
	BlobWriter
	Leases
	Archiver
	Images
}

// Registry is the registry transport of Push and Pull. ref is a registry
// reference (REG/REPO:TAG, REG/REPO@sha256:…, or
// REG/REPO:TAG@sha256:… to push a tag by digest). Progress counts the
// bytes moved.
type Registry interface {
	// Resolve returns the descriptor ref names.
	Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error)
	// Fetch opens the blob desc of ref's repository. The caller checks
	// its size and digest.
	Fetch(ctx context.Context, ref string, desc ocispec.Descriptor) (io.ReadCloser, error)
	// FetchToStore stores the blob desc of ref's repository in the content
	// store under the lease — with everything it references when tree is
	// true — checking each blob's size and digest as it arrives; a blob
	// the store has is not fetched again.
	FetchToStore(ctx context.Context, ref, lease string, desc ocispec.Descriptor, tree bool, p Progress) error
	// Push sends desc and everything it references, read from the content
	// store, to ref; blobs the registry has are not sent.
	Push(ctx context.Context, ref string, desc ocispec.Descriptor, p Progress) error
	// Tags lists the tags of repo (REG/REPO, no tag or digest) in the
	// registry's order, every page of them; none for a repository the
	// registry does not have.
	Tags(ctx context.Context, repo string) ([]string, error)
}
