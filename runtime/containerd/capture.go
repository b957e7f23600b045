package containerd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// This file implements the host roles suspend composes on *Runtime (docs/design.md "Suspend").

// leaseResourceContent is the lease resource type of a content blob
// (core/metadata/leases.go).
const leaseResourceContent = "content"

// StopTimeout bounds how long StopTask waits for a killed task to exit.
const StopTimeout = 30 * time.Second

// Container implements host.Containers: the container record
// (namespace, creation time, labels, the spec Any's value bytes exactly as
// stored, the runtime name and its options Any), the Stat of its snapshot
// (kind and parent name) and its task status. An absent container is an
// error wrapping errdefs.ErrNotFound.
func (r *Runtime) Container(ctx context.Context, id string) (snapshot.Container, error) {
	cont, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return snapshot.Container{}, fmt.Errorf("container %q in namespace %s: %w", id, r.namespace, native(err))
	}
	info, err := cont.Info(ctx)
	if err != nil {
		return snapshot.Container{}, fmt.Errorf("container %q: %w", id, native(err))
	}
	out := snapshot.Container{
		ID: id, Namespace: r.namespace, Created: info.CreatedAt.UTC(), Image: info.Image,
		Snapshotter: info.Snapshotter, SnapshotKey: info.SnapshotKey, Labels: info.Labels,
		Runtime: snapshot.Runtime{Name: info.Runtime.Name},
	}
	if info.Spec != nil {
		out.Spec = info.Spec.GetValue()
	}
	if o := info.Runtime.Options; o != nil && o.GetTypeUrl() != "" {
		out.Runtime.Options = &snapshot.RuntimeOptions{TypeURL: o.GetTypeUrl(), Value: o.GetValue()}
	}
	if info.SnapshotKey == "" {
		return snapshot.Container{}, fmt.Errorf("container %q has no snapshot: %w", id, errdefs.ErrFailedPrecondition)
	}
	st, err := r.client.SnapshotService(info.Snapshotter).Stat(ctx, info.SnapshotKey)
	if errdefs.IsNotFound(native(err)) && info.Labels[snapshot.LabelSuspending] != "" {
		// A suspend killed between committing the snapshot as its chain
		// snapshot and preparing it again (chainsnapshot.go): its rerun
		// finds the key prepared again.
		st, err = r.reprepare(ctx, info.Snapshotter, info.SnapshotKey)
	}
	if err != nil {
		return snapshot.Container{}, fmt.Errorf("container %q: snapshot %s/%s: %w", id, info.Snapshotter, info.SnapshotKey, native(err))
	}
	out.SnapshotKind, out.ParentChainID = strings.ToLower(st.Kind.String()), st.Parent
	task, err := cont.Task(ctx, nil)
	switch {
	case errdefs.IsNotFound(native(err)):
		out.Task = snapshot.TaskNone
	case err != nil:
		return snapshot.Container{}, fmt.Errorf("container %q: task: %w", id, native(err))
	default:
		s, err := task.Status(ctx)
		switch {
		case errdefs.IsNotFound(native(err)):
			// The task is being deleted (a stop interrupted mid-way): no task.
			out.Task = snapshot.TaskNone
		case err != nil:
			return snapshot.Container{}, fmt.Errorf("container %q: task status: %w", id, native(err))
		default:
			out.Task = snapshot.TaskState(s.Status)
		}
	}
	return out, nil
}

func (r *Runtime) task(ctx context.Context, id string) (client.Task, client.ProcessStatus, error) {
	cont, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return nil, "", fmt.Errorf("container %q: %w", id, native(err))
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		return nil, "", fmt.Errorf("container %q: task: %w", id, native(err))
	}
	s, err := task.Status(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("container %q: task status: %w", id, native(err))
	}
	return task, s.Status, nil
}

// PauseTask implements host.Tasks (task.Pause; a paused task
// is left as it is).
func (r *Runtime) PauseTask(ctx context.Context, id string) error {
	task, st, err := r.task(ctx, id)
	if err != nil {
		return err
	}
	if st == client.Paused {
		return nil
	}
	if err := task.Pause(ctx); err != nil {
		return fmt.Errorf("container %q: pause task: %w", id, native(err))
	}
	return nil
}

// ResumeTask implements host.Tasks (task.Resume of a paused
// or pausing task; a running one is left as it is).
func (r *Runtime) ResumeTask(ctx context.Context, id string) error {
	task, st, err := r.task(ctx, id)
	if err != nil {
		return err
	}
	if st == client.Running {
		return nil
	}
	if err := task.Resume(ctx); err != nil {
		return fmt.Errorf("container %q: resume task: %w", id, native(err))
	}
	return nil
}

// StopTask implements host.Tasks: SIGKILL to every process of
// the task, then resume it if it was paused (the signal is delivered on
// thaw, before the workload runs again), wait for the exit (StopTimeout),
// and delete the task. A container without a task is not an error.
func (r *Runtime) StopTask(ctx context.Context, id string) error {
	task, st, err := r.task(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if st != client.Stopped {
		wctx, cancel := context.WithTimeout(ctx, StopTimeout)
		defer cancel()
		exitCh, err := task.Wait(wctx)
		if err != nil {
			return fmt.Errorf("container %q: wait task: %w", id, native(err))
		}
		if err := task.Kill(ctx, syscall.SIGKILL, client.WithKillAll); err != nil && !errdefs.IsNotFound(native(err)) {
			return fmt.Errorf("container %q: kill task: %w", id, native(err))
		}
		var resumeErr error
		if st == client.Paused || st == client.Pausing {
			// runc kill --all thaws the cgroup itself; a task still
			// paused after the kill needs the resume to see its signal.
			if now, err := task.Status(ctx); err == nil && (now.Status == client.Paused || now.Status == client.Pausing) {
				resumeErr = task.Resume(ctx)
			}
		}
		select {
		case <-exitCh:
		case <-wctx.Done():
			if resumeErr != nil {
				return fmt.Errorf("container %q: task did not exit within %s of SIGKILL (resume: %v): %w", id, StopTimeout, native(resumeErr), wctx.Err())
			}
			return fmt.Errorf("container %q: task did not exit within %s of SIGKILL: %w", id, StopTimeout, wctx.Err())
		}
	}
	if _, err := task.Delete(ctx); err != nil && !errdefs.IsNotFound(native(err)) {
		return fmt.Errorf("container %q: delete task: %w", id, native(err))
	}
	return nil
}

// CreateDiff implements host.Differ. An active overlayfs snapshot this
// process can read is diffed here, in one pass (differ.go: the upper
// directory against the parent view, zstd level 1 (zstdenc_*.go), digest, diffID
// and size computed while the blob is written under the lease and checked
// by the daemon at commit). Otherwise: rootfs.CreateDiff of the
// container's snapshot against its parent through the diff service, media
// type ocispec.MediaTypeImageLayerZstd (gzip when the daemon cannot make
// zstd: containerd 1.6), under the lease; the blob is then streamed back
// and decompressed to measure its uncompressed size and check that its
// digest is the diffID the differ labelled it with. p (nil: none) gets
// the bytes of the blob while either differ writes it.
func (r *Runtime) CreateDiff(ctx context.Context, lease string, c snapshot.Container, p snapshot.Progress) (snapshot.Layer, error) {
	// Both differs write the ingest <lease>/diff: its offset is the
	// progress (generations.go).
	done := r.watchIngest(ctx, lease+"/diff", p)
	if l, ok, err := r.overlayDiff(ctx, lease, c); ok {
		done(l.Desc.Size)
		if err != nil {
			return snapshot.Layer{}, err
		}
		return snapshot.Layer{MediaType: l.Desc.MediaType, Digest: l.Desc.Digest, Size: l.Desc.Size, DiffID: l.DiffID, UncompressedSize: l.UncompressedSize}, nil
	}
	lctx := leases.WithLease(ctx, lease)
	sn := r.client.SnapshotService(c.Snapshotter)
	desc, err := rootfs.CreateDiff(lctx, c.SnapshotKey, sn, r.client.DiffService(),
		diff.WithMediaType(ocispec.MediaTypeImageLayerZstd), diff.WithReference(lease+"/diff"))
	if errdefs.IsNotImplemented(native(err)) {
		desc, err = rootfs.CreateDiff(lctx, c.SnapshotKey, sn, r.client.DiffService(),
			diff.WithMediaType(ocispec.MediaTypeImageLayerGzip), diff.WithReference(lease+"/diff"))
	}
	done(desc.Size)
	if err != nil {
		// The ingest is named by us, so containerd leaves a failed one in
		// place (24 MB measured on a full disk): abort it to free the space.
		if aerr := r.client.ContentStore().Abort(ctx, lease+"/diff"); aerr != nil && !errdefs.IsNotFound(native(aerr)) {
			err = errors.Join(err, fmt.Errorf("abort ingest %s/diff: %w", lease, native(aerr)))
		}
		return snapshot.Layer{}, fmt.Errorf("diff snapshot %s/%s: %w", c.Snapshotter, c.SnapshotKey, native(err))
	}
	if err := r.addContent(ctx, lease, desc.Digest); err != nil {
		return snapshot.Layer{}, err
	}
	cs := r.client.ContentStore()
	diffID, err := images.GetDiffID(lctx, cs, desc)
	if err != nil {
		return snapshot.Layer{}, fmt.Errorf("diff %s: diffID: %w", desc.Digest, native(err))
	}
	n, computed, err := uncompressedDigest(lctx, cs, desc)
	if err != nil {
		return snapshot.Layer{}, err
	}
	if computed != diffID {
		return snapshot.Layer{}, fmt.Errorf("diff %s: decompressed content is %s, but the differ labelled it %s: %w", desc.Digest, computed, diffID, errdefs.ErrDataLoss)
	}
	return snapshot.Layer{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, DiffID: diffID, UncompressedSize: n}, nil
}

// readBufferSize is the read-ahead, in bytes, over content store readers.
const readBufferSize = 1 << 20

// uncompressedDigest streams a layer blob through the decompressor its
// content needs and returns the uncompressed size in bytes and digest; an
// entry named like a whiteout that is not one fails wrapping
// snapshot.ErrWhiteoutName (checkWhiteoutEntries).
func uncompressedDigest(ctx context.Context, cs content.Provider, desc ocispec.Descriptor) (int64, digest.Digest, error) {
	ra, err := cs.ReaderAt(ctx, desc)
	if err != nil {
		return 0, "", fmt.Errorf("diff %s: %w", desc.Digest, native(err))
	}
	defer ra.Close()
	// Buffer the content reader: unbuffered, every small read of the
	// decompressor is one round trip to the daemon (measured: 2.4 s → 1.1 s
	// for a 160 MiB diff).
	dr, err := compression.DecompressStream(bufio.NewReaderSize(io.NewSectionReader(ra, 0, ra.Size()), readBufferSize))
	if err != nil {
		return 0, "", fmt.Errorf("diff %s: decompress: %w", desc.Digest, err)
	}
	defer dr.Close()
	h := digest.Canonical.Digester()
	var n countWriter
	// The tar entries are judged on the way (checkWhiteoutEntries: a
	// workload file named .wh.*), then the rest of the stream is hashed.
	tee := io.TeeReader(dr, io.MultiWriter(h.Hash(), &n))
	if err := checkWhiteoutEntries(tee); err != nil {
		return 0, "", fmt.Errorf("diff %s: %w", desc.Digest, err)
	}
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return 0, "", fmt.Errorf("diff %s: decompress: %w", desc.Digest, err)
	}
	return int64(n), h.Digest(), nil
}

// addContent adds blobs to a lease as content resources (idempotent).
func (r *Runtime) addContent(ctx context.Context, lease string, dgsts ...digest.Digest) error {
	ls := r.client.LeasesService()
	for _, d := range dgsts {
		if err := ls.AddResource(ctx, leases.Lease{ID: lease}, leases.Resource{ID: d.String(), Type: leaseResourceContent}); err != nil {
			return fmt.Errorf("lease %s: add content %s: %w", lease, d, native(err))
		}
	}
	return nil
}

// WriteBlob implements host.Content (content.WriteBlob under the
// lease, then the blob added to the lease explicitly, as an existing blob
// is not re-written).
func (r *Runtime) WriteBlob(ctx context.Context, lease, ref, mediaType string, data []byte) (ocispec.Descriptor, error) {
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	if err := content.WriteBlob(leases.WithLease(ctx, lease), r.client.ContentStore(), ref, bytes.NewReader(data), desc); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("write blob %s: %w", desc.Digest, native(err))
	}
	if err := r.addContent(ctx, lease, desc.Digest); err != nil {
		return ocispec.Descriptor{}, err
	}
	return desc, nil
}

// CreateLease implements host.Leases: a lease with no expiry
// (permanent until deleted). An existing id wraps errdefs.ErrAlreadyExists.
func (r *Runtime) CreateLease(ctx context.Context, id string, labels map[string]string) error {
	opts := []leases.Opt{leases.WithID(id)}
	if len(labels) > 0 {
		opts = append(opts, leases.WithLabels(labels))
	}
	if _, err := r.client.LeasesService().Create(ctx, opts...); err != nil {
		return fmt.Errorf("lease %s: %w", id, native(err))
	}
	return nil
}

// Lease implements host.Leases. An absent lease wraps
// errdefs.ErrNotFound.
func (r *Runtime) Lease(ctx context.Context, id string) (snapshot.Lease, error) {
	all, err := r.client.LeasesService().List(ctx)
	if err != nil {
		return snapshot.Lease{}, fmt.Errorf("list leases: %w", native(err))
	}
	for _, l := range all {
		if l.ID == id {
			return snapshot.Lease{ID: l.ID, Labels: l.Labels, CreatedAt: l.CreatedAt}, nil
		}
	}
	return snapshot.Lease{}, fmt.Errorf("lease %s in namespace %s: %w", id, r.namespace, errdefs.ErrNotFound)
}

// HoldBase implements host.Leases: the index (when recorded), the
// platform manifest, its config and every layer blob are added to the
// lease as content resources. A blob that is absent is an error wrapping
// errdefs.ErrNotFound.
func (r *Runtime) HoldBase(ctx context.Context, lease string, base snapshot.Base) error {
	cs := r.client.ContentStore()
	data, err := readBlob(ctx, cs, ocispec.Descriptor{Digest: base.ManifestDigest})
	if err != nil {
		return fmt.Errorf("base manifest %s: %w", base.ManifestDigest, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("base manifest %s: %w: %w", base.ManifestDigest, errdefs.ErrInvalidArgument, err)
	}
	dgsts := []digest.Digest{base.ManifestDigest, m.Config.Digest}
	if base.IndexDigest != "" {
		dgsts = append(dgsts, base.IndexDigest)
	}
	for _, l := range m.Layers {
		dgsts = append(dgsts, l.Digest)
	}
	for _, d := range dgsts {
		if _, err := cs.Info(ctx, d); err != nil {
			return fmt.Errorf("base content %s: %w", d, native(err))
		}
	}
	return r.addContent(ctx, lease, dgsts...)
}

// SetContainerLabels implements host.Containers (Container.
// SetLabels: only the given keys change).
func (r *Runtime) SetContainerLabels(ctx context.Context, id string, labels map[string]string) error {
	cont, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("container %q: %w", id, native(err))
	}
	if _, err := cont.SetLabels(ctx, labels); err != nil {
		return fmt.Errorf("container %q: set labels: %w", id, native(err))
	}
	return nil
}

// DeleteLease implements host.Leases: the lease is deleted with
// leases.SynchronousDelete, so the garbage collection it triggers has run
// when it returns. An absent lease wraps errdefs.ErrNotFound.
func (r *Runtime) DeleteLease(ctx context.Context, id string) error {
	if err := r.client.LeasesService().Delete(ctx, leases.Lease{ID: id}, leases.SynchronousDelete); err != nil {
		return fmt.Errorf("lease %s: %w", id, native(err))
	}
	return nil
}

// LeaseHolds reports whether the lease holds the blob as a content
// resource (LeasesService.ListResources).
func (r *Runtime) LeaseHolds(ctx context.Context, lease string, d digest.Digest) (bool, error) {
	rs, err := r.client.LeasesService().ListResources(ctx, leases.Lease{ID: lease})
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", lease, native(err))
	}
	for _, res := range rs {
		if res.Type == leaseResourceContent && res.ID == d.String() {
			return true, nil
		}
	}
	return false, nil
}
