package snapshot

import (
	"context"

	"github.com/opencontainers/go-digest"
)

// The Capturer methods that a later generation needs (docs/design.md
// "SnapshotRef": `layers`, flattening, retention; "Suspend", step 7).

// FlatDiffer captures everything a container changed above its base image,
// whatever layers its snapshot was built from.
type FlatDiffer interface {
	// CreateFlatDiff diffs the container's snapshot against the chain
	// snapshot identity.ChainID(base) — the base image's diffIDs, in order —
	// rather than against the snapshot's own parent: a read-only View of
	// that chain is the lower, the container's mounts the upper, and the
	// diff service compares them (containerd: Compare, media type
	// ocispec.MediaTypeImageLayerZstd). The blob is stored under the lease
	// (which must exist) and its descriptor returned with its diffID and
	// uncompressed size in bytes, as Differ.CreateDiff does. Applied over
	// the base, the layer gives the container's file system (deletions of
	// base files and of files of the layers below are whiteouts). A chain
	// snapshot that does not exist on the container's snapshotter is an
	// error wrapping errdefs.ErrNotFound naming the chain ID.
	CreateFlatDiff(ctx context.Context, lease string, c Container, base []digest.Digest) (Layer, error)
}

// ContainerDeleter deletes containers.
type ContainerDeleter interface {
	// DeleteContainer deletes the container with its task (killed first,
	// as TaskController.StopTask does) and its snapshot (key = the
	// container's snapshot key). A container that does not exist is no
	// error.
	DeleteContainer(ctx context.Context, id string) error
}

// BlobReleaser releases blobs from a lease.
type BlobReleaser interface {
	// ReleaseBlob removes blob d from the lease's resources: the blob is
	// then kept only while something else holds it (another lease, an
	// image), and the next garbage collection may remove it. A blob the
	// lease does not hold is no error; an absent lease wraps
	// errdefs.ErrNotFound.
	ReleaseBlob(ctx context.Context, lease string, d digest.Digest) error
}

// Progress receives the byte progress of a long operation (a rootfs diff
// while suspend waits for it): the same method set as migrate.Progress, so
// one implementation (the CLI's progress bar on a terminal's stderr) serves
// both. The library never prints. Implementations must be safe for
// concurrent use: a Capturer may report from a goroutine of its own.
type Progress interface {
	// Phase starts a phase: what names it ("diff" while a layer is being
	// written), total is the number of bytes expected, or -1 when it is not
	// known.
	Phase(what string, total int64)
	// Add records n more bytes done in the current phase.
	Add(n int64)
}

type progressKey struct{}

// WithProgress returns ctx carrying p: a Capturer's diff operations
// (Differ.CreateDiff, FlatDiffer.CreateFlatDiff) report the bytes of the
// layer they write to it. A nil p returns ctx unchanged.
func WithProgress(ctx context.Context, p Progress) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressFrom returns the Progress ctx carries, or nil when it carries
// none.
func ProgressFrom(ctx context.Context) Progress {
	p, _ := ctx.Value(progressKey{}).(Progress)
	return p
}
