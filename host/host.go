// Package host is the container-host seam (docs/design.md "Layout"): the
// small role interfaces through which suspend, resume and migrate reach
// the one containerd daemon they run on — host info, images, content,
// leases, containers, tasks, differ, archiver — and the registry
// transport of push and pull. Every method is declared once, in one role;
// each consumer declares the few roles it composes. runtime/containerd
// implements Host against a daemon, host/memhost in memory; host/hosttest
// is the one conformance suite both pass.
//
// Errors wrap the github.com/containerd/errdefs classes
// (errdefs.ErrNotFound for an absent image, blob, lease or container,
// errdefs.ErrAlreadyExists for an existing one, errdefs.ErrInvalidArgument
// for input that does not parse) and name the reference, digest, lease or
// container they concern.
package host

import (
	"context"
	"errors"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Info reports the daemon's identity and the facts of the machine it runs
// on.
type Info interface {
	// Host returns the daemon's identity (its introspection UUID, or the
	// configured override with IDSource "override"), version, default
	// snapshotter and platform.
	Host(ctx context.Context) (snapshot.Host, error)
	// Namespace returns the containerd namespace the host works in (the
	// namespace of every container it reports, and of the ledger holder a
	// resume names).
	Namespace() string
	// PlatformMatches reports whether the host platform matches platform
	// ("os/arch[/variant]") under platforms.OnlyStrict.
	PlatformMatches(platform string) bool
	// HostNamespace reports whether path may name the namespace of type
	// nsType (an OCI type: "pid", "network", …) of this host's pid 1
	// (resume's check 10); it answers true when it cannot tell.
	// runtime/containerd answers with procfs.HostPID1Namespace.
	HostNamespace(nsType, path string) bool
	// ResumerAlive reports whether the process pid, started at start
	// (field 22 of /proc/PID/stat) under boot id boot, still runs on this
	// machine: a resuming ledger holder of this host (runtime/containerd:
	// procfs.ProcessAlive).
	ResumerAlive(pid int, start, boot string) bool
	// MemoryFacts returns what a memory image of format (a
	// snapshot.MemoryFormat* constant) needs of this host to be taken or
	// restored here (docs/design.md "Memory", check 12): the checkpoint
	// tool the runtime's shim would run (its version and binary digest;
	// runtime/containerd: the criu on this process's PATH, which the
	// daemon it starts shares) and the kernel release and
	// CPU. A format this host cannot take or restore wraps
	// errdefs.ErrNotImplemented; a tool not found errdefs.ErrNotFound.
	MemoryFacts(ctx context.Context, format string) (snapshot.MemoryRuntime, snapshot.MemoryHost, error)
}

// Images resolves and names images.
type Images interface {
	// ResolveImage resolves a normalized image reference through the
	// content store for the host platform (platforms.OnlyStrict): the index
	// digest when the reference names an index, the platform manifest, its
	// config and the config's diffIDs. A reference with a digest resolves
	// that digest as a content store key (the image store is not
	// consulted; a tag beside the digest is dropped). Errors:
	// errdefs.ErrInvalidArgument for a reference that does not parse;
	// errdefs.ErrNotFound for an unknown name, an absent index, manifest or
	// config, or no manifest for the host platform.
	ResolveImage(ctx context.Context, ref string) (snapshot.Base, error)
	// ImageLabels returns the labels of the image config blob config
	// (image-spec config.md: config.Labels) as the content store holds it,
	// its bytes verified against the digest; nil when the config has no
	// labels. Errors: errdefs.ErrInvalidArgument for an invalid digest or a
	// blob that is not a JSON image config; errdefs.ErrNotFound when the
	// blob is absent; each names the digest.
	ImageLabels(ctx context.Context, config digest.Digest) (map[string]string, error)
	// ImageTarget returns the descriptor image name points at;
	// errdefs.ErrNotFound when no image has that name.
	ImageTarget(ctx context.Context, name string) (ocispec.Descriptor, error)
	// CreateImage creates image name pointing at target; an existing name
	// is errdefs.ErrAlreadyExists and is left as it is (never re-pointed).
	CreateImage(ctx context.Context, name string, target ocispec.Descriptor) error
}

// Content reads and writes the content store.
type Content interface {
	// ReadBlob returns the bytes of the small blob d (a ref file, a
	// runtime spec, an index, a manifest, a config), checking them against
	// d as it reads. An absent blob wraps errdefs.ErrNotFound; one larger
	// than snapshot.MaxBlobRead bytes wraps errdefs.ErrInvalidArgument;
	// bytes with another digest wrap errdefs.ErrDataLoss.
	ReadBlob(ctx context.Context, d digest.Digest) ([]byte, error)
	// ReadSpec returns the bytes of the recorded runtime spec blob d (a
	// verified ref's "spec"), read once with snapshot.ReadBlob, which
	// checks its size and digest as it reads: another size or digest wraps
	// snapshot.ErrBlobCorrupt; an absent blob wraps errdefs.ErrNotFound.
	ReadSpec(ctx context.Context, d snapshot.Descriptor) ([]byte, error)
	// BlobSize returns the size in bytes the store records for d;
	// errdefs.ErrNotFound when the blob is absent.
	BlobSize(ctx context.Context, d digest.Digest) (int64, error)
	// OpenBlob opens a blob for reading in place (snapshot.VerifyDiff);
	// errdefs.ErrNotFound when it is absent. The caller closes it.
	OpenBlob(ctx context.Context, desc ocispec.Descriptor) (StoredBlob, error)
	// MissingContent returns the digests among the manifest, its config
	// and every layer that are absent from the content store, in manifest
	// order (nil when all are present). An absent manifest is reported as
	// missing (alone), not as an error; errdefs.ErrInvalidArgument when
	// the digest is invalid or names a blob that is not a manifest.
	MissingContent(ctx context.Context, manifest digest.Digest) ([]digest.Digest, error)
	// WriteBlob stores data (media type mediaType) in the content store
	// under the lease, which then holds it, and returns its descriptor; ref
	// names the ingest. A blob that exists already is not an error; it is
	// added to the lease.
	WriteBlob(ctx context.Context, lease, ref, mediaType string, data []byte) (ocispec.Descriptor, error)
	// SetChildren records that the stored manifest parent references the
	// blobs children (config first, then layers), so that the store keeps
	// them for as long as it keeps parent, as it does for a pulled image.
	SetChildren(ctx context.Context, parent digest.Digest, children ...digest.Digest) error
	// CheckDiff checks a stored layer blob of a ref before anything is
	// applied: at least that it is stored with size d.Size and digest
	// d.Digest (snapshot.VerifyLayerBlob, no decompression). The diffID
	// d.DiffID must be checked by CheckDiff or by Containers.CreateContainer's
	// apply before anything is committed: host/memhost, whose apply does
	// not compute it, checks it here with snapshot.VerifyDiff;
	// runtime/containerd leaves it to the daemon's apply (docs/design.md
	// "Materialize"). A mismatch wraps snapshot.ErrDiffCorrupt and names
	// the digest; an absent blob wraps errdefs.ErrNotFound.
	CheckDiff(ctx context.Context, d snapshot.Layer) error
}

// StoredBlob is an open blob of the content store.
type StoredBlob interface {
	snapshot.Blob
	io.Closer
}

// Leases hold content in the store.
type Leases interface {
	// CreateLease creates a lease with no expiry and these labels;
	// errdefs.ErrAlreadyExists when it exists.
	CreateLease(ctx context.Context, id string, labels map[string]string) error
	// Lease returns the lease, or an error wrapping errdefs.ErrNotFound.
	Lease(ctx context.Context, id string) (snapshot.Lease, error)
	// DeleteLease deletes the lease id (a run lease, a `/1` claim lease)
	// and the content only it held; errdefs.ErrNotFound when it does not
	// exist.
	DeleteLease(ctx context.Context, id string) error
	// TempLease creates a lease that expires by itself (if this process
	// dies) and returns its id and a function deleting it, with the
	// content only it held, synchronously.
	TempLease(ctx context.Context) (id string, release func(), err error)
	// AddToLease makes the lease hold the stored blobs (idempotent).
	AddToLease(ctx context.Context, lease string, blobs ...digest.Digest) error
	// ReleaseBlob removes blob d from the lease's resources: the blob is
	// then kept only while something else holds it (another lease, an
	// image), and the next garbage collection may remove it. A blob the
	// lease does not hold is no error; an absent lease wraps
	// errdefs.ErrNotFound.
	ReleaseBlob(ctx context.Context, lease string, d digest.Digest) error
	// ReleaseChain removes the chain snapshot identity.ChainID(chain)
	// from the lease's resources (docs/design.md "Resume on the same host
	// without extracting"): garbage collection then removes it unless a
	// child snapshot or another lease needs it. A snapshot the lease does
	// not hold is no error; an absent lease wraps errdefs.ErrNotFound.
	ReleaseChain(ctx context.Context, lease string, chain []digest.Digest) error
	// HoldBase adds the base image's content to the lease: the index (when
	// IndexDigest is set), the platform manifest, its config and every
	// layer, so the base survives the image's deletion and GC.
	HoldBase(ctx context.Context, lease string, base snapshot.Base) error
	// StoreRef stores a ref file's bytes as a blob under run's run lease
	// (snapshot.RunLease; created when missing), so an incarnation's ref
	// label resolves on this host. Storing bytes already stored is no
	// error.
	StoreRef(ctx context.Context, run string, ref []byte) error
	// LegacyClaim returns the claim lease of the previous release
	// ("sandbox-resume.claim/<run>", snapshot.ClaimLease) and the
	// container its label LabelLegacyClaimContainer names, or nil when
	// there is none (docs/design.md "The run ledger": the upgrade rule).
	LegacyClaim(ctx context.Context, run string) (*LegacyClaim, error)
}

// LegacyClaim is a claim lease of the previous release (`/1`): the lease id
// and the container its label LabelLegacyClaimContainer names ("" when the
// label is absent).
type LegacyClaim struct {
	// Lease is the lease id, snapshot.ClaimLease(run).
	Lease string
	// Container is the container id the lease's holder created or was
	// about to create.
	Container string
}

// LabelLegacyClaimContainer is the label of a `/1` claim lease naming the
// container its holder created.
const LabelLegacyClaimContainer = snapshot.LabelPrefix + "claim.container"

// Containers inspects, creates, labels and deletes containers.
type Containers interface {
	// Container returns what suspend needs of container id: its snapshot,
	// parent chain, labels, task state, runtime spec bytes and runtime. An
	// absent container is an error wrapping errdefs.ErrNotFound naming the
	// id.
	Container(ctx context.Context, id string) (snapshot.Container, error)
	// ContainerState returns what the claim check needs to know about
	// container id in this namespace: its labels and whether it has a
	// running task; nil (and no error) when it does not exist.
	ContainerState(ctx context.Context, id string) (*ContainerState, error)
	// RunContainers returns the containers of this namespace labelled
	// with run (snapshot.LabelRun), sorted by id.
	RunContainers(ctx context.Context, run string) ([]ContainerState, error)
	// SetContainerLabels sets the given labels on the container, leaving
	// its other labels unchanged; a label given the value "" is removed
	// (as containerd removes a label updated to ""). An absent container
	// is an error wrapping errdefs.ErrNotFound.
	SetContainerLabels(ctx context.Context, id string, labels map[string]string) error
	// BuildSpec returns the OCI runtime spec (JSON) that a `/1` ref's
	// incarnation would be created with, as the previous release created
	// it (docs/design.md "Spec validation"): the host's default spec for
	// container id in this namespace, the process, user, working
	// directory and environment of the image config base.ConfigDigest
	// (read through base.ManifestDigest), users and groups looked up in
	// the file system of the base layers plus layers, then env
	// ("KEY=VALUE" entries replacing those of the image by key). Missing
	// content wraps errdefs.ErrNotFound.
	BuildSpec(ctx context.Context, id string, base snapshot.Base, layers []snapshot.Layer, env []string) ([]byte, error)
	// CreateContainer applies the base layers and spec.Layers, prepares
	// the snapshot spec.ID on the host's default snapshotter and creates
	// the container spec.ID with exactly the runtime spec bytes spec.Spec
	// (or, when nil, the spec BuildSpec builds from spec.Env), the runtime
	// spec.Runtime and the labels spec.Labels(). On error no container
	// spec.ID was created by this call. An existing container id is
	// errdefs.ErrAlreadyExists; a layer whose extraction computes another
	// diffID than the recorded one wraps snapshot.ErrDiffCorrupt, and then
	// nothing was committed under the recorded chain; missing base
	// content errdefs.ErrNotFound.
	CreateContainer(ctx context.Context, spec ContainerSpec) error
	// DeleteContainer deletes container id with its task (killed first)
	// and its snapshot (key id). A container that does not exist is no
	// error.
	DeleteContainer(ctx context.Context, id string) error
	// CommitChain commits the active snapshot of the stopped container c
	// (c.SnapshotKey on c.Snapshotter) as the chain snapshot
	// identity.ChainID(chain) of the host's default snapshotter, with the
	// labels and held by the lease, then prepares a new active snapshot
	// under c.SnapshotKey on top of it with the labels the old one had, so
	// c keeps an identical rootfs (docs/design.md "Resume on the same host
	// without extracting"). c's snapshot parent must be
	// identity.ChainID(chain[:len(chain)-1]), else
	// errdefs.ErrFailedPrecondition and nothing is done. When a chain
	// snapshot of that id exists (an earlier attempt's, an extract's,
	// another run's with the same layers) it commits nothing, reports
	// false and only makes the lease hold it; when the key is missing
	// beside it (a commit whose prepare did not happen) it prepares the
	// key again.
	CommitChain(ctx context.Context, lease string, c snapshot.Container, chain []digest.Digest, labels map[string]string) (bool, error)
	// ChainSnapshot returns the labels of the committed chain snapshot
	// identity.ChainID(chain) on the host's default snapshotter; an absent
	// one wraps errdefs.ErrNotFound naming the chain id.
	ChainSnapshot(ctx context.Context, chain []digest.Digest) (map[string]string, error)
	// ContainerFile returns the content of the regular file name (an
	// absolute path such as "/etc/passwd", resolved inside the root file
	// system: no symlink leads out of it) in the root file system of
	// container c (c.SnapshotKey on c.Snapshotter) as it is now, at most
	// limit bytes: a larger file is an error naming it, as is one that is
	// not a regular file. An absent file wraps errdefs.ErrNotFound naming
	// the path and the container (docs/design.md "Hardening": suspend
	// resolves remoteUser through the container's /etc/passwd).
	ContainerFile(ctx context.Context, c snapshot.Container, name string, limit int64) ([]byte, error)
}

// Tasks controls a container's task.
type Tasks interface {
	// PauseTask freezes the container's task. A task already paused is
	// not an error.
	PauseTask(ctx context.Context, id string) error
	// ResumeTask thaws a paused task. A task already running is not an
	// error.
	ResumeTask(ctx context.Context, id string) error
	// StopTask ends the task: kill (SIGKILL), resume it if paused, wait
	// for its exit, delete it. A container without a task is not an error.
	StopTask(ctx context.Context, id string) error
	// StartTask creates and starts the container's task detached (its
	// output discarded) and returns the task's pid. A container that does
	// not exist is errdefs.ErrNotFound.
	StartTask(ctx context.Context, id string) (uint32, error)
	// CheckpointTask checkpoints the memory of container id's task, which
	// the caller paused, and leaves the task existing and paused
	// (docs/design.md "Memory": CRIU --leave-running; the freezer state is
	// checked after the checkpoint and the task paused again if the
	// checkpoint thawed it). The image is stored under the lease as the
	// memory's blobs; the result names them with the format, the
	// checkpoint tool (MemoryFacts) and this host's kernel and CPU. A task
	// that cannot be dumped (a standard stream that is a host file, a
	// terminal) wraps ErrCannotCheckpoint, naming the stream, before
	// anything is dumped; a container without a paused task is
	// errdefs.ErrFailedPrecondition.
	CheckpointTask(ctx context.Context, id, lease string) (snapshot.Memory, error)
	// RestoreTask creates container id's task from the memory image mem
	// (each blob verified by digest and size before any byte reaches the
	// runtime: another wraps snapshot.ErrBlobCorrupt, an absent one
	// errdefs.ErrNotFound), starts it detached and returns its pid. A
	// container that already has a task is errdefs.ErrAlreadyExists.
	RestoreTask(ctx context.Context, id string, mem snapshot.Memory) (uint32, error)
}

// ErrCannotCheckpoint is the refusal when the task holds something its checkpoint tool cannot
// dump (a standard stream that is a host file, a terminal); refused before
// the checkpoint (docs/design.md "Memory").
var ErrCannotCheckpoint = errors.New("the task cannot be checkpointed")

// Differ captures a container's filesystem changes as a layer.
type Differ interface {
	// CreateDiff diffs the container's snapshot against its parent
	// (media type ocispec.MediaTypeImageLayerZstd; never Commit of the live
	// key), stores it under the lease (which must exist: an unleased diff
	// is collected), and returns the stored blob's descriptor with its
	// diffID and uncompressed size in bytes, both checked against the
	// stored blob. p (nil: none) gets the bytes written.
	CreateDiff(ctx context.Context, lease string, c snapshot.Container, p snapshot.Progress) (snapshot.Layer, error)
	// CreateFlatDiff diffs the container's snapshot against the chain
	// snapshot identity.ChainID(base) — the base image's diffIDs, in order
	// — rather than against its own parent, stored and returned as
	// CreateDiff does: applied over the base, the layer gives the
	// container's file system. A chain snapshot that does not exist is an
	// error wrapping errdefs.ErrNotFound naming the chain ID. p (nil:
	// none) gets the bytes written.
	CreateFlatDiff(ctx context.Context, lease string, c snapshot.Container, base []digest.Digest, p snapshot.Progress) (snapshot.Layer, error)
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

// Host is every role: what runtime/containerd and host/memhost implement,
// and what the CLI wires.
type Host interface {
	Info
	Images
	Content
	Leases
	Containers
	Tasks
	Differ
	Archiver
}

// Registry is the registry transport of push and pull over a host's
// content store. ref is a registry reference (REG/REPO:TAG,
// REG/REPO@sha256:…, or REG/REPO:TAG@sha256:… to push a tag by digest).
// Progress counts the bytes moved (nil: none).
type Registry interface {
	// Resolve returns the descriptor ref names.
	Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error)
	// Fetch opens the blob desc of ref's repository. The caller checks its
	// size and digest.
	Fetch(ctx context.Context, ref string, desc ocispec.Descriptor) (io.ReadCloser, error)
	// FetchToStore stores the blob desc of ref's repository in the content
	// store under the lease — with everything it references when tree is
	// true — checking each blob's size and digest as it arrives; a blob
	// the store has is not fetched again.
	FetchToStore(ctx context.Context, ref, lease string, desc ocispec.Descriptor, tree bool, p snapshot.Progress) error
	// Push sends desc and everything it references, read from the content
	// store, to ref; blobs the registry has are not sent.
	Push(ctx context.Context, ref string, desc ocispec.Descriptor, p snapshot.Progress) error
	// Tags lists the tags of repo (REG/REPO, no tag or digest) in the
	// registry's order, every page of them; none for a repository the
	// registry does not have.
	Tags(ctx context.Context, repo string) ([]string, error)
}
