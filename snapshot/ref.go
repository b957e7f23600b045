package snapshot

import (
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// RefSchema is the value of Ref.Schema (docs/design.md "SnapshotRef"). A new member
// means a new schema string, "sandbox.snapshot-ref/2".
const RefSchema = "sandbox.snapshot-ref/1"

// Names in containerd (docs/design.md "SnapshotRef"): lease ids are these prefixes
// followed by the run id; labels and annotations live under LabelPrefix.
const (
	RunLeasePrefix   = "sandbox-resume.run/"
	ClaimLeasePrefix = "sandbox-resume.claim/"
	LabelPrefix      = "io.sandbox-resume."
	LabelRun         = "io.sandbox-resume.run"
	LabelManifest    = "io.sandbox-resume.manifest"
	// LabelGeneration, on an incarnation: the generation it was resumed
	// from (decimal).
	LabelGeneration = "io.sandbox-resume.generation"
	// LabelRef, on an incarnation: the digest of the ref file it was
	// resumed from (the ledger record's ref).
	LabelRef = "io.sandbox-resume.ref"
	// LabelFence, on the container holding a run: the fence token the
	// ledger issued to it (decimal).
	LabelFence = "io.sandbox-resume.fence"
)

// Host identity sources recorded in Host.IDSource.
const (
	IDSourceIntrospection = "introspection" // the daemon's introspection UUID
	IDSourceOverride      = "override"      // --host-id or SANDBOX_RESUME_HOST_ID
)

// Ref is the SnapshotRef: the signed record of a suspended run (docs/design.md
// "SnapshotRef"). Its JSON members are exactly these; unknown members are
// refused when a ref is parsed.
type Ref struct {
	Schema      string           `json:"schema"`
	Run         string           `json:"run"`
	Manifest    string           `json:"manifest"` // address of Core: "blake3:<64 hex>"
	Core        envmanifest.Core `json:"core"`
	Pinned      bool             `json:"pinned"`             // Core.IsPinned()
	Policy      []string         `json:"policy"`             // effective reserved env names, sorted; [] when none
	Lockfile    string           `json:"lockfile,omitempty"` // "sha256:<hex>" of the lockfile bytes used
	Host        Host             `json:"host"`
	Base        Base             `json:"base"`
	RootfsDiff  Diff             `json:"rootfsDiff"`
	KeptRunning bool             `json:"keptRunning"`
	Created     string           `json:"created"` // RFC 3339, UTC, seconds

	// coreCanonical is the JCS of the core exactly as parsed, kept by
	// decodeRef so checkIntegrity need not canonicalize it again.
	coreCanonical []byte
	// provenance is what OpenRef established about the signatures.
	provenance Provenance
}

// Host identifies the containerd daemon a run was suspended on, with the
// facts resume compares.
type Host struct {
	ID                string `json:"id"`       // introspection UUID or the override
	IDSource          string `json:"idSource"` // IDSourceIntrospection or IDSourceOverride
	ContainerdVersion string `json:"containerdVersion"`
	Snapshotter       string `json:"snapshotter"`
	Platform          string `json:"platform"` // os/arch[/variant]
}

// Base is what an image reference resolved to through the content store for
// one platform. IndexDigest is empty when the name points at a single
// manifest. DiffIDs are the config's rootfs.diff_ids, in order.
type Base struct {
	Name           string          `json:"name"` // normalized reference
	IndexDigest    digest.Digest   `json:"indexDigest,omitempty"`
	ManifestDigest digest.Digest   `json:"manifestDigest"`
	ConfigDigest   digest.Digest   `json:"configDigest"`
	Platform       string          `json:"platform"` // os/arch[/variant]
	DiffIDs        []digest.Digest `json:"diffIDs"`
}

// Diff describes the rootfs diff layer: the compressed blob (Digest, Size in
// bytes, MediaType) and the uncompressed tar (DiffID, UncompressedSize in
// bytes).
type Diff struct {
	MediaType        string        `json:"mediaType"`
	Digest           digest.Digest `json:"digest"`
	Size             int64         `json:"size"`
	DiffID           digest.Digest `json:"diffID"`
	UncompressedSize int64         `json:"uncompressedSize"`
}
