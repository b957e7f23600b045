package resume

import (
	"github.com/sandbox-resume/sandbox-resume/host"
)

// Facts is what the resume decision needs to know about the host it runs
// on (docs/design.md "Layout"), as host's roles: its identity and facts,
// its images and content (check 8 reads the devcontainer.metadata label
// of the recorded base.configDigest through Images.ImageLabels; check 9
// BlobSize, ReadSpec and, for a `/1` ref, Containers.BuildSpec), the
// containers the claim check looks at (Containers.ContainerState, in
// Info.Namespace) and the previous release's claim leases
// (Leases.LegacyClaim). runtime/containerd implements it against a daemon
// and host/memhost in memory; host/hosttest is the suite both pass.
//
// Errors wrap the github.com/containerd/errdefs classes (errdefs.ErrNotFound
// for an absent image, platform or blob), with the reference or digest they
// concern in the message.
type Facts interface {
	host.Info
	host.Images
	host.Content
	host.Containers
	host.Leases
}

// LabelLegacyClaimContainer is the label of a `/1` claim lease naming the
// container its holder created (host.LabelLegacyClaimContainer).
const LabelLegacyClaimContainer = host.LabelLegacyClaimContainer
