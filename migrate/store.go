package migrate

import (
	"github.com/sandbox-resume/sandbox-resume/host"
)

// Store is what Export, Import, Push and Pull need of the host they run
// on (docs/design.md "Layout"): its content store, leases, image names and
// archive code, as host's roles. runtime/containerd implements it over a
// daemon and host/memhost in memory; host/hosttest is the suite both
// pass. The policy — what to send, what to accept, every verification —
// stays in migrate. Errors carry github.com/containerd/errdefs classes
// (errdefs.ErrNotFound for an absent blob or lease,
// errdefs.ErrAlreadyExists for an existing lease) and name the digest or
// lease.
type Store interface {
	host.Content
	host.Leases
	host.Archiver
	host.Images
}

// Registry is the registry transport of Push and Pull (host.Registry).
// Progress counts the bytes moved.
type Registry = host.Registry
