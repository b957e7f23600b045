package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// This file implements resume.Materializer on *Runtime (DESIGN
// "Materialize, claim, run lifecycle").

var _ resume.Materializer = (*Runtime)(nil)

// RuncRuntime is the runtime of every resumed container.
const RuncRuntime = "io.containerd.runc.v2"

// TakeoverLockExpiry bounds how long the lock lease of a claim takeover
// ("sandbox-resume.claim/<run>/takeover") blocks other takers when its
// holder died inside the few calls it covers.
const TakeoverLockExpiry = 30 * time.Second

// expireLabel is the lease label leases.WithExpiration sets (RFC 3339).
const expireLabel = "containerd.io/gc.expire"

// lease returns the lease with this id, or nil when it does not exist.
func (r *Runtime) lease(ctx context.Context, id string) (*leases.Lease, error) {
	ls, err := r.client.LeasesService().List(ctx, "id=="+strconv.Quote(id))
	if err != nil {
		return nil, fmt.Errorf("list lease %s: %w", id, native(err))
	}
	for i := range ls {
		if ls[i].ID == id {
			return &ls[i], nil
		}
	}
	return nil, nil
}

// CreateClaim creates the claim lease "sandbox-resume.claim/<run>" with
// holder's labels (resume.ClaimLabels) in one Create call: lease creation is
// atomic in containerd's metadata store, so of two concurrent callers one
// gets errdefs.ErrAlreadyExists (resume.Materializer).
func (r *Runtime) CreateClaim(ctx context.Context, run string, holder resume.Claim) error {
	id := snapshot.ClaimLease(run)
	if _, err := r.client.LeasesService().Create(ctx, leases.WithID(id), leases.WithLabels(resume.ClaimLabels(holder))); err != nil {
		return fmt.Errorf("create claim lease %s: %w", id, native(err))
	}
	return nil
}

// TakeOverClaim replaces a stale claim (resume.Materializer). Label updates
// are not atomic, so it serializes takers with a second lease, the lock
// "sandbox-resume.claim/<run>/takeover", created atomically with the
// taker's holder labels and expiring after TakeoverLockExpiry. A lock that
// has expired, or whose holder process (its labels, resume.ProcessAlive) is
// gone — a taker SIGKILLed inside the lock — is deleted and its creation
// retried once. Under the lock it re-reads the claim, deletes it with
// leases.SynchronousDelete only if its labels still name stale's holder
// (so what the dead holder prepared under it is collected), and creates it
// with holder's labels. A taker that cannot get the lock, finds another
// holder, or loses the final Create to a plain CreateClaim gets
// errdefs.ErrAlreadyExists.
func (r *Runtime) TakeOverClaim(ctx context.Context, run string, stale *resume.Claim, holder resume.Claim) error {
	id := snapshot.ClaimLease(run)
	lockID := id + "/takeover"
	ls := r.client.LeasesService()
	var lock leases.Lease
	var err error
	for attempt := 0; ; attempt++ {
		lock, err = ls.Create(ctx, leases.WithID(lockID), leases.WithExpiration(TakeoverLockExpiry), leases.WithLabels(resume.ClaimLabels(holder)))
		err = native(err)
		if err == nil {
			break
		}
		if !errdefs.IsAlreadyExists(err) || attempt > 0 {
			return fmt.Errorf("take over claim %s: lock lease %s: %w", id, lockID, err)
		}
		l, lerr := r.lease(ctx, lockID)
		if lerr != nil {
			return lerr
		}
		if l != nil {
			exp, perr := time.Parse(time.RFC3339, l.Labels[expireLabel])
			taker := resume.ClaimFromLabels(lockID, l.Labels)
			if perr == nil && time.Now().Before(exp) && resume.ProcessAlive(taker.PID, taker.StartTime, taker.BootID) {
				return fmt.Errorf("take over claim %s: another resume holds the lock lease %s until %s: %w", id, lockID, exp.Format(time.RFC3339), errdefs.ErrAlreadyExists)
			}
			if derr := ls.Delete(ctx, *l); derr != nil && !errdefs.IsNotFound(native(derr)) {
				return fmt.Errorf("take over claim %s: delete expired lock lease %s: %w", id, lockID, native(derr))
			}
		}
	}
	defer ls.Delete(context.WithoutCancel(ctx), lock)
	faultpoint.Reach("resume-takeover") // test-only (resume.Resume lists the steps)

	cur, err := r.lease(ctx, id)
	if err != nil {
		return err
	}
	if cur != nil {
		now := resume.ClaimFromLabels(id, cur.Labels)
		if !resume.SameHolder(now, stale) {
			return fmt.Errorf("take over claim %s: it now names another holder (%s): %w", id, now, errdefs.ErrAlreadyExists)
		}
		if err := ls.Delete(ctx, *cur, leases.SynchronousDelete); err != nil && !errdefs.IsNotFound(native(err)) {
			return fmt.Errorf("take over claim %s: delete: %w", id, native(err))
		}
	}
	return r.CreateClaim(ctx, run, holder)
}

// ReleaseClaim deletes run's claim lease with leases.SynchronousDelete when
// its labels name holder's container, pid and start time
// (resume.Materializer); the snapshots made under it are collected.
func (r *Runtime) ReleaseClaim(ctx context.Context, run string, holder resume.Claim) error {
	id := snapshot.ClaimLease(run)
	cur, err := r.lease(ctx, id)
	if err != nil || cur == nil {
		return err
	}
	now := resume.ClaimFromLabels(id, cur.Labels)
	if now.Container != holder.Container || now.PID != holder.PID || now.StartTime != holder.StartTime {
		return nil
	}
	if err := r.client.LeasesService().Delete(ctx, *cur, leases.SynchronousDelete); err != nil && !errdefs.IsNotFound(native(err)) {
		return fmt.Errorf("release claim %s: %w", id, native(err))
	}
	return nil
}

// CheckDiff implements resume.Materializer: it reads a layer blob
// from the content store once and checks it with snapshot.VerifyDiff, the
// layer verifier the fakes call too. A mismatch wraps
// snapshot.ErrDiffCorrupt; an absent blob errdefs.ErrNotFound.
func (r *Runtime) CheckDiff(ctx context.Context, d snapshot.Layer) error {
	ra, err := r.client.ContentStore().ReaderAt(ctx, ocispec.Descriptor{Digest: d.Digest, Size: d.Size})
	if err != nil {
		return fmt.Errorf("layer %s: %w", d.Digest, native(err))
	}
	defer ra.Close()
	return snapshot.VerifyDiff(ra, d)
}

// ContainerExists reports whether container id exists in this namespace.
func (r *Runtime) ContainerExists(ctx context.Context, id string) (bool, error) {
	_, err := r.client.ContainerService().Get(ctx, id)
	switch err = native(err); {
	case err == nil:
		return true, nil
	case errdefs.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("container %s: %w", id, err)
}

// defaultSnapshotter returns the namespace's default snapshotter (label
// containerd.io/defaults/snapshotter, else overlayfs on Linux), as Host
// reports it.
func (r *Runtime) defaultSnapshotter(ctx context.Context) (string, error) {
	sn, err := r.client.GetLabel(ctx, defaults.DefaultSnapshotterNSLabel)
	if err = native(err); errdefs.IsNotFound(err) {
		sn, err = "", nil
	}
	if err != nil {
		return "", fmt.Errorf("namespace %s label %s: %w", r.namespace, defaults.DefaultSnapshotterNSLabel, err)
	}
	if sn == "" {
		sn = defaults.DefaultSnapshotter
	}
	return sn, nil
}

// CreateContainer implements resume.Materializer (DESIGN "Materialize"):
// under the claim lease of spec.Run it reads the base manifest
// (spec.Base.ManifestDigest) and applies its layers (with spec.Base.DiffIDs)
// plus spec.Layers, in order, with rootfs.ApplyLayers on the namespace's default
// snapshotter — which checks each diffID while extracting, except that an
// existing chain snapshot is trusted — then prepares the active snapshot
// spec.ID on top and creates the container spec.ID: image name
// spec.Base.Name, the OCI spec from the base image config
// (oci.WithImageConfig) plus spec.Env, runtime io.containerd.runc.v2,
// labels io.sandbox-resume.run and io.sandbox-resume.manifest.
//
// A leftover snapshot spec.ID labelled with this run and no container
// (an earlier resume killed between Prepare and NewContainer) is removed
// first. On failure the prepared snapshot is removed. Errors:
// errdefs.ErrAlreadyExists for an existing container or foreign snapshot
// spec.ID; snapshot.ErrDiffCorrupt when extraction computes another diffID;
// errdefs.ErrNotFound for missing base content.
func (r *Runtime) CreateContainer(ctx context.Context, spec resume.ContainerSpec) error {
	lctx := leases.WithLease(ctx, snapshot.ClaimLease(spec.Run))
	cs := r.client.ContentStore()
	info, err := cs.Info(ctx, spec.Base.ManifestDigest)
	if err != nil {
		return fmt.Errorf("base manifest %s: %w", spec.Base.ManifestDigest, native(err))
	}
	mdesc := ocispec.Descriptor{Digest: spec.Base.ManifestDigest, Size: info.Size}
	mb, err := r.readBlob(ctx, cs, mdesc)
	if err != nil {
		return fmt.Errorf("base manifest: %w", err)
	}
	if mdesc.MediaType, err = detectMediaType(mb); err != nil {
		return fmt.Errorf("base manifest %s: %w", spec.Base.ManifestDigest, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return fmt.Errorf("base manifest %s: %w: %w", spec.Base.ManifestDigest, errdefs.ErrInvalidArgument, err)
	}
	if len(m.Layers) != len(spec.Base.DiffIDs) {
		return fmt.Errorf("base manifest %s has %d layers, the ref records %d diffIDs: %w",
			spec.Base.ManifestDigest, len(m.Layers), len(spec.Base.DiffIDs), errdefs.ErrInvalidArgument)
	}
	layers := make([]rootfs.Layer, 0, len(m.Layers)+len(spec.Layers))
	for i, l := range m.Layers {
		layers = append(layers, rootfs.Layer{Blob: l, Diff: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: spec.Base.DiffIDs[i]}})
	}
	for _, l := range spec.Layers {
		layers = append(layers, rootfs.Layer{
			Blob: ocispec.Descriptor{MediaType: l.MediaType, Digest: l.Digest, Size: l.Size},
			Diff: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: l.DiffID, Size: l.UncompressedSize},
		})
	}
	var diffIDs []string
	for _, l := range spec.Layers {
		diffIDs = append(diffIDs, fmt.Sprintf("%s (diffID %s)", l.Digest, l.DiffID))
	}
	applied := strings.Join(diffIDs, " + ")

	snName, err := r.defaultSnapshotter(ctx)
	if err != nil {
		return err
	}
	sn := r.client.SnapshotService(snName)
	chainID, err := rootfs.ApplyLayers(lctx, layers, sn, r.client.DiffService())
	if err != nil {
		err = native(err)
		if isWrongDiffID(err) {
			return fmt.Errorf("apply base %s + layers %s: %v: %w", spec.Base.ManifestDigest, applied, err, snapshot.ErrDiffCorrupt)
		}
		return fmt.Errorf("apply base %s + layers %s: %w", spec.Base.ManifestDigest, applied, err)
	}
	faultpoint.Reach("resume-applied") // test-only (resume.Resume lists the steps)

	labels := map[string]string{snapshot.LabelRun: spec.Run, snapshot.LabelManifest: spec.Manifest}
	_, err = sn.Prepare(lctx, spec.ID, chainID.String(), snapshots.WithLabels(labels))
	if errdefs.IsAlreadyExists(native(err)) {
		st, serr := sn.Stat(ctx, spec.ID)
		if serr == nil && st.Labels[snapshot.LabelRun] == spec.Run {
			if exists, cerr := r.ContainerExists(ctx, spec.ID); cerr == nil && !exists {
				if rerr := sn.Remove(ctx, spec.ID); rerr == nil || errdefs.IsNotFound(native(rerr)) {
					_, err = sn.Prepare(lctx, spec.ID, chainID.String(), snapshots.WithLabels(labels))
				}
			}
		}
	}
	if err != nil {
		return fmt.Errorf("prepare snapshot %s/%s on %s: %w", snName, spec.ID, chainID, native(err))
	}
	faultpoint.Reach("resume-prepared") // test-only (resume.Resume lists the steps)

	img := client.NewImageWithPlatform(r.client, images.Image{Name: spec.Base.Name, Target: mdesc}, platforms.Only(r.platform))
	_, err = r.client.NewContainer(ctx, spec.ID,
		client.WithImageName(spec.Base.Name),
		client.WithSnapshotter(snName),
		client.WithSnapshot(spec.ID),
		client.WithRuntime(RuncRuntime, nil),
		client.WithContainerLabels(labels),
		client.WithNewSpec(oci.WithImageConfig(img), oci.WithEnv(spec.Env)),
	)
	if err != nil {
		_ = sn.Remove(context.WithoutCancel(ctx), spec.ID)
		return fmt.Errorf("create container %s: %w", spec.ID, native(err))
	}
	return nil
}

// wrongDiffIDText is how containerd's rootfs.ApplyLayers says that a
// layer's extraction computed another diffID than the one it was given
// (pkg/rootfs/apply.go: "wrong diff id calculated on extraction %q"). It
// offers no sentinel or errdefs class for it, only this text.
const wrongDiffIDText = "wrong diff id calculated on extraction"

// isWrongDiffID reports whether err is rootfs.ApplyLayers refusing a layer
// whose extraction computed another diffID. It is the one place that reads
// containerd's text (wrongDiffIDText); TestWrongDiffIDText pins it against
// the containerd version in go.mod.
func isWrongDiffID(err error) bool {
	return err != nil && strings.Contains(err.Error(), wrongDiffIDText)
}

// StartTask creates the container's task with no standard streams
// (cio.NullIO), starts it and returns its pid without waiting: the task
// outlives this process (resume --start).
func (r *Runtime) StartTask(ctx context.Context, id string) (uint32, error) {
	cont, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("container %s: %w", id, native(err))
	}
	task, err := cont.NewTask(ctx, cio.NullIO)
	if err != nil {
		return 0, fmt.Errorf("container %s: new task: %w", id, native(err))
	}
	faultpoint.Reach("resume-task") // test-only (resume.Resume lists the steps)
	if err := task.Start(ctx); err != nil {
		_, _ = task.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
		return 0, fmt.Errorf("container %s: start task: %w", id, native(err))
	}
	return task.Pid(), nil
}
