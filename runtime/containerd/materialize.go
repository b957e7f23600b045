package containerd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/containerd/typeurl/v2"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/internal/procfs"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// This file implements the host roles that materialize a run on *Runtime
// (docs/design.md "Materialize").

var _ host.Host = (*Runtime)(nil)

// RuncRuntime is the runtime of an incarnation whose ref records none
// (host.DefaultRuntime).
const RuncRuntime = host.DefaultRuntime

// labelMaterializeContainer labels a materialization lease with the id of
// the container it makes, so that DeleteContainer (a replaced resumer's
// container) drops what a killed materialization left.
const labelMaterializeContainer = snapshot.LabelPrefix + "materialize.container"

// MaterializeLeaseExpiry bounds how long the short-lived lease that
// protects a materialization's snapshots (until the container references
// them) outlives a resume killed before deleting it.
const MaterializeLeaseExpiry = 30 * time.Minute

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

// LegacyClaim implements host.Info: the claim lease of the previous
// release, "sandbox-resume.claim/<run>", and the container its label
// io.sandbox-resume.claim.container names; nil when there is none.
func (r *Runtime) LegacyClaim(ctx context.Context, run string) (*host.LegacyClaim, error) {
	id := snapshot.ClaimLease(run)
	l, err := r.lease(ctx, id)
	if err != nil || l == nil {
		return nil, err
	}
	return &host.LegacyClaim{Lease: id, Container: l.Labels[host.LabelLegacyClaimContainer]}, nil
}

// ContainerState implements host.Info: container id's labels and
// whether it has a task that is not stopped; nil when it does not exist.
func (r *Runtime) ContainerState(ctx context.Context, id string) (*host.ContainerState, error) {
	cont, err := r.client.LoadContainer(ctx, id)
	switch err = native(err); {
	case errdefs.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("container %q in namespace %s: %w", id, r.namespace, err)
	}
	info, err := cont.Info(ctx)
	switch err = native(err); {
	case errdefs.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("container %q in namespace %s: %w", id, r.namespace, err)
	}
	out := &host.ContainerState{ID: id, Labels: info.Labels}
	task, err := cont.Task(ctx, nil)
	switch err = native(err); {
	case errdefs.IsNotFound(err):
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("container %q: task: %w", id, err)
	}
	st, err := task.Status(ctx)
	switch err = native(err); {
	case errdefs.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("container %q: task status: %w", id, err)
	default:
		out.Running = st.Status != client.Stopped
	}
	return out, nil
}

// ResumerAlive implements host.Info with procfs.ProcessAlive: the
// resumer's pid, start time and boot id on this machine.
func (r *Runtime) ResumerAlive(pid int, start, boot string) bool {
	return procfs.ProcessAlive(pid, start, boot)
}

// StoreRef implements host.Leases: the ref file's bytes as a blob
// (media type snapshot.MediaTypeRef) under the run lease of run, created
// (labelled with the run) when missing.
func (r *Runtime) StoreRef(ctx context.Context, run string, ref []byte) error {
	id := snapshot.RunLease(run)
	if err := r.CreateLease(ctx, id, map[string]string{snapshot.LabelRun: run}); err != nil && !errdefs.IsAlreadyExists(err) {
		return err
	}
	_, err := r.WriteBlob(ctx, id, "ref-"+digest.FromBytes(ref).Encoded(), snapshot.MediaTypeRef, ref)
	return err
}

// DeleteContainer implements host.Containers: the task is stopped
// (SIGKILL, wait, delete: StopTask), the container deleted with its
// snapshot (client.WithSnapshotCleanup), a snapshot keyed id left without a
// container removed from the default snapshotter, and the leases of a
// materialization of id that did not finish deleted. An absent container is
// no error.
func (r *Runtime) DeleteContainer(ctx context.Context, id string) error {
	cont, err := r.client.LoadContainer(ctx, id)
	switch err = native(err); {
	case errdefs.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("container %q in namespace %s: %w", id, r.namespace, err)
	default:
		if err := r.StopTask(ctx, id); err != nil && !errdefs.IsNotFound(err) {
			return err
		}
		if err := cont.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(native(err)) {
			return fmt.Errorf("delete container %q in namespace %s: %w", id, r.namespace, native(err))
		}
	}
	snName, err := r.defaultSnapshotter(ctx)
	if err != nil {
		return err
	}
	if err := r.client.SnapshotService(snName).Remove(ctx, id); err != nil && !errdefs.IsNotFound(native(err)) {
		return fmt.Errorf("remove snapshot %s/%s: %w", snName, id, native(err))
	}
	// A materialization of this container killed before it finished.
	ls, err := r.client.LeasesService().List(ctx, fmt.Sprintf("labels.%q==%s", labelMaterializeContainer, id))
	if err != nil {
		return fmt.Errorf("list the materialization leases of container %s: %w", id, native(err))
	}
	for _, l := range ls {
		if err := r.client.LeasesService().Delete(ctx, l); err != nil && !errdefs.IsNotFound(native(err)) {
			return fmt.Errorf("delete materialization lease %s of container %s: %w", l.ID, id, native(err))
		}
	}
	return nil
}

// CheckDiff implements host.Content (docs/design.md
// "Materialize"): it reads a layer blob from the content store once (the
// blob file itself when the daemon's directory is visible here,
// localcontent.go) and checks its size and digest with
// snapshot.VerifyLayerBlob, decompressing nothing. The diffID is
// CreateContainer's to check: containerd's apply computes it while it
// extracts the blob and the extraction is never committed under another
// diffID. A mismatch wraps snapshot.ErrDiffCorrupt; an absent blob
// errdefs.ErrNotFound.
func (r *Runtime) CheckDiff(ctx context.Context, d snapshot.Layer) error {
	ra, err := r.blobProvider(ctx).ReaderAt(ctx, ocispec.Descriptor{Digest: d.Digest, Size: d.Size})
	if err != nil {
		return fmt.Errorf("layer %s: %w", d.Digest, native(err))
	}
	defer ra.Close()
	return snapshot.VerifyLayerBlob(ra, d)
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

// CreateContainer implements host.Containers (docs/design.md
// "Materialize"): under a short-lived lease (random id, expiring after
// MaterializeLeaseExpiry, deleted once the container references the
// snapshot) it reads the base manifest
// (spec.Base.ManifestDigest) and applies its layers (with spec.Base.DiffIDs)
// plus spec.Layers, in order, with rootfs.ApplyLayers on the namespace's default
// snapshotter — the daemon's applier decompresses each blob as it
// extracts it and computes its diffID, and rootfs.applyLayers removes the
// extraction snapshot instead of committing it when that is not the
// recorded diffID (the one check of the uncompressed bytes here: CheckDiff
// checked only the blob's size and digest); an existing chain snapshot is
// used as it is, having been committed under that chain id by such a
// checked apply (docs/design.md "Materialize") — then prepares the active snapshot
// spec.ID on top and creates the container spec.ID: image name
// spec.Base.Name, the runtime spec spec.Spec exactly as given (an Any of
// the runtime spec's type URL holding those bytes: containerd hands them to
// the shim as config.json) — or, when nil (a /1 ref), the spec the previous
// release made: oci.WithImageConfig of the base on the prepared snapshot
// plus oci.WithEnv(spec.Env) —, the runtime spec.Runtime.Name with its options
// as an Any of the recorded type URL and bytes (none when the ref records
// none), labels spec.Labels() (run, manifest, generation, ref, fence).
//
// A leftover snapshot spec.ID labelled with this run and no container
// (an earlier resume killed between Prepare and NewContainer) is removed
// first. On failure the prepared snapshot is removed. Errors:
// errdefs.ErrAlreadyExists for an existing container or foreign snapshot
// spec.ID; snapshot.ErrDiffCorrupt when extraction computes another diffID
// or the daemon refuses to extract a verified layer (extractionRefused);
// errdefs.ErrNotFound for missing base content.
func (r *Runtime) CreateContainer(ctx context.Context, spec host.ContainerSpec) error {
	ml, err := r.client.LeasesService().Create(ctx, leases.WithRandomID(), leases.WithExpiration(MaterializeLeaseExpiry),
		leases.WithLabel(snapshot.LabelPrefix+"temporary", "materialize"), leases.WithLabel(snapshot.LabelRun, spec.Run),
		leases.WithLabel(labelMaterializeContainer, spec.ID))
	if err != nil {
		return fmt.Errorf("create the materialization lease of run %s: %w", spec.Run, native(err))
	}
	// Not synchronous: what it protected is referenced by the container by
	// then, or (on failure) is garbage.
	defer r.client.LeasesService().Delete(context.WithoutCancel(ctx), ml)
	lctx := leases.WithLease(ctx, ml.ID)
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
	var named []string
	chain := slices.Clone(spec.Base.DiffIDs)
	for _, l := range spec.Layers {
		named = append(named, fmt.Sprintf("%s (diffID %s)", l.Digest, l.DiffID))
		chain = append(chain, l.DiffID)
	}
	applied := strings.Join(named, " + ")

	snName, err := r.defaultSnapshotter(ctx)
	if err != nil {
		return err
	}
	sn := r.client.SnapshotService(snName)
	// An existing chain snapshot is used as it is (ApplyLayers only
	// stats it): hold it under the lease first, so a garbage collection
	// between here and the container cannot take it (what ApplyLayers
	// creates joins the lease by itself; parents are held by children).
	if err := r.client.LeasesService().AddResource(ctx, ml, leases.Resource{ID: identity.ChainID(chain).String(), Type: "snapshots/" + snName}); err != nil {
		return fmt.Errorf("hold the chain snapshot of run %s under lease %s: %w", spec.Run, ml.ID, native(err))
	}
	chainID, err := rootfs.ApplyLayers(lctx, layers, sn, r.client.DiffService())
	if err != nil {
		err = native(err)
		if isWrongDiffID(err) {
			return fmt.Errorf("apply base %s + layers %s: %v: %w", spec.Base.ManifestDigest, applied, err, snapshot.ErrDiffCorrupt)
		}
		if extractionRefused(ctx, err) {
			return fmt.Errorf("apply base %s + layers %s: content corrupt: containerd refused to extract a verified layer: %v: %w", spec.Base.ManifestDigest, applied, err, snapshot.ErrDiffCorrupt)
		}
		return fmt.Errorf("apply base %s + layers %s: %w", spec.Base.ManifestDigest, applied, err)
	}
	// The run lease holds the chain snapshot from now on (extracted or
	// found), so a later generation's resume finds it (chainsnapshot.go).
	if err := r.holdChain(ctx, spec.Run, snName, chain); err != nil {
		return err
	}
	faultpoint.Reach("resume-applied") // test-only (resume.Resume lists the steps)

	labels := spec.Labels()
	_, err = sn.Prepare(lctx, spec.ID, chainID.String(), snapshots.WithLabels(labels))
	if errdefs.IsAlreadyExists(native(err)) {
		st, serr := sn.Stat(ctx, spec.ID)
		if serr == nil && st.Labels[snapshot.LabelRun] == spec.Run {
			if cs, cerr := r.ContainerState(ctx, spec.ID); cerr == nil && cs == nil {
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

	runtime := spec.Runtime.Name
	if runtime == "" {
		runtime = RuncRuntime
	}
	var options any // nil: no options, as recorded
	if o := spec.Runtime.Options; o != nil {
		options = &anypb.Any{TypeUrl: o.TypeURL, Value: bytes.Clone(o.Value)}
	}
	specOpt := withSpecBytes(spec.Spec)
	if spec.Spec == nil { // a /1 ref: as the previous release, on the prepared snapshot
		img := client.NewImageWithPlatform(r.client, images.Image{Name: spec.Base.Name, Target: mdesc}, platforms.Only(r.platform))
		specOpt = client.WithNewSpec(oci.WithImageConfig(img), oci.WithEnv(spec.Env))
	}
	_, err = r.client.NewContainer(ctx, spec.ID,
		client.WithImageName(spec.Base.Name),
		client.WithSnapshotter(snName),
		client.WithSnapshot(spec.ID),
		client.WithRuntime(runtime, options),
		client.WithContainerLabels(labels),
		specOpt,
	)
	if err != nil {
		_ = sn.Remove(context.WithoutCancel(ctx), spec.ID)
		return fmt.Errorf("create container %s: %w", spec.ID, native(err))
	}
	return nil
}

// specTypeURL is the type URL containerd gives a container's runtime
// spec (typeurl's name of specs.Spec).
var specTypeURL = sync.OnceValues(func() (string, error) { return typeurl.TypeURL(&oci.Spec{}) })

// withSpecBytes sets the container's runtime spec to exactly these JSON
// bytes, as an Any of the runtime spec's type URL: never decoded into
// specs.Spec and encoded again, which would drop the members the struct
// does not know (docs/design.md "Materialize").
func withSpecBytes(spec []byte) client.NewContainerOpts {
	return func(_ context.Context, _ *client.Client, c *containers.Container) error {
		url, err := specTypeURL()
		if err != nil {
			return fmt.Errorf("runtime spec type URL: %w", err)
		}
		c.Spec = &anypb.Any{TypeUrl: url, Value: bytes.Clone(spec)}
		return nil
	}
}

// ReadSpec implements host.Info: the blob d read from the content
// store once with snapshot.ReadBlob (size and digest checked as it
// reads).
func (r *Runtime) ReadSpec(ctx context.Context, d snapshot.Descriptor) ([]byte, error) {
	ra, err := r.client.ContentStore().ReaderAt(ctx, ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size})
	if err != nil {
		return nil, fmt.Errorf("spec %s: %w", d.Digest, native(err))
	}
	defer ra.Close()
	return snapshot.ReadBlob(ra, d)
}

// HostNamespace implements host.Info with procfs.HostPID1Namespace:
// this process runs on the daemon's host.
func (r *Runtime) HostNamespace(nsType, path string) bool {
	return procfs.HostPID1Namespace(nsType, path)
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

// hostErrorTexts are the texts of the host failures an extraction can
// meet that say nothing about the layer (a retry may pass): the daemon's
// applier reports them through gRPC as text only.
var hostErrorTexts = []string{"no space left on device", "disk quota exceeded", "too many open files", "read-only file system", "cannot allocate memory"}

// extractionRefused reports whether an error of rootfs.ApplyLayers is the
// daemon refusing to extract a layer whose blob was verified (digest, size,
// diffID) before it was applied — a tar entry its applier will not write:
// docs/design.md "Hardening": content corrupt (snapshot.ErrDiffCorrupt,
// exit 7), never an internal error (1) an orchestrator would retry
// forever. Not so: the caller's context ended, an unavailable daemon,
// absent content, an existing snapshot, and the host failures of
// hostErrorTexts.
func extractionRefused(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch {
	case errdefs.IsUnavailable(err), errdefs.IsNotFound(err), errdefs.IsAlreadyExists(err),
		errdefs.IsCanceled(err), errdefs.IsDeadlineExceeded(err), errdefs.IsResourceExhausted(err):
		return false
	}
	msg := strings.ToLower(err.Error())
	for _, t := range hostErrorTexts {
		if strings.Contains(msg, t) {
			return false
		}
	}
	return true
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

// RunContainers implements host.Containers: the containers of this
// namespace labelled io.sandbox-resume.run=run, sorted by id, with their
// labels and whether a task runs.
func (r *Runtime) RunContainers(ctx context.Context, run string) ([]host.ContainerState, error) {
	cs, err := r.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q==%s", snapshot.LabelRun, run))
	if err != nil {
		return nil, fmt.Errorf("list the containers of run %s in namespace %s: %w", run, r.namespace, native(err))
	}
	out := make([]host.ContainerState, 0, len(cs))
	for _, c := range cs {
		st, err := r.ContainerState(ctx, c.ID)
		if err != nil {
			return nil, err
		}
		if st != nil {
			out = append(out, *st)
		}
	}
	slices.SortFunc(out, func(a, b host.ContainerState) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
