package snapshot

import (
	"time"
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

// TaskState is the state of a container's task as host.Containers reports
// it.
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

// Lease is a content-store lease as host.Leases reports it: its id, labels
// and creation time.
type Lease struct {
	ID        string
	Labels    map[string]string
	CreatedAt time.Time
}

// MaxBlobRead is the largest blob host.Content.ReadBlob reads, in bytes: a
// ref file or a runtime spec (4 MiB).
const MaxBlobRead = 4 << 20
