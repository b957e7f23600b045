package resume

import (
	"context"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Facts is what the resume decision needs to know about the host it runs on
// (docs/design.md "Layout": the seams). runtime/containerd implements it against a
// daemon and resume/fake in memory; one conformance suite runs against both.
//
// Errors wrap the github.com/containerd/errdefs classes (errdefs.ErrNotFound
// for an absent image, platform or blob), with the reference or digest they
// concern in the message.
type Facts interface {
	// Host returns the daemon's identity (its introspection UUID, or the
	// configured override with IDSource "override") and its facts.
	Host(ctx context.Context) (snapshot.Host, error)

	// ResolveImage resolves a normalized image reference through the content
	// store for the host platform (platforms.OnlyStrict): the index digest when
	// the reference names an index, the platform manifest, its config and the
	// config's diffIDs. A reference with a digest resolves that digest as a
	// content store key (the image store is not consulted; a tag beside the
	// digest is dropped). Errors: errdefs.ErrInvalidArgument for a reference
	// that does not parse; errdefs.ErrNotFound for an unknown name, an absent
	// index, manifest or config, or no manifest for the host platform.
	ResolveImage(ctx context.Context, ref string) (snapshot.Base, error)

	// ImageConfigReader reads the labels of an image config blob: check 8
	// reads the devcontainer.metadata label of the recorded
	// base.configDigest (docs/design.md "Image metadata").
	snapshot.ImageConfigReader

	// MissingContent returns the digests among the manifest, its config and
	// every layer that are absent from the content store, in manifest order
	// (nil when all are present). An absent manifest is reported as missing,
	// not as an error; errdefs.ErrInvalidArgument when the digest is invalid
	// or names a blob that is not a manifest (an index, say).
	MissingContent(ctx context.Context, manifest digest.Digest) ([]digest.Digest, error)

	// BlobSize returns the size in bytes of a blob in the content store, or an
	// error wrapping errdefs.ErrNotFound.
	BlobSize(ctx context.Context, dgst digest.Digest) (int64, error)

	// ReadSpec returns the bytes of the recorded runtime spec blob d (a
	// verified ref's "spec"), read from the content store once with
	// snapshot.ReadBlob, which checks its size and digest as it reads:
	// another size or digest wraps snapshot.ErrBlobCorrupt; an absent blob
	// wraps errdefs.ErrNotFound (check 9).
	ReadSpec(ctx context.Context, d snapshot.Descriptor) ([]byte, error)

	// BuildSpec returns the OCI runtime spec (JSON) that a `/1` ref's
	// incarnation would be created with, as the previous release created
	// it (docs/design.md "Spec validation": an offered spec is
	// compared with it): the host's default spec for container id in this
	// namespace, the process, user, working directory and environment of
	// the image config base.ConfigDigest (read through
	// base.ManifestDigest), users and groups looked up in the file system
	// of the base layers plus layers, then env ("KEY=VALUE" entries
	// replacing those of the image by key). Missing content wraps
	// errdefs.ErrNotFound.
	BuildSpec(ctx context.Context, id string, base snapshot.Base, layers []snapshot.Layer, env []string) ([]byte, error)

	// HostNamespace reports whether path may name the namespace of type
	// nsType (an OCI type: "pid", "network", …) of this host's pid 1
	// (SpecOptions.HostNamespace, check 10); it answers true when it
	// cannot tell. runtime/containerd answers with HostPID1Namespace; a
	// fake may answer as a test needs.
	HostNamespace(nsType, path string) bool

	// PlatformMatches reports whether the host platform matches platform
	// ("os/arch[/variant]") under platforms.OnlyStrict.
	PlatformMatches(platform string) bool

	// Namespace returns the containerd namespace the facts are about (the
	// namespace of every container the claim check looks at, and of the
	// ledger holder a resume names).
	Namespace() string

	// ContainerState returns what the claim check needs to know about
	// container id in this namespace: its labels and whether it has a
	// running task; nil (and no error) when it does not exist.
	ContainerState(ctx context.Context, id string) (*ContainerState, error)

	// ResumerAlive reports whether the resumer process a resuming holder
	// names (h.PID, h.Start, h.Boot) still runs on this machine
	// (runtime/containerd: ProcessAlive). It is only asked about holders
	// of this host.
	ResumerAlive(h ledger.Holder) bool

	// LegacyClaim returns the claim lease of the previous release
	// ("sandbox-resume.claim/<run>", snapshot.ClaimLease) and the
	// container its labels name, or nil when there is none (docs/design.md
	// "The run ledger": the upgrade rule).
	LegacyClaim(ctx context.Context, run string) (*LegacyClaim, error)
}

// ContainerState is what Facts.ContainerState reports about an existing
// container.
type ContainerState struct {
	// ID is the container id.
	ID string
	// Labels are the container's labels.
	Labels map[string]string
	// Running is true when the container has a task that is running or
	// paused (any task status but stopped).
	Running bool
}

// LegacyClaim is a claim lease of the previous release (`/1`): the lease id
// and the container its label io.sandbox-resume.claim.container names
// ("" when the label is absent).
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
