// Package memhost is the one in-memory host.Host for tests and examples
// (docs/design.md "Layout"): a content store, an image store, leases,
// containers with files and a task, and the host's facts, all in one
// shared state, so a test follows a run through suspend, export, import,
// resume and the next suspend without a daemon — on one Host or across
// two. It passes the same conformance suite (host/hosttest) as
// runtime/containerd.
//
// Images are stored two ways: SetImage (and CreateImage) names real OCI
// blobs, which ResolveImage parses as runtime/containerd does (an index
// through platforms.OnlyStrict of the host platform); AddImage records an
// image whose Base is given, with placeholder content, for tests that need
// no image bytes. The diff it creates is a real OCI layer: a tar of the
// container's files that differ from its snapshot's parent (sorted by
// path, fixed metadata, so it is deterministic; a file of the parent that
// is gone is an AUFS whiteout), compressed with zstd; Tree applies such
// layers back into files, and an incarnation CreateContainer makes starts
// with the files its layers give. Hook lets tests fail any operation to
// simulate a crash there; Ops lists the operations done.
//
// Content a test puts (Put, PutBlob, CorruptBlob) is kept by the garbage
// collection DeleteLease, DeleteImage and GC run; other content is kept
// while a lease or an AddImage image holds it.
package memhost

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// DefaultNamespace is the containerd namespace a Host reports (for every
// container, and as Namespace) until SetNamespace changes it.
const DefaultNamespace = "sandbox-resume"

// Operation names passed to Hook and listed by Ops, one per host method.
const (
	OpHost            = "Host"
	OpResolveImage    = "ResolveImage"
	OpImageLabels     = "ImageLabels"
	OpImageTarget     = "ImageTarget"
	OpCreateImage     = "CreateImage"
	OpReadBlob        = "ReadBlob"
	OpReadSpec        = "ReadSpec"
	OpBlobSize        = "BlobSize"
	OpOpenBlob        = "OpenBlob"
	OpMissingContent  = "MissingContent"
	OpWriteBlob       = "WriteBlob"
	OpSetChildren     = "SetChildren"
	OpCheckDiff       = "CheckDiff"
	OpCreateLease     = "CreateLease"
	OpLease           = "Lease"
	OpDeleteLease     = "DeleteLease"
	OpTempLease       = "TempLease"
	OpAddToLease      = "AddToLease"
	OpReleaseBlob     = "ReleaseBlob"
	OpHoldBase        = "HoldBase"
	OpStoreRef        = "StoreRef"
	OpLegacyClaim     = "LegacyClaim"
	OpContainer       = "Container"
	OpContainerState  = "ContainerState"
	OpRunContainers   = "RunContainers"
	OpSetLabels       = "SetContainerLabels"
	OpBuildSpec       = "BuildSpec"
	OpCreateContainer = "CreateContainer"
	OpDeleteContainer = "DeleteContainer"
	OpPauseTask       = "PauseTask"
	OpResumeTask      = "ResumeTask"
	OpStopTask        = "StopTask"
	OpStartTask       = "StartTask"
	OpCreateDiff      = "CreateDiff"
	OpCommitChain     = "CommitChain"
	OpChainSnapshot   = "ChainSnapshot"
	OpContainerFile   = "ContainerFile"
	OpReleaseChain    = "ReleaseChain"
	OpCreateFlatDiff  = "CreateFlatDiff"
	OpWriteArchive    = "WriteArchive"
	OpImportArchive   = "ImportArchive"
	OpCheckpointTask  = "CheckpointTask"
	OpRestoreTask     = "RestoreTask"
	OpMemoryFacts     = "MemoryFacts"
)

// Machine is the in-memory host.Host. The zero value is not usable; call
// New.
// It is safe for concurrent use.
type Machine struct {
	// Hook, when set, is called before every host method with its name
	// (the Op constants); a non-nil error fails the operation before it
	// has any effect, as a crash there would.
	Hook func(op string) error

	mu         sync.Mutex
	host       snapshot.Host
	matcher    platforms.MatchComparer // nil: the host platform did not parse
	namespace  string
	blobs      map[digest.Digest][]byte
	pinned     map[digest.Digest]bool // put by the test: kept by GC
	children   map[digest.Digest][]digest.Digest
	images     map[string]ocispec.Descriptor // the image store: name → target
	records    map[string]Image              // AddImage: by Base.Name
	leases     map[string]*lease
	refs       map[string]map[digest.Digest]bool // StoreRef: run → ref digests
	containers map[string]*container
	chains     map[digest.Digest]chainSnap // CommitChain: by chain id
	alive      func(pid int, start, boot string) bool
	hostNS     func(nsType, path string) bool
	nextPID    uint32
	temp       int
	deleted    []string
	ops        []string
	mem        memoryState
}

var _ host.Host = (*Machine)(nil)

// New returns an empty host with the facts h. When h.Platform
// ("os/arch[/variant]") parses with platforms.Parse it is normalized and
// chooses manifests under platforms.OnlyStrict, as runtime/containerd
// does; otherwise no platform matches it.
func New(h snapshot.Host) *Machine {
	var m platforms.MatchComparer
	if p, err := platforms.Parse(h.Platform); err == nil {
		p = platforms.Normalize(p)
		h.Platform = platforms.Format(p)
		m = platforms.OnlyStrict(p)
	}
	return &Machine{
		host:       h,
		matcher:    m,
		namespace:  DefaultNamespace,
		blobs:      map[digest.Digest][]byte{},
		pinned:     map[digest.Digest]bool{},
		children:   map[digest.Digest][]digest.Digest{},
		images:     map[string]ocispec.Descriptor{},
		records:    map[string]Image{},
		leases:     map[string]*lease{},
		refs:       map[string]map[digest.Digest]bool{},
		containers: map[string]*container{},
		chains:     map[digest.Digest]chainSnap{},
		nextPID:    4000,
	}
}

// enter starts operation op: the context's error or Hook's fails it, else
// the operation is recorded and h.mu is held (the caller unlocks).
func (h *Machine) enter(ctx context.Context, op string) error {
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if h.Hook != nil {
		if err := h.Hook(op); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.ops = append(h.ops, op)
	return nil
}

// Ops returns the operations performed so far, in order.
func (h *Machine) Ops() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// fixedCreated is the creation time of containers that give none.
var fixedCreated = time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)

func notFound(what string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(what, args...), errdefs.ErrNotFound)
}
