package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
)

// nsContext returns a context in namespace ns (the daemon's Namespace when
// empty) with a 30 s deadline.
func (d *Daemon) nsContext(t testing.TB, ns string) context.Context {
	if ns == "" {
		ns = d.Namespace
	}
	d.mu.Lock()
	d.namespaces[ns] = true
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// lease returns the id of the harness lease in namespace ns (created on first
// use, expiring after an hour). Blobs the harness writes are held by it, so
// blobs no image names (an unnamed index, a placeholder) survive garbage
// collection while the daemon lives.
func (d *Daemon) lease(t testing.TB, ctx context.Context, ns string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id, ok := d.leases[ns]; ok {
		return id
	}
	l, err := d.Client.LeasesService().Create(ctx, leases.WithRandomID(), leases.WithExpiration(time.Hour),
		leases.WithLabel("io.sandbox-resume.test", d.Name))
	if err != nil {
		t.Fatalf("harness: daemon %s: create lease in %s: %v", d.Name, ns, err)
	}
	d.leases[ns] = l.ID
	return l.ID
}

// gcLabels returns the containerd.io/gc.ref.content.* labels by which a blob
// references children, numbered as images.SetChildrenLabels numbers them.
func gcLabels(children []ocispec.Descriptor) map[string]string {
	labels := map[string]string{}
	keys := map[string]int{}
	for _, ch := range children {
		for _, key := range images.ChildGCLabels(ch) {
			i := keys[key]
			keys[key]++
			if i > 0 || key[len(key)-1] == '.' {
				key = fmt.Sprintf("%s%d", key, i)
			}
			labels[key] = ch.Digest.String()
		}
	}
	return labels
}

// Put writes every blob of im into the content store of namespace ns (the
// daemon's Namespace when empty) under the harness lease, each with the GC
// labels that reference its children (set with Update as well, since
// WriteBlob ignores labels for a blob that exists).
func (d *Daemon) Put(t testing.TB, ns string, im *testimage.Image) {
	t.Helper()
	ctx := d.nsContext(t, ns)
	ctx = leases.WithLease(ctx, d.lease(t, ctx, ns))
	cs := d.Client.ContentStore()
	for _, b := range im.Blobs {
		labels := gcLabels(b.Children)
		err := content.WriteBlob(ctx, cs, "sr-test-"+b.Desc.Digest.Encoded(), bytes.NewReader(b.Data), b.Desc, content.WithLabels(labels))
		if err != nil {
			t.Fatalf("harness: daemon %s: write blob %s: %v", d.Name, b.Desc.Digest, err)
		}
		if len(labels) > 0 {
			var fields []string
			for k := range labels {
				fields = append(fields, "labels."+k)
			}
			if _, err := cs.Update(ctx, content.Info{Digest: b.Desc.Digest, Labels: labels}, fields...); err != nil {
				t.Fatalf("harness: daemon %s: label blob %s: %v", d.Name, b.Desc.Digest, err)
			}
		}
	}
}

// Tag creates or re-points the image name in namespace ns (the daemon's
// Namespace when empty) at target. name is stored verbatim: pass a
// normalized name ("docker.io/library/busybox:1").
func (d *Daemon) Tag(t testing.TB, ns, name string, target ocispec.Descriptor) {
	t.Helper()
	ctx := d.nsContext(t, ns)
	is := d.Client.ImageService()
	img := images.Image{Name: name, Target: target}
	if _, err := is.Create(ctx, img); errdefs.IsAlreadyExists(err) {
		_, err = is.Update(ctx, img, "target")
		if err != nil {
			t.Fatalf("harness: daemon %s: re-point image %s: %v", d.Name, name, err)
		}
	} else if err != nil {
		t.Fatalf("harness: daemon %s: create image %s: %v", d.Name, name, err)
	}
}

// DeleteBlob removes blob dg from the content store of namespace ns.
func (d *Daemon) DeleteBlob(t testing.TB, ns string, dg digest.Digest) {
	t.Helper()
	if err := d.Client.ContentStore().Delete(d.nsContext(t, ns), dg); err != nil && !errdefs.IsNotFound(err) {
		t.Fatalf("harness: daemon %s: delete blob %s: %v", d.Name, dg, err)
	}
}

// BusyboxImage is a busybox image written by ImportBusybox: Name (the
// normalized name given, pointing at Index), the index, host platform
// manifest and config digests, the layer diffIDs, the host Platform
// ("os/arch[/variant]") and the built Image with every descriptor.
type BusyboxImage struct {
	Name     string
	Index    digest.Digest
	Manifest digest.Digest
	Config   digest.Digest
	DiffIDs  []digest.Digest
	Platform string
	Image    *testimage.Image
}

var busyboxes sync.Map // marker → *testimage.Image

// Busybox returns the busybox test image with marker (testimage.Busybox),
// built once per process. It skips (fails under CI=true) when busybox-static
// is not installed.
func Busybox(t testing.TB, marker string) *testimage.Image {
	t.Helper()
	if im, ok := busyboxes.Load(marker); ok {
		return im.(*testimage.Image)
	}
	im, err := testimage.Busybox(marker)
	if err != nil {
		testenv.Missing(t, "harness: %v", err)
	}
	busyboxes.Store(marker, im)
	return im
}

// ImportBusybox writes the busybox image (marker "busybox") into the
// daemon's namespace and points name at its multi-platform index (host
// platform real, testimage.OtherPlatform a placeholder). name is normalized
// with reference.ParseDockerRef first ("busybox:1" is stored as
// "docker.io/library/busybox:1").
func ImportBusybox(t testing.TB, d *Daemon, name string) BusyboxImage {
	return ImportBusyboxVariant(t, d, name, "busybox")
}

// ImportBusyboxVariant is ImportBusybox with another marker: the file
// testimage.MarkerPath holds marker, so layer, config, manifest and index
// digests differ from other markers'. Importing a variant under a name that
// exists re-points the name.
func ImportBusyboxVariant(t testing.TB, d *Daemon, name, marker string) BusyboxImage {
	t.Helper()
	n, err := reference.ParseDockerRef(name)
	if err != nil {
		t.Fatalf("harness: image name %q: %v", name, err)
	}
	im := Busybox(t, marker)
	d.Put(t, "", im)
	d.Tag(t, "", n.String(), im.Index)
	return BusyboxImage{
		Name:     n.String(),
		Index:    im.Index.Digest,
		Manifest: im.Manifest.Digest,
		Config:   im.Config.Digest,
		DiffIDs:  im.DiffIDs,
		Platform: im.PlatformString(),
		Image:    im,
	}
}

var labelled sync.Map // label → *testimage.Image

// ImportBusyboxLabelled writes a busybox image whose config carries the
// labels of c (testimage.MetadataCase: a devcontainer.metadata label, as
// the Dev Containers tooling writes it) and points name (normalized first)
// at its index. Its layer is the "busybox" marker's, so its diffIDs, and
// the chain a container of it has as parent, are those of ImportBusybox;
// its config, manifest and index digests are its own. Built once per
// process per label.
func ImportBusyboxLabelled(t testing.TB, d *Daemon, name string, c testimage.MetadataCase) BusyboxImage {
	t.Helper()
	n, err := reference.ParseDockerRef(name)
	if err != nil {
		t.Fatalf("harness: image name %q: %v", name, err)
	}
	v, ok := labelled.Load(c.Label)
	if !ok {
		im, err := testimage.Busybox("busybox", testimage.WithLabels(c.Labels()))
		if err != nil {
			testenv.Missing(t, "harness: %v", err)
		}
		v, _ = labelled.LoadOrStore(c.Label, im)
	}
	im := v.(*testimage.Image)
	d.Put(t, "", im)
	d.Tag(t, "", n.String(), im.Index)
	return BusyboxImage{
		Name:     n.String(),
		Index:    im.Index.Digest,
		Manifest: im.Manifest.Digest,
		Config:   im.Config.Digest,
		DiffIDs:  im.DiffIDs,
		Platform: im.PlatformString(),
		Image:    im,
	}
}

// ImportBusyboxManifest writes the busybox image (marker "busybox") and
// points name (normalized first) at its single-platform manifest for the
// host platform instead of the index; the returned Index is empty.
func ImportBusyboxManifest(t testing.TB, d *Daemon, name string) BusyboxImage {
	t.Helper()
	n, err := reference.ParseDockerRef(name)
	if err != nil {
		t.Fatalf("harness: image name %q: %v", name, err)
	}
	im := Busybox(t, "busybox")
	d.Put(t, "", im)
	d.Tag(t, "", n.String(), im.Manifest)
	return BusyboxImage{
		Name:     n.String(),
		Manifest: im.Manifest.Digest,
		Config:   im.Config.Digest,
		DiffIDs:  im.DiffIDs,
		Platform: im.PlatformString(),
		Image:    im,
	}
}

// Run unpacks the image name (in the daemon's Namespace) on overlayfs,
// runs args in a new container d.ID(id) and returns its combined output and
// exit status. The container and its snapshot are deleted afterwards.
func (d *Daemon) Run(t testing.TB, name, id string, args ...string) (string, uint32) {
	t.Helper()
	ctx := d.nsContext(t, "")
	img, err := d.Client.GetImage(ctx, name)
	if err != nil {
		t.Fatalf("harness: daemon %s: image %s: %v", d.Name, name, err)
	}
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatalf("harness: daemon %s: unpack %s: %v", d.Name, name, err)
	}
	cid := d.ID(id)
	c, err := d.Client.NewContainer(ctx, cid,
		client.WithImage(img),
		client.WithSnapshotter("overlayfs"),
		client.WithNewSnapshot(cid+"-snap", img),
		client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs(args...)))
	if err != nil {
		t.Fatalf("harness: daemon %s: new container %s: %v", d.Name, cid, err)
	}
	defer c.Delete(context.WithoutCancel(ctx), client.WithSnapshotCleanup)
	// The shim writes stdout and stderr to a file itself: FIFO copies can
	// lose the output of a process that exits before they open.
	logPath := filepath.Join(d.Dir, "run-"+cid+".log")
	task, err := c.NewTask(ctx, cio.LogFile(logPath))
	if err != nil {
		t.Fatalf("harness: daemon %s: new task %s: %v", d.Name, cid, err)
	}
	defer task.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
	exitCh, err := task.Wait(ctx)
	if err != nil {
		t.Fatalf("harness: daemon %s: wait %s: %v", d.Name, cid, err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("harness: daemon %s: start %s: %v", d.Name, cid, err)
	}
	select {
	case st := <-exitCh:
		code, _, err := st.Result()
		if err != nil {
			t.Fatalf("harness: daemon %s: %s exit: %v", d.Name, cid, err)
		}
		if _, err := task.Delete(ctx); err != nil {
			t.Fatalf("harness: daemon %s: delete task %s: %v", d.Name, cid, err)
		}
		out, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatalf("harness: daemon %s: output of %s: %v", d.Name, cid, err)
		}
		return string(out), code
	case <-ctx.Done():
		task.Kill(context.WithoutCancel(ctx), syscall.SIGKILL)
		t.Fatalf("harness: daemon %s: %s did not exit: %v", d.Name, cid, ctx.Err())
	}
	return "", 0
}
