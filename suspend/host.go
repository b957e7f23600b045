package suspend

import "github.com/sandbox-resume/sandbox-resume/host"

// Host is what Run needs of the host the container runs on, as host's
// roles: the daemon's identity (Info), the container's image and its
// config labels (Images), blobs (Content), the run lease (Leases), the
// container itself (Containers), its task (Tasks) and its file system
// changes (Differ). runtime/containerd implements it against a daemon and
// host/memhost in memory; host/hosttest is the suite both pass.
type Host interface {
	host.Info
	host.Images
	host.Content
	host.Leases
	host.Containers
	host.Tasks
	host.Differ
}
