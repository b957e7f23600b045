package containerd

import (
	"context"
	"fmt"
	"maps"

	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// This file implements the chain snapshots of docs/design.md "Resume on
// the same host without extracting": a suspend commits the container's
// active snapshot under the chain id of the generation it wrote, and a
// resume on this host finds it (rootfs.ApplyLayers then extracts nothing).

// labelChainFrom labels a chain snapshot CommitChain committed with the
// snapshot key it was committed from, so that a suspend killed between
// the commit and the prepare of the key finds it (reprepare).
const labelChainFrom = snapshot.LabelPrefix + "chain.from"

// CommitChain implements host.Containers: the stopped container's active
// snapshot is committed (Snapshotter.Commit under the lease, which then
// holds it; overlayfs renames metadata only) as
// identity.ChainID(chain) with the labels, and a new active snapshot is
// prepared under the container's key on top of it, with the labels the old
// one had. Because containerd reports some calls as done when they did
// nothing (notes/derisk.md), the committed snapshot is read back (Stat:
// committed, with the expected parent) before the key is prepared again.
func (r *Runtime) CommitChain(ctx context.Context, lease string, c snapshot.Container, chain []digest.Digest, labels map[string]string) (bool, error) {
	if len(chain) == 0 {
		return false, fmt.Errorf("commit the snapshot of container %q: no chain: %w", c.ID, errdefs.ErrInvalidArgument)
	}
	snName, err := r.defaultSnapshotter(ctx)
	if err != nil {
		return false, err
	}
	if c.Snapshotter != snName {
		return false, fmt.Errorf("container %q: snapshot on %s, not the default snapshotter %s: %w", c.ID, c.Snapshotter, snName, errdefs.ErrFailedPrecondition)
	}
	sn := r.client.SnapshotService(snName)
	name := identity.ChainID(chain).String()
	parent := identity.ChainID(chain[:len(chain)-1]).String()
	if _, err := sn.Stat(ctx, name); err == nil {
		// Committed already (an earlier attempt, an extract of the same
		// chain, another run with the same layers): nothing to commit; the
		// lease holds it too, and the key is re-prepared only when the
		// earlier attempt stopped between the commit and the prepare.
		if err := r.client.LeasesService().AddResource(ctx, leases.Lease{ID: lease}, leases.Resource{ID: name, Type: "snapshots/" + snName}); err != nil {
			return false, fmt.Errorf("hold chain snapshot %s/%s under lease %s: %w", snName, name, lease, native(err))
		}
		if _, err := sn.Stat(ctx, c.SnapshotKey); errdefs.IsNotFound(native(err)) {
			if _, err := sn.Prepare(ctx, c.SnapshotKey, name); err != nil {
				return false, fmt.Errorf("prepare snapshot %s/%s on %s again: %w", snName, c.SnapshotKey, name, native(err))
			}
		}
		return false, nil
	} else if !errdefs.IsNotFound(native(err)) {
		return false, fmt.Errorf("chain snapshot %s/%s: %w", snName, name, native(err))
	}
	st, err := sn.Stat(ctx, c.SnapshotKey)
	if err != nil {
		return false, fmt.Errorf("container %q: snapshot %s/%s: %w", c.ID, snName, c.SnapshotKey, native(err))
	}
	if st.Kind != snapshots.KindActive || st.Parent != parent {
		return false, fmt.Errorf("container %q: snapshot %s/%s is %s on %q, not active on %s: %w",
			c.ID, snName, c.SnapshotKey, st.Kind, st.Parent, parent, errdefs.ErrFailedPrecondition)
	}
	old := maps.Clone(st.Labels)
	lctx := leases.WithLease(ctx, lease)
	committed := maps.Clone(labels)
	if committed == nil {
		committed = map[string]string{}
	}
	committed[labelChainFrom] = c.SnapshotKey
	if err := sn.Commit(lctx, name, c.SnapshotKey, snapshots.WithLabels(committed)); err != nil {
		return false, fmt.Errorf("commit snapshot %s/%s as chain snapshot %s: %w", snName, c.SnapshotKey, name, native(err))
	}
	got, err := sn.Stat(ctx, name)
	if err != nil || got.Kind != snapshots.KindCommitted || got.Parent != parent {
		return true, fmt.Errorf("commit snapshot %s/%s as %s: reads back as %+v, %v: %w", snName, c.SnapshotKey, name, got, err, errdefs.ErrDataLoss)
	}
	faultpoint.Reach("chain-committed") // test-only (suspend/faultpoint.go lists the steps)
	var opts []snapshots.Opt
	if len(old) > 0 {
		opts = append(opts, snapshots.WithLabels(old))
	}
	if _, err := sn.Prepare(ctx, c.SnapshotKey, name, opts...); err != nil {
		return true, fmt.Errorf("prepare snapshot %s/%s on chain snapshot %s: %w", snName, c.SnapshotKey, name, native(err))
	}
	return true, nil
}

// ChainSnapshot implements host.Containers: the labels of the committed
// snapshot identity.ChainID(chain) on the default snapshotter.
func (r *Runtime) ChainSnapshot(ctx context.Context, chain []digest.Digest) (map[string]string, error) {
	snName, err := r.defaultSnapshotter(ctx)
	if err != nil {
		return nil, err
	}
	name := identity.ChainID(chain).String()
	st, err := r.client.SnapshotService(snName).Stat(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("chain snapshot %s/%s: %w", snName, name, native(err))
	}
	if st.Kind != snapshots.KindCommitted {
		return nil, fmt.Errorf("chain snapshot %s/%s is %s, not committed: %w", snName, name, st.Kind, errdefs.ErrNotFound)
	}
	labels := maps.Clone(st.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	delete(labels, labelChainFrom)
	return labels, nil
}

// reprepare prepares the snapshot key again on the chain snapshot that
// CommitChain committed from it (labelChainFrom), when a suspend was
// killed between the commit and the prepare: Container calls it for a
// container labelled snapshot.LabelSuspending whose snapshot is missing.
// errdefs.ErrNotFound when there is no such chain snapshot.
func (r *Runtime) reprepare(ctx context.Context, snName, key string) (snapshots.Info, error) {
	sn := r.client.SnapshotService(snName)
	var found []string
	err := sn.Walk(ctx, func(_ context.Context, i snapshots.Info) error {
		if i.Kind == snapshots.KindCommitted && i.Labels[labelChainFrom] == key {
			found = append(found, i.Name)
		}
		return nil
	}, fmt.Sprintf("labels.%q==%s", labelChainFrom, key))
	if err != nil {
		return snapshots.Info{}, fmt.Errorf("snapshots committed from %s/%s: %w", snName, key, native(err))
	}
	if len(found) != 1 {
		return snapshots.Info{}, fmt.Errorf("snapshot %s/%s: %d chain snapshots committed from it: %w", snName, key, len(found), errdefs.ErrNotFound)
	}
	if _, err := sn.Prepare(ctx, key, found[0]); err != nil && !errdefs.IsAlreadyExists(native(err)) {
		return snapshots.Info{}, fmt.Errorf("prepare snapshot %s/%s on chain snapshot %s again: %w", snName, key, found[0], native(err))
	}
	st, err := sn.Stat(ctx, key)
	if err != nil {
		return snapshots.Info{}, fmt.Errorf("snapshot %s/%s: %w", snName, key, native(err))
	}
	return st, nil
}

// ReleaseChain implements host.Leases (LeasesService.DeleteResource of
// the snapshot resource identity.ChainID(chain) of the default
// snapshotter).
func (r *Runtime) ReleaseChain(ctx context.Context, lease string, chain []digest.Digest) error {
	l, err := r.lease(ctx, lease)
	if err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("lease %s in namespace %s: %w", lease, r.namespace, errdefs.ErrNotFound)
	}
	snName, err := r.defaultSnapshotter(ctx)
	if err != nil {
		return err
	}
	name := identity.ChainID(chain).String()
	err = r.client.LeasesService().DeleteResource(ctx, *l, leases.Resource{ID: name, Type: "snapshots/" + snName})
	if err != nil && !errdefs.IsNotFound(native(err)) {
		return fmt.Errorf("lease %s: release chain snapshot %s/%s: %w", lease, snName, name, native(err))
	}
	return nil
}

// holdChain adds the chain snapshot identity.ChainID(chain) of snapshotter
// snName to the run lease of run (docs/design.md "Resume on the same host
// without extracting": the run lease holds every chain snapshot a resume
// extracts), creating the lease when it is missing.
func (r *Runtime) holdChain(ctx context.Context, run, snName string, chain []digest.Digest) error {
	id := snapshot.RunLease(run)
	if err := r.CreateLease(ctx, id, map[string]string{snapshot.LabelRun: run}); err != nil && !errdefs.IsAlreadyExists(err) {
		return err
	}
	name := identity.ChainID(chain).String()
	if err := r.client.LeasesService().AddResource(ctx, leases.Lease{ID: id}, leases.Resource{ID: name, Type: "snapshots/" + snName}); err != nil {
		return fmt.Errorf("hold chain snapshot %s/%s under lease %s: %w", snName, name, id, native(err))
	}
	return nil
}
