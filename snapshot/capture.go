package snapshot

import (
	"context"
	"errors"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// MediaTypeRef is the media type of the ref blob in the content store and of
// the migration artifact's config: it holds exactly the signed ref file's
// bytes (docs/design.md "Signed documents", "Moving runs").
const MediaTypeRef = "application/vnd.sandbox-resume.snapshot-ref.v1+json"

// Labels the suspend flow puts on the run lease, beside LabelRun. They let a
// rerun with the same run id find what the first attempt decided.
const (
	// LabelContainer names the container a run lease was created for; a
	// rerun for another container is refused (ErrRunConflict).
	LabelContainer = "io.sandbox-resume.container"
	// LabelCreated holds the RFC 3339 UTC time the run lease was created;
	// it becomes Ref.Created of generation 1, so a rerun writes the same
	// ref. During the suspend of a later generation the container carries
	// it too (beside LabelSuspending, removed with it), for the same
	// reason.
	LabelCreated = "io.sandbox-resume.created"
)

// ErrImageUnresolved is wrapped when an image reference does not resolve
// through the content store for the host platform, or content of a run's
// base image is absent. Class "image-unresolved" (internal/exitcode).
var ErrImageUnresolved = errors.New("image unresolved")

// TaskState is the state of a container's task as the Capturer reports it.
// The strings follow containerd's client.ProcessStatus; TaskNone means the
// container has no task.
type TaskState string

// Task states (containerd client.ProcessStatus, plus TaskNone).
const (
	TaskNone    TaskState = ""
	TaskCreated TaskState = "created"
	TaskRunning TaskState = "running"
	TaskPaused  TaskState = "paused"
	TaskPausing TaskState = "pausing"
	TaskStopped TaskState = "stopped"
	TaskUnknown TaskState = "unknown"
)

// Container is what suspend needs to know about a container
// (docs/design.md "Suspend", steps 2, 3 and 5): who it is (ID in
// Namespace, created at Created: a container re-created under the same id
// is another container), its snapshot (Snapshotter, SnapshotKey), the name
// of that snapshot's parent (ParentChainID: for an unpacked image, the
// snapshot committed under identity.ChainID of the image's diffIDs,
// written "sha256:<hex>"), the kind of its snapshot ("active" for a live
// container: it is never committed), the image name recorded on the
// container, its labels, its task state, its OCI runtime spec exactly as
// containerd holds it (Spec: the bytes of the spec Any's value, never
// re-encoded) and its runtime (name and options).
type Container struct {
	ID            string
	Namespace     string
	Created       time.Time
	Image         string
	Snapshotter   string
	SnapshotKey   string
	SnapshotKind  string
	ParentChainID string
	Labels        map[string]string
	Task          TaskState
	Spec          []byte
	Runtime       Runtime
}

// Lease is a content-store lease as the Capturer reports it: its id, labels
// and creation time.
type Lease struct {
	ID        string
	Labels    map[string]string
	CreatedAt time.Time
}

// ContainerInspector inspects a container.
type ContainerInspector interface {
	// Container returns the container's snapshot, parent chain, labels and
	// task state. An absent container is an error wrapping
	// errdefs.ErrNotFound naming the id.
	Container(ctx context.Context, id string) (Container, error)
}

// HostInspector reports the daemon's identity and facts.
type HostInspector interface {
	// Host returns the daemon's identity (introspection UUID, or the
	// configured override with IDSource "override"), version, default
	// snapshotter and platform.
	Host(ctx context.Context) (Host, error)
}

// ImageResolver resolves image references through the content store.
type ImageResolver interface {
	// ResolveImage resolves a normalized image reference for the host
	// platform (platforms.OnlyStrict), as resume.Facts.ResolveImage does. An
	// unknown name or absent content is an error wrapping
	// errdefs.ErrNotFound.
	ResolveImage(ctx context.Context, ref string) (Base, error)
}

// TaskController pauses, resumes and stops a container's task.
type TaskController interface {
	// PauseTask freezes the container's task. A task already paused is not
	// an error.
	PauseTask(ctx context.Context, id string) error
	// ResumeTask thaws a paused task. A task already running is not an
	// error.
	ResumeTask(ctx context.Context, id string) error
	// StopTask ends the task: kill (SIGKILL), resume it if paused, wait for
	// its exit, delete it. A container without a task is not an error.
	StopTask(ctx context.Context, id string) error
}

// Differ captures a container's filesystem changes.
type Differ interface {
	// CreateDiff diffs the container's snapshot against its parent (any
	// differ whose layer, applied over the parent, gives the same tree:
	// for an overlayfs snapshot runtime/containerd walks the upper
	// directory in process, otherwise the diff service's rootfs.CreateDiff;
	// media type ocispec.MediaTypeImageLayerZstd; never Commit of the live
	// key), stores it under the lease (which must exist: an unleased diff
	// is collected), and returns the stored blob's descriptor with its
	// diffID and uncompressed size in bytes, both checked against the
	// stored blob (the commit's expected digest, or a read-back).
	CreateDiff(ctx context.Context, lease string, c Container) (Layer, error)
}

// MaxBlobRead is the largest blob BlobReader.ReadBlob reads, in bytes: a
// ref file or a runtime spec (4 MiB).
const MaxBlobRead = 4 << 20

// BlobReader reads small blobs of the content store.
type BlobReader interface {
	// ReadBlob returns the bytes of the blob with digest d, checking them
	// against d as it reads. An absent blob is an error wrapping
	// errdefs.ErrNotFound; one larger than MaxBlobRead bytes wraps
	// errdefs.ErrInvalidArgument; bytes with another digest wrap
	// errdefs.ErrDataLoss. Errors name the digest.
	ReadBlob(ctx context.Context, d digest.Digest) ([]byte, error)
}

// BlobWriter writes blobs to the content store.
type BlobWriter interface {
	// WriteBlob stores data (media type mediaType) in the content store
	// under the lease and returns its descriptor. ref names the ingest.
	// Writing a blob that exists already is not an error; it is added to
	// the lease.
	WriteBlob(ctx context.Context, lease, ref, mediaType string, data []byte) (ocispec.Descriptor, error)
}

// LeaseHolder creates leases and makes them hold content.
type LeaseHolder interface {
	// CreateLease creates a lease with no expiry. An existing id is an
	// error wrapping errdefs.ErrAlreadyExists.
	CreateLease(ctx context.Context, id string, labels map[string]string) error
	// Lease returns the lease, or an error wrapping errdefs.ErrNotFound.
	Lease(ctx context.Context, id string) (Lease, error)
	// HoldBase adds the base image's content to the lease: the index (when
	// IndexDigest is set), the platform manifest, its config and every
	// layer, so the base survives the image's deletion and GC.
	HoldBase(ctx context.Context, lease string, base Base) error
}

// ContainerLabeler sets container labels.
type ContainerLabeler interface {
	// SetContainerLabels sets the given labels on the container, leaving
	// its other labels unchanged; a label given the value "" is removed
	// (as containerd removes a label updated to ""). An absent container
	// is an error wrapping errdefs.ErrNotFound.
	SetContainerLabels(ctx context.Context, id string, labels map[string]string) error
}

// Capturer is the seam suspend talks to containerd through (docs/design.md
// "Layout"): runtime/containerd implements it against a daemon and
// snapshot/fake in memory; snapshot/capturertest is the conformance suite
// both run. Errors wrap the github.com/containerd/errdefs classes.
type Capturer interface {
	ContainerInspector
	HostInspector
	ImageResolver
	ImageConfigReader
	TaskController
	Differ
	FlatDiffer
	BlobReader
	BlobWriter
	LeaseHolder
	BlobReleaser
	ContainerLabeler
	ContainerDeleter
}
