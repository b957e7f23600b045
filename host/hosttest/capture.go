package hosttest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Probe lets the suite look at the store behind a host.
type Probe interface {
	// Blob returns a blob of the content store, or an error wrapping
	// errdefs.ErrNotFound.
	Blob(ctx context.Context, d digest.Digest) ([]byte, error)
	// LeaseHolds reports whether the lease holds the blob as a content
	// resource.
	LeaseHolds(ctx context.Context, lease string, d digest.Digest) (bool, error)
	// SnapshotKind returns the kind ("active", "committed", "view") of the
	// container's snapshot; an absent snapshot is an error wrapping
	// errdefs.ErrNotFound.
	SnapshotKind(ctx context.Context, c snapshot.Container) (string, error)
}

// CaptureFixture is one fresh setup of RunCapture: a host and its Probe, a container created
// from Image (a normalized reference stored in the image store, whose
// config has no labels) whose task is running and which has written files
// (among them File, an absolute path, holding exactly FileData),
// a unique prefix for lease ids, and a second stored image, LabelledImage
// (normalized), whose config carries exactly Labels (at least one).
type CaptureFixture struct {
	Host          host.Host
	Probe         Probe
	Container     string
	Image         string
	LeaseID       string // unique per fixture: "sandbox-resume.run/<something>"
	LabelledImage string
	Labels        map[string]string
	File          string
	FileData      []byte
}

// RunCapture runs the part of the suite suspend relies on — container and
// image inspection, image labels, leases, pause, diff and stop, blobs,
// labels, the flat diff, blob release and container deletion;
// newFixture is called once per subtest.
func RunCapture(t *testing.T, newFixture func(t *testing.T) CaptureFixture) {
	t.Run("ContainerAndImage", func(t *testing.T) { testContainer(t, newFixture(t)) })
	t.Run("ImageLabels", func(t *testing.T) { testImageLabels(t, newFixture(t)) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, newFixture(t)) })
	t.Run("PauseDiffStop", func(t *testing.T) { testPauseDiffStop(t, newFixture(t)) })
	t.Run("Blobs", func(t *testing.T) { testBlobs(t, newFixture(t)) })
	t.Run("Labels", func(t *testing.T) { testLabels(t, newFixture(t)) })
	t.Run("FlatDiff", func(t *testing.T) { testFlatDiff(t, newFixture(t)) })
	t.Run("ReleaseBlob", func(t *testing.T) { testReleaseBlob(t, newFixture(t)) })
	t.Run("DeleteContainer", func(t *testing.T) { testDeleteContainer(t, newFixture(t)) })
	t.Run("CommitChain", func(t *testing.T) { testCommitChain(t, newFixture(t)) })
}

// testCommitChain: the stopped container's snapshot committed as the
// chain snapshot of base + its diff (Containers.CommitChain), found with
// its labels (ChainSnapshot), the container's snapshot active on it, a
// second commit doing nothing, a wrong chain refused, and the lease
// releasing it (Leases.ReleaseChain).
func testCommitChain(t *testing.T, f CaptureFixture) {
	ctx := context.Background()
	if err := f.Host.CreateLease(ctx, f.LeaseID, nil); err != nil {
		t.Fatal(err)
	}
	base, err := f.Host.ResolveImage(ctx, f.Image)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Host.StopTask(ctx, f.Container); err != nil {
		t.Fatal(err)
	}
	c, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.Host.CreateDiff(ctx, f.LeaseID, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	chain := append(slices.Clone(base.DiffIDs), d.DiffID)
	if _, err := f.Host.ChainSnapshot(ctx, chain); !errdefs.IsNotFound(err) {
		t.Fatalf("ChainSnapshot before the commit: %v, want not found", err)
	}
	if _, err := f.Host.CommitChain(ctx, f.LeaseID, c, append(slices.Clone(chain), d.DiffID), nil); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("CommitChain on a chain that is not the snapshot's parent + 1: %v, want failed precondition", err)
	}
	labels := map[string]string{snapshot.LabelRun: "hosttest", host.LabelChainDiffIDs: d.DiffID.String()}
	if ok, err := f.Host.CommitChain(ctx, f.LeaseID, c, chain, labels); err != nil || !ok {
		t.Fatalf("CommitChain: %t, %v", ok, err)
	}
	got, err := f.Host.ChainSnapshot(ctx, chain)
	if err != nil || !maps.Equal(got, labels) {
		t.Fatalf("ChainSnapshot: %v, %v; want %v", got, err, labels)
	}
	after, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	if after.ParentChainID != identity.ChainID(chain).String() {
		t.Fatalf("after the commit the container's snapshot is on %q, want %s", after.ParentChainID, identity.ChainID(chain))
	}
	if kind, err := f.Probe.SnapshotKind(ctx, after); err != nil || kind != "active" {
		t.Fatalf("after the commit the container's snapshot is %q (err %v), want active", kind, err)
	}
	if ok, err := f.Host.CommitChain(ctx, f.LeaseID, after, chain, labels); err != nil || ok {
		t.Fatalf("second CommitChain: %t, %v; want nothing done", ok, err)
	}
	if err := f.Host.ReleaseChain(ctx, f.LeaseID, chain); err != nil {
		t.Fatal(err)
	}
	if err := f.Host.ReleaseChain(ctx, f.LeaseID, chain); err != nil {
		t.Fatalf("releasing a chain snapshot the lease does not hold: %v", err)
	}
	if err := f.Host.ReleaseChain(ctx, f.LeaseID+"-absent", chain); !errdefs.IsNotFound(err) {
		t.Fatalf("ReleaseChain of an absent lease: %v, want not found", err)
	}
	// A child (the container's snapshot) keeps it.
	if _, err := f.Host.ChainSnapshot(ctx, chain); err != nil {
		t.Fatalf("ChainSnapshot once released, with the container's snapshot on it: %v", err)
	}
}

func testContainer(t *testing.T, f CaptureFixture) {
	ctx := context.Background()
	c, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != f.Container || c.SnapshotKey == "" || c.Snapshotter == "" {
		t.Fatalf("Container = %+v", c)
	}
	if c.Task != snapshot.TaskRunning {
		t.Fatalf("task = %q, want running", c.Task)
	}
	if c.SnapshotKind != "active" {
		t.Fatalf("snapshot kind = %q, want active", c.SnapshotKind)
	}
	base, err := f.Host.ResolveImage(ctx, f.Image)
	if err != nil {
		t.Fatal(err)
	}
	if want := identity.ChainID(base.DiffIDs).String(); c.ParentChainID != want {
		t.Fatalf("parent chain %q, want ChainID(diffIDs) %q", c.ParentChainID, want)
	}
	data, err := f.Host.ContainerFile(ctx, c, f.File, 1<<20)
	if err != nil {
		t.Fatalf("ContainerFile %s: %v", f.File, err)
	}
	if !bytes.Equal(data, f.FileData) {
		t.Fatalf("ContainerFile %s = %q, want %q", f.File, data, f.FileData)
	}
	if _, err := f.Host.ContainerFile(ctx, c, f.File, int64(len(data)-1)); err == nil || errdefs.IsNotFound(err) {
		t.Fatalf("ContainerFile %s with a limit one byte short: err = %v, want a size error", f.File, err)
	}
	if _, err := f.Host.ContainerFile(ctx, c, "/etc/absent-file", 1<<20); !errdefs.IsNotFound(err) {
		t.Fatalf("ContainerFile of an absent file: err = %v, want NotFound", err)
	}
	if _, err := f.Host.Container(ctx, f.Container+"-absent"); !errdefs.IsNotFound(err) {
		t.Fatalf("absent container: err = %v, want NotFound", err)
	}
	if _, err := f.Host.ResolveImage(ctx, "docker.io/library/absent-image:0"); !errdefs.IsNotFound(err) {
		t.Fatalf("absent image: err = %v, want NotFound", err)
	}
	h, err := f.Host.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.ID == "" || h.Snapshotter == "" || h.Platform == "" {
		t.Fatalf("Host = %+v", h)
	}
}

// testImageLabels reads the labels of both images' configs through the
// digests ResolveImage reports, and the errors for absent and invalid
// digests.
func testImageLabels(t *testing.T, f CaptureFixture) {
	ctx := context.Background()
	if len(f.Labels) == 0 || f.LabelledImage == "" {
		t.Fatal("fixture: LabelledImage and Labels are required")
	}
	base, err := f.Host.ResolveImage(ctx, f.LabelledImage)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Host.ImageLabels(ctx, base.ConfigDigest)
	if err != nil || !maps.Equal(got, f.Labels) {
		t.Fatalf("ImageLabels(%s) = %q, %v; want %q", base.ConfigDigest, got, err, f.Labels)
	}
	plain, err := f.Host.ResolveImage(ctx, f.Image)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.Host.ImageLabels(ctx, plain.ConfigDigest); err != nil || len(got) != 0 {
		t.Fatalf("ImageLabels(%s, no labels) = %q, %v; want none", plain.ConfigDigest, got, err)
	}
	absent := digest.FromString("capturertest: a config that is not stored")
	_, err = f.Host.ImageLabels(ctx, absent)
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), absent.String()) {
		t.Fatalf("ImageLabels(absent): err = %v, want NotFound naming %s", err, absent)
	}
	if _, err := f.Host.ImageLabels(ctx, "sha256:nothex"); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("ImageLabels(invalid digest): err = %v, want InvalidArgument", err)
	}
}

func testLeases(t *testing.T, f CaptureFixture) {
	ctx := context.Background()
	labels := map[string]string{snapshot.LabelRun: "x"}
	if err := f.Host.CreateLease(ctx, f.LeaseID, labels); err != nil {
		t.Fatal(err)
	}
	if err := f.Host.CreateLease(ctx, f.LeaseID, labels); !errdefs.IsAlreadyExists(err) {
		t.Fatalf("second CreateLease: err = %v, want AlreadyExists", err)
	}
	l, err := f.Host.Lease(ctx, f.LeaseID)
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != f.LeaseID || l.Labels[snapshot.LabelRun] != "x" {
		t.Fatalf("Lease = %+v", l)
	}
	if _, err := f.Host.Lease(ctx, f.LeaseID+"-absent"); !errdefs.IsNotFound(err) {
		t.Fatalf("absent lease: err = %v, want NotFound", err)
	}
	base, err := f.Host.ResolveImage(ctx, f.Image)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Host.HoldBase(ctx, f.LeaseID, base); err != nil {
		t.Fatal(err)
	}
	for _, d := range []digest.Digest{base.ManifestDigest, base.ConfigDigest} {
		if ok, err := f.Probe.LeaseHolds(ctx, f.LeaseID, d); err != nil || !ok {
			t.Fatalf("lease does not hold base blob %s (err %v)", d, err)
		}
	}
}

func testPauseDiffStop(t *testing.T, f CaptureFixture) {
	ctx := context.Background()
	if err := f.Host.CreateLease(ctx, f.LeaseID, nil); err != nil {
		t.Fatal(err)
	}
	state := func(want snapshot.TaskState) {
		t.Helper()
		c, err := f.Host.Container(ctx, f.Container)
		if err != nil {
			t.Fatal(err)
		}
		if c.Task != want {
			t.Fatalf("task = %q, want %q", c.Task, want)
		}
	}
	if err := f.Host.PauseTask(ctx, f.Container); err != nil {
		t.Fatal(err)
	}
	state(snapshot.TaskPaused)
	if err := f.Host.PauseTask(ctx, f.Container); err != nil {
		t.Fatalf("pausing a paused task: %v", err)
	}
	c, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.Host.CreateDiff(ctx, f.LeaseID, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	CheckDiff(t, f.Probe, d)
	if ok, err := f.Probe.LeaseHolds(ctx, f.LeaseID, d.Digest); err != nil || !ok {
		t.Fatalf("lease does not hold the diff %s (err %v)", d.Digest, err)
	}
	if kind, err := f.Probe.SnapshotKind(ctx, c); err != nil || kind != "active" {
		t.Fatalf("after the diff the snapshot is %q (err %v), want active", kind, err)
	}
	// Deterministic: a second diff of the same paused snapshot is the same.
	d2, err := f.Host.CreateDiff(ctx, f.LeaseID, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d2 != d {
		t.Fatalf("second diff %+v differs from %+v", d2, d)
	}
	if err := f.Host.ResumeTask(ctx, f.Container); err != nil {
		t.Fatal(err)
	}
	state(snapshot.TaskRunning)
	if err := f.Host.ResumeTask(ctx, f.Container); err != nil {
		t.Fatalf("resuming a running task: %v", err)
	}
	if err := f.Host.PauseTask(ctx, f.Container); err != nil {
		t.Fatal(err)
	}
	if err := f.Host.StopTask(ctx, f.Container); err != nil {
		t.Fatalf("stopping a paused task: %v", err)
	}
	state(snapshot.TaskNone)
	if err := f.Host.StopTask(ctx, f.Container); err != nil {
		t.Fatalf("stopping a container without a task: %v", err)
	}
	if kind, err := f.Probe.SnapshotKind(ctx, c); err != nil || kind != "active" {
		t.Fatalf("after the stop the snapshot is %q (err %v), want active", kind, err)
	}
}

// CheckDiff checks a diff descriptor against the stored blob with
// snapshot.VerifyDiff (digest, size, and the zstd decompression's diffID
// and uncompressed size), after checking that the media type is
// ocispec.MediaTypeImageLayerZstd as suspend writes it.
func CheckDiff(t testing.TB, p Probe, d snapshot.Layer) {
	t.Helper()
	if d.MediaType != ocispec.MediaTypeImageLayerZstd {
		t.Fatalf("diff media type %q, want %q", d.MediaType, ocispec.MediaTypeImageLayerZstd)
	}
	blob, err := p.Blob(context.Background(), d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.VerifyDiff(bytes.NewReader(blob), d); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(blob, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Fatalf("diff blob %s is not zstd (magic %x)", d.Digest, blob[:min(4, len(blob))])
	}
}

func testBlobs(t *testing.T, f CaptureFixture) {
	ctx := context.Background()
	if err := f.Host.CreateLease(ctx, f.LeaseID, nil); err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"blob":"` + f.LeaseID + `"}`)
	desc, err := f.Host.WriteBlob(ctx, f.LeaseID, f.LeaseID+"/ref", snapshot.MediaTypeRef, data)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest != digest.FromBytes(data) || desc.Size != int64(len(data)) || desc.MediaType != snapshot.MediaTypeRef {
		t.Fatalf("WriteBlob = %+v", desc)
	}
	got, err := f.Probe.Blob(ctx, desc.Digest)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored blob %q (err %v), want %q", got, err, data)
	}
	if _, err := f.Host.WriteBlob(ctx, f.LeaseID, f.LeaseID+"/ref", snapshot.MediaTypeRef, data); err != nil {
		t.Fatalf("writing an existing blob: %v", err)
	}
	if got, err := f.Host.ReadBlob(ctx, desc.Digest); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadBlob = %q (err %v), want %q", got, err, data)
	}
	if _, err := f.Host.ReadBlob(ctx, digest.FromString("absent "+f.LeaseID)); !errdefs.IsNotFound(err) {
		t.Fatalf("ReadBlob(absent): err = %v, want NotFound", err)
	}
	if ok, err := f.Probe.LeaseHolds(ctx, f.LeaseID, desc.Digest); err != nil || !ok {
		t.Fatalf("lease does not hold %s (err %v)", desc.Digest, err)
	}
}

func testLabels(t *testing.T, f CaptureFixture) {
	ctx := context.Background()
	before, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Host.SetContainerLabels(ctx, f.Container, map[string]string{snapshot.LabelRun: "r1"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Host.SetContainerLabels(ctx, f.Container, map[string]string{snapshot.LabelManifest: "m"}); err != nil {
		t.Fatal(err)
	}
	after, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	if after.Labels[snapshot.LabelRun] != "r1" || after.Labels[snapshot.LabelManifest] != "m" {
		t.Fatalf("labels = %v", after.Labels)
	}
	for k, v := range before.Labels {
		if after.Labels[k] != v {
			t.Fatalf("label %s changed from %q to %q", k, v, after.Labels[k])
		}
	}
	// A label set to "" is removed; the others stay.
	if err := f.Host.SetContainerLabels(ctx, f.Container, map[string]string{snapshot.LabelRun: ""}); err != nil {
		t.Fatal(err)
	}
	after, err = f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after.Labels[snapshot.LabelRun]; ok || after.Labels[snapshot.LabelManifest] != "m" {
		t.Fatalf("after removing %s: labels = %v", snapshot.LabelRun, after.Labels)
	}
}

// Entry is one entry of a layer's tar as LayerEntries reads it: its type
// flag, mode bits, link target and the sha256 of its content.
type Entry struct {
	Type     byte
	Mode     int64
	Linkname string
	Content  digest.Digest
}

// LayerEntries reads a stored zstd or gzip layer through the Probe and
// returns its tar entries by name (a leading "./" and a trailing "/"
// removed), after checking the blob with snapshot.VerifyDiff.
func LayerEntries(t testing.TB, p Probe, l snapshot.Layer) map[string]Entry {
	t.Helper()
	blob, err := p.Blob(context.Background(), l.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.VerifyDiff(bytes.NewReader(blob), l); err != nil {
		t.Fatal(err)
	}
	var r io.Reader
	if bytes.HasPrefix(blob, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(blob))
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	} else {
		zr, err := zstd.NewReader(bytes.NewReader(blob))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	out := map[string]Entry{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		h := digest.SHA256.Digester()
		if _, err := io.Copy(h.Hash(), tr); err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
		out[name] = Entry{Type: hdr.Typeflag, Mode: hdr.Mode & 0o7777, Linkname: hdr.Linkname, Content: h.Digest()}
	}
}

// testFlatDiff: the diff of a runtime container's snapshot against its
// image's chain (FlatDiffer) holds the same entries as its diff against
// its parent, which is that chain; an absent chain is NotFound.
func testFlatDiff(t *testing.T, f CaptureFixture) {
	ctx := context.Background()
	if err := f.Host.CreateLease(ctx, f.LeaseID, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Host.PauseTask(ctx, f.Container); err != nil {
		t.Fatal(err)
	}
	c, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	base, err := f.Host.ResolveImage(ctx, f.Image)
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.Host.CreateDiff(ctx, f.LeaseID, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	flat, err := f.Host.CreateFlatDiff(ctx, f.LeaseID, c, base.DiffIDs, nil)
	if err != nil {
		t.Fatal(err)
	}
	CheckDiff(t, f.Probe, flat)
	if ok, err := f.Probe.LeaseHolds(ctx, f.LeaseID, flat.Digest); err != nil || !ok {
		t.Fatalf("lease does not hold the flattened diff %s (err %v)", flat.Digest, err)
	}
	got, want := LayerEntries(t, f.Probe, flat), LayerEntries(t, f.Probe, d)
	if len(got) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("flattened diff entries %v, the diff's %v", got, want)
	}
	if kind, err := f.Probe.SnapshotKind(ctx, c); err != nil || kind != "active" {
		t.Fatalf("after the flattened diff the snapshot is %q (err %v), want active", kind, err)
	}
	absent := append(slices.Clone(base.DiffIDs), digest.FromString("absent layer "+f.LeaseID))
	if _, err := f.Host.CreateFlatDiff(ctx, f.LeaseID, c, absent, nil); !errdefs.IsNotFound(err) {
		t.Fatalf("flattening against an absent chain: err = %v, want NotFound", err)
	}
	if err := f.Host.ResumeTask(ctx, f.Container); err != nil {
		t.Fatal(err)
	}
}

// testReleaseBlob: a released blob is no longer held by the lease;
// releasing it again, or a blob the lease never held, is no error; an
// absent lease is NotFound.
func testReleaseBlob(t *testing.T, f CaptureFixture) {
	ctx := context.Background()
	if err := f.Host.CreateLease(ctx, f.LeaseID, nil); err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"release":"` + f.LeaseID + `"}`)
	desc, err := f.Host.WriteBlob(ctx, f.LeaseID, f.LeaseID+"/release", snapshot.MediaTypeRef, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Host.ReleaseBlob(ctx, f.LeaseID, desc.Digest); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Probe.LeaseHolds(ctx, f.LeaseID, desc.Digest); err != nil || ok {
		t.Fatalf("lease still holds %s (err %v)", desc.Digest, err)
	}
	if err := f.Host.ReleaseBlob(ctx, f.LeaseID, desc.Digest); err != nil {
		t.Fatalf("releasing a released blob: %v", err)
	}
	if err := f.Host.ReleaseBlob(ctx, f.LeaseID+"-absent", desc.Digest); !errdefs.IsNotFound(err) {
		t.Fatalf("releasing from an absent lease: err = %v, want NotFound", err)
	}
}

// testDeleteContainer: the container and its snapshot are gone; deleting
// it again is no error.
func testDeleteContainer(t *testing.T, f CaptureFixture) {
	ctx := context.Background()
	c, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Host.DeleteContainer(ctx, f.Container); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Host.Container(ctx, f.Container); !errdefs.IsNotFound(err) {
		t.Fatalf("deleted container: err = %v, want NotFound", err)
	}
	if _, err := f.Probe.SnapshotKind(ctx, c); !errdefs.IsNotFound(err) {
		t.Fatalf("the deleted container's snapshot: err = %v, want NotFound", err)
	}
	if err := f.Host.DeleteContainer(ctx, f.Container); err != nil {
		t.Fatalf("deleting an absent container: %v", err)
	}
}
