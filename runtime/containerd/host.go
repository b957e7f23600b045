package containerd

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Host returns the daemon's identity and facts (docs/design.md "SnapshotRef", host):
// ID is the introspection UUID (IDSource "introspection", stored under the
// daemon's root, so a copied root copies it) or the WithHostIDOverride value
// (IDSource "override"); ContainerdVersion is the daemon's Version string;
// Snapshotter is the namespace's default snapshotter (label
// containerd.io/defaults/snapshotter, else the platform default, overlayfs on
// Linux); Platform is the host platform "os/arch[/variant]".
//
// Errors come from the version and introspection services, classified with
// errdefs and naming the socket.
func (r *Runtime) Host(ctx context.Context) (snapshot.Host, error) {
	v, err := r.client.Version(ctx)
	if err != nil {
		return snapshot.Host{}, fmt.Errorf("containerd %s: version: %w", r.address, native(err))
	}
	h := snapshot.Host{
		ContainerdVersion: v.Version,
		Platform:          r.Platform(),
	}
	if r.hostIDOverride != "" {
		h.ID, h.IDSource = r.hostIDOverride, snapshot.IDSourceOverride
	} else {
		s, err := r.client.Server(ctx)
		if err != nil {
			return snapshot.Host{}, fmt.Errorf("containerd %s: introspection server: %w", r.address, native(err))
		}
		if s.UUID == "" {
			return snapshot.Host{}, fmt.Errorf("containerd %s: introspection reports an empty UUID: %w", r.address, errdefs.ErrUnknown)
		}
		h.ID, h.IDSource = s.UUID, snapshot.IDSourceIntrospection
	}
	sn, err := r.client.GetLabel(ctx, defaults.DefaultSnapshotterNSLabel)
	if err = native(err); errdefs.IsNotFound(err) {
		sn, err = "", nil // the namespace does not exist yet: no label
	}
	if err != nil {
		return snapshot.Host{}, fmt.Errorf("containerd %s: namespace %s label %s: %w", r.address, r.namespace, defaults.DefaultSnapshotterNSLabel, err)
	}
	if sn == "" {
		sn = defaults.DefaultSnapshotter
	}
	h.Snapshotter = sn
	return h, nil
}
