// Package fake is an in-memory snapshot.Capturer for tests: containers with
// files and a task, images, a content store, leases and labels, with no
// daemon. It runs the same conformance suite (snapshot/capturertest) as the
// containerd implementation.
//
// The diff it creates is a real OCI layer: a tar of the container's files
// that differ from its snapshot's parent (sorted by path, fixed metadata, so
// it is deterministic; a file of the parent that is gone is an AUFS
// whiteout), compressed with zstd. Tree applies such layers back into
// files, so tests can follow a run through its generations. Hook lets
// tests fail any operation to simulate a crash there.
package fake

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Operation names passed to Hook, one per Capturer method.
const (
	OpContainer    = "Container"
	OpHost         = "Host"
	OpResolveImage = "ResolveImage"
	OpImageLabels  = "ImageLabels"
	OpPauseTask    = "PauseTask"
	OpResumeTask   = "ResumeTask"
	OpStopTask     = "StopTask"
	OpCreateDiff   = "CreateDiff"
	OpReadBlob     = "ReadBlob"
	OpWriteBlob    = "WriteBlob"
	OpCreateLease  = "CreateLease"
	OpLease        = "Lease"
	OpHoldBase     = "HoldBase"
	OpSetLabels    = "SetContainerLabels"
	// The operations of later generations (snapshot/generations.go).
	OpCreateFlatDiff  = "CreateFlatDiff"
	OpReleaseBlob     = "ReleaseBlob"
	OpDeleteContainer = "DeleteContainer"
)

// Image is an image in the fake's image store: Base as ResolveImage returns
// it, the digests of its layer blobs (Layers), which HoldBase leases, and
// its config's labels (Labels), which ImageLabels returns for
// Base.ConfigDigest.
type Image struct {
	Base   snapshot.Base
	Layers []digest.Digest
	Labels map[string]string
}

// Namespace is the containerd namespace the fake reports for every
// container.
const Namespace = "sandbox-resume"

// Container is a container in the fake: its files (path → content, above
// the image, which has none: what the container sees), image, labels, task
// state, creation time, OCI runtime spec bytes and runtime. AddContainer
// fills what is left empty: Created a fixed time (2026-11-30T16:00:00Z),
// Spec DefaultSpec(ID), Runtime io.containerd.runc.v2 without options.
//
// A container created from the image alone (a runtime's container) has no
// Layers: its snapshot's parent is the image's chain, and its diff holds
// every file. An incarnation's snapshot was built from the image plus the
// layers of the generation it resumed: Layers are their diffIDs (its
// parent is identity.ChainID of the image's diffIDs followed by them) and
// Lower the files they give (Tree); its diff holds what differs from
// Lower, deletions as whiteouts.
type Container struct {
	ID      string
	Image   string
	Files   map[string][]byte
	Labels  map[string]string
	Task    snapshot.TaskState
	Created time.Time
	Spec    []byte
	Runtime snapshot.Runtime
	Layers  []digest.Digest
	Lower   map[string][]byte
}

// DefaultSpec returns the runtime spec AddContainer gives a container that
// has none: a small OCI runtime spec whose hostname is id.
func DefaultSpec(id string) []byte {
	return fmt.Appendf(nil, `{"ociVersion":"1.2.0","process":{"args":["/bin/sh"],"cwd":"/","env":["PATH=/usr/bin:/bin"],"user":{"uid":0,"gid":0}},"root":{"path":"rootfs"},"hostname":%q,"mounts":[{"destination":"/proc","type":"proc","source":"proc"}],"linux":{"namespaces":[{"type":"pid"},{"type":"mount"}]}}`, id)
}

type lease struct {
	l         snapshot.Lease
	resources map[digest.Digest]bool
}

// Capturer is the in-memory snapshot.Capturer. The zero value is not
// usable; call New. It is safe for concurrent use.
type Capturer struct {
	// Hook, when set, is called before every operation with its name (the
	// Op constants); a non-nil error fails the operation before it has any
	// effect, as a crash there would.
	Hook func(op string) error

	mu         sync.Mutex
	host       snapshot.Host
	images     map[string]Image // by normalized name
	containers map[string]*Container
	blobs      map[digest.Digest][]byte
	leases     map[string]*lease
	ops        []string
}

// New returns an empty fake for host.
func New(host snapshot.Host) *Capturer {
	return &Capturer{
		host:       host,
		images:     map[string]Image{},
		containers: map[string]*Container{},
		blobs:      map[digest.Digest][]byte{},
		leases:     map[string]*lease{},
	}
}

// AddImage stores an image under its Base.Name, and its manifest, config
// and layer blobs as placeholder content.
func (f *Capturer) AddImage(img Image) {
	f.mu.Lock()
	defer f.mu.Unlock()
	img.Labels = maps.Clone(img.Labels)
	f.images[img.Base.Name] = img
	for _, d := range append([]digest.Digest{img.Base.IndexDigest, img.Base.ManifestDigest, img.Base.ConfigDigest}, img.Layers...) {
		if d != "" {
			f.blobs[d] = []byte("placeholder for " + d.String())
		}
	}
}

// AddContainer stores a container; its snapshot's parent is the chain of
// its image.
func (f *Capturer) AddContainer(c Container) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cc := c
	cc.Files = maps.Clone(c.Files)
	cc.Labels = maps.Clone(c.Labels)
	cc.Layers = slices.Clone(c.Layers)
	cc.Lower = maps.Clone(c.Lower)
	if cc.Created.IsZero() {
		cc.Created = time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)
	}
	if cc.Spec == nil {
		cc.Spec = DefaultSpec(c.ID)
	}
	cc.Spec = slices.Clone(cc.Spec)
	if cc.Runtime.Name == "" {
		cc.Runtime.Name = "io.containerd.runc.v2"
	}
	f.containers[c.ID] = &cc
}

// Ops returns the operations performed so far, in order.
func (f *Capturer) Ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ops)
}

// Blob returns a stored blob, or an error wrapping errdefs.ErrNotFound.
func (f *Capturer) Blob(_ context.Context, d digest.Digest) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blobs[d]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", d, errdefs.ErrNotFound)
	}
	return slices.Clone(b), nil
}

// LeaseHolds reports whether the lease holds the blob.
func (f *Capturer) LeaseHolds(_ context.Context, id string, d digest.Digest) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leases[id]
	if !ok {
		return false, fmt.Errorf("lease %s: %w", id, errdefs.ErrNotFound)
	}
	return l.resources[d], nil
}

// SnapshotKind returns "active" (the fake never commits a container's
// snapshot), or an error wrapping errdefs.ErrNotFound once the container
// was deleted.
func (f *Capturer) SnapshotKind(_ context.Context, c snapshot.Container) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.container(c.ID); err != nil {
		return "", fmt.Errorf("snapshot %s: %w", c.SnapshotKey, err)
	}
	return c.SnapshotKind, nil
}

// DeleteLease deletes a lease and (as a synchronous GC would) every blob no
// other lease or image holds.
func (f *Capturer) DeleteLease(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.leases[id]; !ok {
		return fmt.Errorf("lease %s: %w", id, errdefs.ErrNotFound)
	}
	delete(f.leases, id)
	f.gc()
	return nil
}

func (f *Capturer) gc() {
	keep := map[digest.Digest]bool{}
	for _, img := range f.images {
		for _, d := range append([]digest.Digest{img.Base.IndexDigest, img.Base.ManifestDigest, img.Base.ConfigDigest}, img.Layers...) {
			keep[d] = true
		}
	}
	for _, l := range f.leases {
		for d := range l.resources {
			keep[d] = true
		}
	}
	for d := range f.blobs {
		if !keep[d] {
			delete(f.blobs, d)
		}
	}
}

func (f *Capturer) enter(op string) error {
	if f.Hook != nil {
		if err := f.Hook(op); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.ops = append(f.ops, op)
	return nil
}

func (f *Capturer) container(id string) (*Container, error) {
	c, ok := f.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %q: %w", id, errdefs.ErrNotFound)
	}
	return c, nil
}

// Container implements snapshot.ContainerInspector.
func (f *Capturer) Container(_ context.Context, id string) (snapshot.Container, error) {
	if err := f.enter(OpContainer); err != nil {
		return snapshot.Container{}, err
	}
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return snapshot.Container{}, err
	}
	parent := ""
	var chain []digest.Digest
	if img, ok := f.images[c.Image]; ok {
		chain = slices.Clone(img.Base.DiffIDs)
	}
	if chain = append(chain, c.Layers...); len(chain) > 0 {
		parent = identity.ChainID(chain).String()
	}
	rt := c.Runtime
	if rt.Options != nil {
		o := *rt.Options
		o.Value = slices.Clone(o.Value)
		rt.Options = &o
	}
	return snapshot.Container{
		ID: c.ID, Namespace: Namespace, Created: c.Created, Image: c.Image, Snapshotter: f.host.Snapshotter, SnapshotKey: c.ID,
		SnapshotKind: "active", ParentChainID: parent, Labels: maps.Clone(c.Labels), Task: c.Task,
		Spec: slices.Clone(c.Spec), Runtime: rt,
	}, nil
}

// Host implements snapshot.HostInspector.
func (f *Capturer) Host(context.Context) (snapshot.Host, error) {
	if err := f.enter(OpHost); err != nil {
		return snapshot.Host{}, err
	}
	defer f.mu.Unlock()
	return f.host, nil
}

// ResolveImage implements snapshot.ImageResolver: by normalized name, or by
// the digest a reference carries (an index or manifest digest of a stored
// image).
func (f *Capturer) ResolveImage(_ context.Context, ref string) (snapshot.Base, error) {
	if err := f.enter(OpResolveImage); err != nil {
		return snapshot.Base{}, err
	}
	defer f.mu.Unlock()
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return snapshot.Base{}, fmt.Errorf("image reference %q: %w: %w", ref, errdefs.ErrInvalidArgument, err)
	}
	if d, ok := named.(reference.Digested); ok {
		for _, img := range f.images {
			if img.Base.IndexDigest == d.Digest() || img.Base.ManifestDigest == d.Digest() {
				b := img.Base
				b.Name = named.String()
				return b, nil
			}
		}
		return snapshot.Base{}, fmt.Errorf("image %q: blob %s: %w", ref, d.Digest(), errdefs.ErrNotFound)
	}
	img, ok := f.images[named.String()]
	if !ok {
		return snapshot.Base{}, fmt.Errorf("image %q: %w", named.String(), errdefs.ErrNotFound)
	}
	return img.Base, nil
}

// ImageLabels implements snapshot.ImageConfigReader: the Labels of the
// stored image whose Base.ConfigDigest is config. errdefs.ErrNotFound when
// the config blob is absent; errdefs.ErrInvalidArgument for an invalid
// digest or a blob that is no stored image's config.
func (f *Capturer) ImageLabels(_ context.Context, config digest.Digest) (map[string]string, error) {
	if err := f.enter(OpImageLabels); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("image config digest %q: %w: %w", config, errdefs.ErrInvalidArgument, err)
	}
	if _, ok := f.blobs[config]; !ok {
		return nil, fmt.Errorf("image config: blob %s: %w", config, errdefs.ErrNotFound)
	}
	for _, img := range f.images {
		if img.Base.ConfigDigest == config {
			return maps.Clone(img.Labels), nil
		}
	}
	return nil, fmt.Errorf("image config %s: not a JSON image config: %w", config, errdefs.ErrInvalidArgument)
}

// PauseTask implements snapshot.TaskController.
func (f *Capturer) PauseTask(_ context.Context, id string) error {
	if err := f.enter(OpPauseTask); err != nil {
		return err
	}
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return err
	}
	switch c.Task {
	case snapshot.TaskRunning, snapshot.TaskPausing, snapshot.TaskPaused:
		c.Task = snapshot.TaskPaused
		return nil
	}
	return fmt.Errorf("pause task of %q: task is %q: %w", id, c.Task, errdefs.ErrFailedPrecondition)
}

// ResumeTask implements snapshot.TaskController.
func (f *Capturer) ResumeTask(_ context.Context, id string) error {
	if err := f.enter(OpResumeTask); err != nil {
		return err
	}
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return err
	}
	switch c.Task {
	case snapshot.TaskRunning, snapshot.TaskPaused, snapshot.TaskPausing:
		c.Task = snapshot.TaskRunning
		return nil
	}
	return fmt.Errorf("resume task of %q: task is %q: %w", id, c.Task, errdefs.ErrFailedPrecondition)
}

// StopTask implements snapshot.TaskController.
func (f *Capturer) StopTask(_ context.Context, id string) error {
	if err := f.enter(OpStopTask); err != nil {
		return err
	}
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return err
	}
	c.Task = snapshot.TaskNone
	return nil
}

// CreateDiff implements snapshot.Differ: a zstd tar of the container's
// files that differ from Lower (all of them for a container without
// Layers), and a whiteout for each file of Lower that is gone, stored under
// the lease. A snapshot.Progress in ctx gets phase-less Adds of the blob's
// size.
func (f *Capturer) CreateDiff(ctx context.Context, leaseID string, sc snapshot.Container) (snapshot.Layer, error) {
	if err := f.enter(OpCreateDiff); err != nil {
		return snapshot.Layer{}, err
	}
	defer f.mu.Unlock()
	c, err := f.container(sc.ID)
	if err != nil {
		return snapshot.Layer{}, err
	}
	return f.storeDiff(ctx, leaseID, c.Lower, c.Files)
}

// CreateFlatDiff implements snapshot.FlatDiffer: every file of the
// container (the image has none), stored under the lease. base must be the
// diffIDs of a stored image (the only chains the fake has), else the error
// wraps errdefs.ErrNotFound.
func (f *Capturer) CreateFlatDiff(ctx context.Context, leaseID string, sc snapshot.Container, base []digest.Digest) (snapshot.Layer, error) {
	if err := f.enter(OpCreateFlatDiff); err != nil {
		return snapshot.Layer{}, err
	}
	defer f.mu.Unlock()
	c, err := f.container(sc.ID)
	if err != nil {
		return snapshot.Layer{}, err
	}
	found := false
	for _, img := range f.images {
		found = found || slices.Equal(img.Base.DiffIDs, base)
	}
	if !found || len(base) == 0 {
		chain := ""
		if len(base) > 0 {
			chain = identity.ChainID(base).String()
		}
		return snapshot.Layer{}, fmt.Errorf("chain snapshot %q: %w", chain, errdefs.ErrNotFound)
	}
	return f.storeDiff(ctx, leaseID, nil, c.Files)
}

// whiteoutPrefix marks a deleted file in an OCI layer (AUFS whiteout).
const whiteoutPrefix = ".wh."

// storeDiff stores the layer that turns lower into files under the lease.
// f.mu is held.
func (f *Capturer) storeDiff(ctx context.Context, leaseID string, lower, files map[string][]byte) (snapshot.Layer, error) {
	l, ok := f.leases[leaseID]
	if !ok {
		return snapshot.Layer{}, fmt.Errorf("lease %s: %w", leaseID, errdefs.ErrNotFound)
	}
	entries := map[string][]byte{} // tar name → content; nil content: a whiteout
	for p, data := range files {
		if old, ok := lower[p]; !ok || !bytes.Equal(old, data) {
			entries[p] = data
		}
	}
	for p := range lower {
		if _, ok := files[p]; !ok {
			dir, base := path.Split(p)
			entries[dir+whiteoutPrefix+base] = nil
		}
	}
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, p := range slices.Sorted(maps.Keys(entries)) {
		hdr := &tar.Header{Name: p, Mode: 0o644, Size: int64(len(entries[p])), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return snapshot.Layer{}, err
		}
		if _, err := tw.Write(entries[p]); err != nil {
			return snapshot.Layer{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return snapshot.Layer{}, err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return snapshot.Layer{}, err
	}
	blob := enc.EncodeAll(raw.Bytes(), nil)
	if p := snapshot.ProgressFrom(ctx); p != nil {
		p.Add(int64(len(blob)))
	}
	d := digest.FromBytes(blob)
	f.blobs[d] = blob
	l.resources[d] = true
	return snapshot.Layer{
		MediaType: ocispec.MediaTypeImageLayerZstd, Digest: d, Size: int64(len(blob)),
		DiffID: digest.FromBytes(raw.Bytes()), UncompressedSize: int64(raw.Len()),
	}, nil
}

// Tree applies layers (stored blobs of zstd tars as CreateDiff writes
// them, oldest first) over an empty tree and returns the files they give:
// path → content, whiteouts applied. It checks each blob against its layer
// with snapshot.VerifyDiff; an absent blob wraps errdefs.ErrNotFound.
func (f *Capturer) Tree(layers []snapshot.Layer) (map[string][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	files := map[string][]byte{}
	for _, l := range layers {
		blob, ok := f.blobs[l.Digest]
		if !ok {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, errdefs.ErrNotFound)
		}
		if err := snapshot.VerifyDiff(bytes.NewReader(blob), l); err != nil {
			return nil, err
		}
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		raw, err := dec.DecodeAll(blob, nil)
		dec.Close()
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
			}
			dir, base := path.Split(hdr.Name)
			if gone, ok := strings.CutPrefix(base, whiteoutPrefix); ok {
				delete(files, dir+gone)
				continue
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
			}
			files[hdr.Name] = data
		}
	}
	return files, nil
}

// Files returns a copy of the files of container id; an absent container
// is an error wrapping errdefs.ErrNotFound.
func (f *Capturer) Files(id string) (map[string][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return nil, err
	}
	return maps.Clone(c.Files), nil
}

// EditFiles lets edit change the files of container id (the workload
// writing, changing and deleting files between suspends).
func (f *Capturer) EditFiles(id string, edit func(files map[string][]byte)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return err
	}
	if c.Files == nil {
		c.Files = map[string][]byte{}
	}
	edit(c.Files)
	return nil
}

// ReadBlob implements snapshot.BlobReader.
func (f *Capturer) ReadBlob(_ context.Context, d digest.Digest) ([]byte, error) {
	if err := f.enter(OpReadBlob); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	b, ok := f.blobs[d]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", d, errdefs.ErrNotFound)
	}
	if len(b) > snapshot.MaxBlobRead {
		return nil, fmt.Errorf("blob %s: %d bytes, more than %d: %w", d, len(b), snapshot.MaxBlobRead, errdefs.ErrInvalidArgument)
	}
	if got := digest.FromBytes(b); got != d {
		return nil, fmt.Errorf("blob %s: the store holds bytes with digest %s: %w", d, got, errdefs.ErrDataLoss)
	}
	return slices.Clone(b), nil
}

// CorruptBlob replaces the stored bytes of blob d (a test's way to damage
// content; ReadBlob then reports errdefs.ErrDataLoss).
func (f *Capturer) CorruptBlob(d digest.Digest, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blobs[d] = slices.Clone(data)
}

// DeleteBlob removes blob d from the content store, whatever holds it.
func (f *Capturer) DeleteBlob(d digest.Digest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.blobs, d)
}

// WriteBlob implements snapshot.BlobWriter.
func (f *Capturer) WriteBlob(_ context.Context, leaseID, _, mediaType string, data []byte) (ocispec.Descriptor, error) {
	if err := f.enter(OpWriteBlob); err != nil {
		return ocispec.Descriptor{}, err
	}
	defer f.mu.Unlock()
	l, ok := f.leases[leaseID]
	if !ok {
		return ocispec.Descriptor{}, fmt.Errorf("lease %s: %w", leaseID, errdefs.ErrNotFound)
	}
	d := digest.FromBytes(data)
	f.blobs[d] = slices.Clone(data)
	l.resources[d] = true
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}, nil
}

// CreateLease implements snapshot.LeaseHolder.
func (f *Capturer) CreateLease(_ context.Context, id string, labels map[string]string) error {
	if err := f.enter(OpCreateLease); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if _, ok := f.leases[id]; ok {
		return fmt.Errorf("lease %q: %w", id, errdefs.ErrAlreadyExists)
	}
	f.leases[id] = &lease{
		l:         snapshot.Lease{ID: id, Labels: maps.Clone(labels), CreatedAt: time.Now().UTC()},
		resources: map[digest.Digest]bool{},
	}
	return nil
}

// Lease implements snapshot.LeaseHolder.
func (f *Capturer) Lease(_ context.Context, id string) (snapshot.Lease, error) {
	if err := f.enter(OpLease); err != nil {
		return snapshot.Lease{}, err
	}
	defer f.mu.Unlock()
	l, ok := f.leases[id]
	if !ok {
		return snapshot.Lease{}, fmt.Errorf("lease %q: %w", id, errdefs.ErrNotFound)
	}
	out := l.l
	out.Labels = maps.Clone(out.Labels)
	return out, nil
}

// HoldBase implements snapshot.LeaseHolder.
func (f *Capturer) HoldBase(_ context.Context, leaseID string, base snapshot.Base) error {
	if err := f.enter(OpHoldBase); err != nil {
		return err
	}
	defer f.mu.Unlock()
	l, ok := f.leases[leaseID]
	if !ok {
		return fmt.Errorf("lease %s: %w", leaseID, errdefs.ErrNotFound)
	}
	var layers []digest.Digest
	for _, img := range f.images {
		if img.Base.ManifestDigest == base.ManifestDigest {
			layers = img.Layers
		}
	}
	for _, d := range append([]digest.Digest{base.IndexDigest, base.ManifestDigest, base.ConfigDigest}, layers...) {
		if d == "" {
			continue
		}
		if _, ok := f.blobs[d]; !ok {
			return fmt.Errorf("base content %s: %w", d, errdefs.ErrNotFound)
		}
		l.resources[d] = true
	}
	return nil
}

// ReleaseBlob implements snapshot.BlobReleaser (the blob stays in the
// store until a GC finds nothing holding it).
func (f *Capturer) ReleaseBlob(_ context.Context, leaseID string, d digest.Digest) error {
	if err := f.enter(OpReleaseBlob); err != nil {
		return err
	}
	defer f.mu.Unlock()
	l, ok := f.leases[leaseID]
	if !ok {
		return fmt.Errorf("lease %s: %w", leaseID, errdefs.ErrNotFound)
	}
	delete(l.resources, d)
	return nil
}

// DeleteContainer implements snapshot.ContainerDeleter: the container, its
// task and its files are gone.
func (f *Capturer) DeleteContainer(_ context.Context, id string) error {
	if err := f.enter(OpDeleteContainer); err != nil {
		return err
	}
	defer f.mu.Unlock()
	delete(f.containers, id)
	return nil
}

// GC removes every blob that no lease or image holds, as containerd's
// garbage collection would.
func (f *Capturer) GC() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gc()
}

// SetContainerLabels implements snapshot.ContainerLabeler.
func (f *Capturer) SetContainerLabels(_ context.Context, id string, labels map[string]string) error {
	if err := f.enter(OpSetLabels); err != nil {
		return err
	}
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return err
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	for k, v := range labels {
		if v == "" {
			delete(c.Labels, k)
		} else {
			c.Labels[k] = v
		}
	}
	return nil
}

// DeleteImage removes an image record (its content stays until a GC finds
// nothing holding it) and runs the GC.
func (f *Capturer) DeleteImage(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.images, name)
	f.gc()
}

var _ snapshot.Capturer = (*Capturer)(nil)
