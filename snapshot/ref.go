package snapshot

import (
	"encoding/base64"
	"encoding/json"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// The SnapshotRef schema strings (docs/design.md "SnapshotRef"). Every
// suspend writes RefSchema; RefSchemaV2 and RefSchemaV1 refs are still
// read (a /1 ref as generation 1 with one layer and no spec). A new member
// means a new schema string, "sandbox.snapshot-ref/4", which this version
// refuses.
const (
	RefSchemaV1 = "sandbox.snapshot-ref/1"
	RefSchemaV2 = "sandbox.snapshot-ref/2"
	RefSchemaV3 = "sandbox.snapshot-ref/3"
	// RefSchema is the schema suspend writes.
	RefSchema = RefSchemaV3
)

// MaxLayers is the most layers a SnapshotRef records (docs/design.md
// "SnapshotRef": `layers` holds 1 to 16 entries; a longer chain is
// flattened into one layer).
const MaxLayers = 16

// MediaTypeSpec is the media type of a recorded runtime spec blob: the
// exact JSON bytes of the container's OCI runtime spec that containerd
// holds (docs/design.md "SnapshotRef", member "spec").
const MediaTypeSpec = "application/vnd.sandbox-resume.runtime-spec.v1+json"

// Names in containerd (docs/design.md "SnapshotRef"): lease ids are these
// prefixes followed by the run id; labels and annotations live under
// LabelPrefix.
const (
	RunLeasePrefix   = "sandbox-resume.run/"
	ClaimLeasePrefix = "sandbox-resume.claim/"
	LabelPrefix      = "io.sandbox-resume."
	// LabelRun is the run id, on a runtime container a suspend labelled
	// and on every incarnation.
	LabelRun = "io.sandbox-resume.run"
	// LabelManifest is the run's manifest address ("blake3:<64 hex>").
	LabelManifest = "io.sandbox-resume.manifest"
	// LabelGeneration is, on an incarnation, the generation it was resumed
	// from (decimal).
	LabelGeneration = "io.sandbox-resume.generation"
	// LabelRef is, on an incarnation, the digest of the ref file it was
	// resumed from.
	LabelRef = "io.sandbox-resume.ref"
	// LabelFence is the fencing token the container holds the run with
	// (decimal): on an incarnation, the token its Claim issued; on a
	// runtime container kept running by a suspend, the token the ledger
	// issued to it.
	LabelFence = "io.sandbox-resume.fence"
	// LabelSuspended is, on a container whose suspend stopped it, the
	// generation written (decimal). A container carrying it is never
	// suspended again.
	LabelSuspended = "io.sandbox-resume.suspended"
	// LabelSuspending is the generation a suspend is writing (decimal),
	// set before the task is paused and removed last; a container carrying
	// it had its suspend interrupted, and only a rerun finishes it.
	LabelSuspending = "io.sandbox-resume.suspending"
)

// Host identity sources recorded in Host.IDSource.
const (
	IDSourceIntrospection = "introspection" // the daemon's introspection UUID
	IDSourceOverride      = "override"      // --host-id or SANDBOX_RESUME_HOST_ID
)

// Ref is the SnapshotRef: the signed record of one generation of a
// suspended run (docs/design.md "SnapshotRef"). One type holds the three
// schemas; Schema tells which:
//
//   - RefSchemaV3, written by every suspend: every member below. Parent,
//     Fence and Ancestors are present exactly when Generation ≥ 2; RunUID
//     always; Memory, RepinnedFrom and ForkedFrom when that generation has
//     them (docs/design.md "sandbox.snapshot-ref/3" states the rules;
//     OpenRef, MarshalJSON and SignRef enforce them).
//   - RefSchemaV2, read only: every member but RunUID, Ancestors, Memory,
//     RepinnedFrom and ForkedFrom. Parent and Fence are present exactly
//     when Generation ≥ 2.
//   - RefSchemaV1, read only: its "rootfsDiff" is Layers[0] (exactly one
//     layer), Generation is 1, and Parent, Spec, Runtime and Fence are
//     empty.
//
// Its JSON form (MarshalJSON, Canonical) is the wire form of its Schema.
// Unknown members are refused when a ref is parsed.
type Ref struct {
	// Schema is RefSchemaV1, RefSchemaV2 or RefSchemaV3.
	Schema string `json:"schema"`
	// Run is the run id (ValidRunID).
	Run string `json:"run"`
	// Generation is which suspend of the run this ref records, ≥ 1.
	Generation uint64 `json:"generation"`
	// Parent is the sha256 of the parent generation's ref file bytes;
	// present exactly when Generation ≥ 2.
	Parent digest.Digest `json:"parent,omitempty"`
	// Manifest is the address of Core: "blake3:<64 hex>".
	Manifest string `json:"manifest"`
	// Core is the manifest core of the environment the run was suspended
	// in.
	Core envmanifest.Core `json:"core"`
	// Pinned is Core.IsPinned().
	Pinned bool `json:"pinned"`
	// Policy is the effective list of reserved environment names, sorted;
	// [] when none.
	Policy []string `json:"policy"`
	// Lockfile is "sha256:<hex>" of the lockfile bytes used; empty
	// (absent) when none was.
	Lockfile string `json:"lockfile,omitempty"`
	// Host is the daemon the run was suspended on.
	Host Host `json:"host"`
	// Base is what the core's image resolved to (copied from the parent
	// at a later generation).
	Base Base `json:"base"`
	// Layers are the rootfs diffs that, applied over Base in order (oldest
	// first), give this generation's filesystem: 1 to MaxLayers entries.
	Layers []Layer `json:"layers"`
	// Spec describes the recorded runtime spec blob (media type
	// MediaTypeSpec); nil for a RefSchemaV1 ref.
	Spec *Descriptor `json:"spec"`
	// Runtime is the container's runtime and its options; nil for a
	// RefSchemaV1 ref.
	Runtime *Runtime `json:"runtime"`
	// Fence is the fencing token of the container that was suspended;
	// present exactly when Generation ≥ 2 (and then ≥ 1).
	Fence uint64 `json:"fence,omitempty"`
	// KeptRunning is whether the suspend used --keep-running.
	KeptRunning bool `json:"keptRunning"`
	// Created is when the suspend began: RFC 3339, UTC, seconds.
	Created string `json:"created"`

	// The RefSchemaV3 members (docs/design.md "SnapshotRef", "Exactly once
	// across hosts", "Memory", "Repin and fork"); empty in a /1 or /2 ref.

	// RunUID is the run's unique id, "ruid:" and 32 lowercase hex (128
	// random bits, NewRunUID): minted at generation 1 (and by a fork, and
	// by the first /3 generation after a /2 parent), copied by every later
	// generation and by repin. Required in /3.
	RunUID string `json:"runUID,omitempty"`
	// Ancestors are the digests of the earlier refs of the run, oldest
	// first, the last one Parent, at most MaxAncestors (the latest ones):
	// NextAncestors. Present exactly when Generation ≥ 2; a chain that
	// started at a /2 parent starts at that parent.
	Ancestors []digest.Digest `json:"ancestors,omitempty"`
	// Memory is the generation's process memory image, nil when the
	// generation has none (docs/design.md "Memory").
	Memory *Memory `json:"memory,omitempty"`
	// RepinnedFrom is the manifest address ("blake3:<64 hex>") a repin
	// replaced; empty when this generation is not a repin.
	RepinnedFrom string `json:"repinnedFrom,omitempty"`
	// ForkedFrom is the generation a fork started this run from; nil when
	// the run is not a fork (only at Generation 1).
	ForkedFrom *ForkedFrom `json:"forkedFrom,omitempty"`

	// coreCanonical is the JCS of the core exactly as parsed, kept by
	// decodeRef so checkIntegrity need not canonicalize it again.
	coreCanonical []byte
	// provenance is what OpenRef established about the signatures.
	provenance Provenance
}

// IsV1 reports whether r is a RefSchemaV1 ref (no spec, one layer).
func (r *Ref) IsV1() bool { return r.Schema == RefSchemaV1 }

// Gen returns the generation the ref records: its Generation, and 1 for a
// `/1` ref, which has no "generation" member (docs/design.md "SnapshotRef":
// `/1` refs resume as generation 1).
func (r *Ref) Gen() uint64 {
	if r.IsV1() || r.Generation == 0 {
		return 1
	}
	return r.Generation
}

// IsV3 reports whether r is a RefSchemaV3 ref (with RunUID, and Ancestors
// from generation 2).
func (r *Ref) IsV3() bool { return r.Schema == RefSchemaV3 }

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

// Target is the digest the base's reference resolves to: the image index
// digest when the reference named an index, else the platform manifest
// digest. An image record created for the base points at it, and a
// pinned reference carries it.
func (b Base) Target() digest.Digest {
	if b.IndexDigest != "" {
		return b.IndexDigest
	}
	return b.ManifestDigest
}

// Layer describes one rootfs diff layer: the compressed blob (Digest, Size
// in bytes, MediaType: an OCI layer media type, tar, tar+gzip or
// tar+zstd) and the uncompressed tar (DiffID, UncompressedSize in bytes).
type Layer struct {
	MediaType        string        `json:"mediaType"`
	Digest           digest.Digest `json:"digest"`
	Size             int64         `json:"size"`
	DiffID           digest.Digest `json:"diffID"`
	UncompressedSize int64         `json:"uncompressedSize"`
}

// Descriptor names a blob: its media type, sha256 digest and size in
// bytes. A ref's Spec is one (media type MediaTypeSpec).
type Descriptor struct {
	MediaType string        `json:"mediaType"`
	Digest    digest.Digest `json:"digest"`
	Size      int64         `json:"size"`
}

// Runtime is a container's runtime as containerd records it: the runtime
// name ("io.containerd.runc.v2", "io.containerd.runsc.v1") and its options
// (nil when the container has none). The incarnation is created with the
// same runtime and options (docs/design.md "SnapshotRef", member
// "runtime").
type Runtime struct {
	Name    string          `json:"name"`
	Options *RuntimeOptions `json:"options,omitempty"`
}

// RuntimeOptions are a runtime's options as a protobuf Any: the type URL
// and the serialized message, exactly as containerd holds them. Its JSON
// form (MarshalJSON) writes Value in standard base64 with padding, and an
// empty message — what containerd holds for runc's default
// containerd.runc.v1.Options — as "" (never null), so the incarnation is
// created with exactly the recorded type URL and bytes.
type RuntimeOptions struct {
	TypeURL string `json:"typeUrl"`
	Value   []byte `json:"value"`
}

// MarshalJSON writes {"typeUrl": TypeURL, "value": base64(Value)}; a nil
// or empty Value is "" (docs/design.md "SnapshotRef": value is a string).
func (o RuntimeOptions) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		TypeURL string `json:"typeUrl"`
		Value   string `json:"value"`
	}{o.TypeURL, base64.StdEncoding.EncodeToString(o.Value)})
}
