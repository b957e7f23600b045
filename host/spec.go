package host

import (
	"strconv"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ContainerSpec is what Containers.CreateContainer makes (docs/design.md
// "Materialize").
//
// ID is the container id and its snapshot key; Run and Manifest become the
// container labels snapshot.LabelRun and snapshot.LabelManifest,
// Generation, Ref and Fence the labels snapshot.LabelGeneration (the
// generation resumed), snapshot.LabelRef (the digest of its ref file) and
// snapshot.LabelFence (the token the ledger's Claim issued), all decimal
// or as the digest's string; Base is the verified ref's base image (its
// ManifestDigest names the layers applied, DiffIDs their uncompressed
// digests); Layers are the verified ref's layers, applied on top in order
// (oldest first). Spec is the OCI runtime spec's JSON bytes the container
// is created with, exactly; nil for a `/1` ref resumed without an offered
// spec, whose spec the host builds as the previous release did
// (Containers.BuildSpec from Env: "KEY=VALUE" entries, sorted by key,
// replacing the image's by key). Runtime is the runtime name and options
// it runs under: the recorded ones (DefaultRuntime with no options for a
// `/1` ref).
type ContainerSpec struct {
	ID         string
	Run        string
	Manifest   string
	Generation uint64
	Ref        digest.Digest
	Fence      uint64
	Base       snapshot.Base
	Layers     []snapshot.Layer
	Spec       []byte
	Env        []string
	Runtime    snapshot.Runtime
}

// Labels returns the incarnation's labels: run, manifest, generation, ref
// and fence (docs/design.md "Materialize").
func (c ContainerSpec) Labels() map[string]string {
	return map[string]string{
		snapshot.LabelRun:        c.Run,
		snapshot.LabelManifest:   c.Manifest,
		snapshot.LabelGeneration: strconv.FormatUint(c.Generation, 10),
		snapshot.LabelRef:        c.Ref.String(),
		snapshot.LabelFence:      strconv.FormatUint(c.Fence, 10),
	}
}

// ContainerState is what Containers.ContainerState and RunContainers
// report about an existing container.
type ContainerState struct {
	// ID is the container id.
	ID string
	// Labels are the container's labels.
	Labels map[string]string
	// Running is true when the container has a task that is running or
	// paused (any task status but stopped).
	Running bool
}

// DefaultRuntime is the runtime of an incarnation whose ref records none
// (a `/1` ref): runc through containerd's runtime v2 shim, as the
// previous release ran every resumed container.
const DefaultRuntime = "io.containerd.runc.v2"

// BundleRootfs is root.path of every spec an incarnation is created with:
// the rootfs directory of the OCI bundle containerd's runtime v2 shim
// lays out (runtime-spec config.md "Root").
const BundleRootfs = "rootfs"
