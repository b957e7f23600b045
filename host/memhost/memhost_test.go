package memhost_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/host/hosttest"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/runspec"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// The one in-memory host is every consumer's host.
var (
	_ host.Host           = (*memhost.Machine)(nil)
	_ suspend.Host        = (*memhost.Machine)(nil)
	_ resume.Facts        = (*memhost.Machine)(nil)
	_ resume.Materializer = (*memhost.Machine)(nil)
	_ resume.RunHost      = (*memhost.Machine)(nil)
	_ migrate.Store       = (*memhost.Machine)(nil)
	_ host.Registry       = (*memhost.Registry)(nil)
)

// factsFixture is hosttest.FactsFixture over a memhost.
type factsFixture struct {
	h *memhost.Machine
	p ocispec.Platform
}

func (x factsFixture) HostPlatform() ocispec.Platform { return x.p }

func (x factsFixture) Put(t testing.TB, im *testimage.Image) {
	for _, b := range im.Blobs {
		if got := x.h.PutBlob(b.Data); got != b.Desc.Digest {
			t.Fatalf("PutBlob: digest %s, want %s", got, b.Desc.Digest)
		}
	}
}

func (x factsFixture) Name(t testing.TB, name string, target ocispec.Descriptor) {
	if err := x.h.SetImage(name, target); err != nil {
		t.Fatal(err)
	}
}

func (x factsFixture) Delete(t testing.TB, d digest.Digest) { x.h.DeleteBlob(d) }

func (x factsFixture) CheckSpec(t testing.TB, spec []byte, env map[string]string) {
	t.Helper()
	if drift, err := runspec.Compare(spec, spec, runspec.Options{ContainerEnv: env}); err != nil || len(drift) != 0 {
		t.Fatalf("runspec.Compare(built, built) = %v, %v:\n%s", drift, err, spec)
	}
}

func factsOn(plat string) hosttest.NewFacts {
	return func(t *testing.T) (host.Host, hosttest.FactsFixture) {
		h := memhost.New(snapshot.Host{
			ID: "00000000-0000-4000-8000-000000000001", IDSource: snapshot.IDSourceIntrospection,
			ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: plat,
		})
		return h, factsFixture{h, platforms.MustParse(plat)}
	}
}

// probe is hosttest.Probe over a memhost.
type probe struct{ *memhost.Machine }

// materializeFixture is a memhost holding a synthetic base image.
func materializeFixture(t *testing.T) hosttest.MaterializeFixture {
	p := testimage.HostPlatform()
	h := memhost.New(snapshot.Host{ID: "h", IDSource: snapshot.IDSourceIntrospection,
		ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: p.OS + "/" + p.Architecture})
	im, err := testimage.Synthetic(p, "materialize")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range im.Blobs {
		h.PutBlob(b.Data)
	}
	if err := h.SetImage("example.test/base:1", im.Index); err != nil {
		t.Fatal(err)
	}
	base, err := h.ResolveImage(t.Context(), "example.test/base:1")
	if err != nil {
		t.Fatal(err)
	}
	get := func(t testing.TB, id string) memhost.Incarnation {
		c, ok := h.Incarnation(id)
		if !ok {
			t.Fatalf("no container %s", id)
		}
		return c
	}
	return hosttest.MaterializeFixture{
		Host: h, Base: base,
		PutBlob: func(t testing.TB, run string, data []byte) { h.PutBlob(data) },
		Env:     func(t testing.TB, id string) []string { return get(t, id).Env },
		Labels:  func(t testing.TB, id string) map[string]string { return get(t, id).Labels },
		Spec:    func(t testing.TB, id string) []byte { return get(t, id).Spec.Spec },
		Runtime: func(t testing.TB, id string) snapshot.Runtime { return get(t, id).Spec.Runtime },
		ID:      func(name string) string { return name },
	}
}

// fixtureLabels are the config labels of the capture fixture's labelled:1
// image.
var fixtureLabels = map[string]string{
	"devcontainer.metadata":          `[{"id":"ghcr.io/devcontainers/features/node:1"}]`,
	"org.opencontainers.image.title": "labelled",
}

// captureHost returns a memhost with the busybox:1 image and a running
// container "box-1" from it, and the labelled:1 image (same layer, a
// config with fixtureLabels).
func captureHost() *memhost.Machine {
	h := memhost.New(snapshot.Host{ID: "host-a", IDSource: snapshot.IDSourceIntrospection, ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: "linux/amd64"})
	h.AddImage(memhost.Image{
		Base: snapshot.Base{
			Name: "docker.io/library/busybox:1", ManifestDigest: digest.FromString("manifest"),
			ConfigDigest: digest.FromString("config"), Platform: "linux/amd64",
			DiffIDs: []digest.Digest{digest.FromString("diffid-0")},
		},
		Layers: []digest.Digest{digest.FromString("layer-0")},
	})
	h.AddImage(memhost.Image{
		Base: snapshot.Base{
			Name: "docker.io/library/labelled:1", ManifestDigest: digest.FromString("labelled manifest"),
			ConfigDigest: digest.FromString("labelled config"), Platform: "linux/amd64",
			DiffIDs: []digest.Digest{digest.FromString("diffid-0")},
		},
		Layers: []digest.Digest{digest.FromString("layer-0")},
		Labels: fixtureLabels,
	})
	h.AddContainer(memhost.Container{ID: "box-1", Image: "docker.io/library/busybox:1", Task: snapshot.TaskRunning,
		Files: map[string][]byte{"data.txt": []byte("hello"), "var/n.txt": []byte("nested")}})
	return h
}

func captureFixture(t *testing.T) hosttest.CaptureFixture {
	h := captureHost()
	return hosttest.CaptureFixture{Host: h, Probe: probe{h}, Container: "box-1", Image: "docker.io/library/busybox:1",
		LeaseID: snapshot.RunLease("suite-1"), LabelledImage: "docker.io/library/labelled:1", Labels: fixtureLabels,
		File: "/var/n.txt", FileData: []byte("nested")}
}

// TestConformance: memhost passes the one host suite (on three host
// platforms for the facts, and the store part over each).
func TestConformance(t *testing.T) {
	for _, plat := range []string{"linux/amd64", "linux/arm64", "linux/arm/v7"} {
		t.Run(plat, func(t *testing.T) {
			hosttest.Run(t, hosttest.Fixtures{Facts: factsOn(plat), Materialize: materializeFixture, Capture: captureFixture})
		})
	}
}

// TestBadPlatformMatchesNothing: a host whose platform does not parse
// fails closed: no platform matches it and no stored image resolves.
func TestBadPlatformMatchesNothing(t *testing.T) {
	h := memhost.New(snapshot.Host{Platform: "not a platform!"})
	if h.PlatformMatches("linux/amd64") || h.PlatformMatches("not a platform!") {
		t.Fatal("a host with an unparsable platform matched a platform")
	}
	im, err := testimage.Synthetic(testimage.HostPlatform(), "bad-platform")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range im.Blobs {
		h.PutBlob(b.Data)
	}
	if err := h.SetImage("example.test/img:1", im.Index); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ResolveImage(t.Context(), "example.test/img:1"); !errdefs.IsNotFound(err) {
		t.Fatalf("ResolveImage on a host with an unparsable platform = %v, want NotFound", err)
	}
}

// TestCheckDiffIsVerifyDiff: memhost's CheckDiff is the full layer
// verifier import and pull run (snapshot.VerifyDiff), not a copy of it:
// for a good blob and for every kind of mismatch, both give the same
// result, message for message.
func TestCheckDiffIsVerifyDiff(t *testing.T) {
	h := memhost.New(snapshot.Host{ID: "h", IDSource: snapshot.IDSourceIntrospection, Platform: "linux/amd64"})
	raw := bytes.Repeat([]byte("tar bytes "), 1000)
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(raw)
	zw.Close()
	blob := buf.Bytes()
	h.PutBlob(blob)
	good := snapshot.Layer{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: digest.FromBytes(blob), Size: int64(len(blob)),
		DiffID: digest.FromBytes(raw), UncompressedSize: int64(len(raw))}
	for name, d := range map[string]snapshot.Layer{
		"good":              good,
		"size":              func(d snapshot.Layer) snapshot.Layer { d.Size--; return d }(good),
		"diffID":            func(d snapshot.Layer) snapshot.Layer { d.DiffID = digest.FromString("x"); return d }(good),
		"uncompressed size": func(d snapshot.Layer) snapshot.Layer { d.UncompressedSize -= 10; return d }(good),
	} {
		got := h.CheckDiff(t.Context(), d)
		want := snapshot.VerifyDiff(bytes.NewReader(blob), d)
		if fmt.Sprint(got) != fmt.Sprint(want) || errors.Is(got, snapshot.ErrDiffCorrupt) != (name != "good") {
			t.Errorf("%s: CheckDiff = %v, VerifyDiff = %v", name, got, want)
		}
	}
}

// TestRunHost: memhost is the RunHost of resume.Discard: the run's
// containers sorted with their task state, its run lease (stored refs)
// and `/1` claim lease deleted once, others not found.
func TestRunHost(t *testing.T) {
	ctx := context.Background()
	m := memhost.New(snapshot.Host{ID: "h", IDSource: snapshot.IDSourceIntrospection, Platform: "linux/amd64"})
	var h resume.RunHost = m
	m.PutContainer("b", map[string]string{snapshot.LabelRun: "r"}, 7)
	m.PutContainer("a", map[string]string{snapshot.LabelRun: "r"}, 0)
	m.PutContainer("c", map[string]string{snapshot.LabelRun: "other"}, 0)
	cs, err := h.RunContainers(ctx, "r")
	if err != nil || len(cs) != 2 || cs[0].ID != "a" || cs[0].Running || cs[1].ID != "b" || !cs[1].Running {
		t.Fatalf("RunContainers = %+v, %v", cs, err)
	}
	if err := m.StoreRef(ctx, "r", []byte("ref")); err != nil {
		t.Fatal(err)
	}
	m.SetLegacyClaim("r", "a")
	if lc, err := h.LegacyClaim(ctx, "r"); err != nil || lc == nil || lc.Container != "a" {
		t.Fatalf("LegacyClaim = %+v, %v", lc, err)
	}
	for _, id := range []string{snapshot.RunLease("r"), snapshot.ClaimLease("r")} {
		if err := h.DeleteLease(ctx, id); err != nil {
			t.Errorf("DeleteLease(%s) = %v", id, err)
		}
		if err := h.DeleteLease(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("DeleteLease(%s) again = %v, want not found", id, err)
		}
	}
	if refs := m.Refs("r"); len(refs) != 0 {
		t.Errorf("refs left: %v", refs)
	}
	if err := h.DeleteContainer(ctx, "a"); err != nil || !slices.Equal(m.Containers(), []string{"b", "c"}) {
		t.Errorf("DeleteContainer: %v, left %v", err, m.Containers())
	}
}

// TestMemoryConformance: memhost passes the suite's memory part
// (checkpoint leaves the task paused, one restore into a task-less
// container).
func TestMemoryConformance(t *testing.T) {
	hosttest.RunMemory(t, func(t *testing.T) hosttest.MemoryFixture {
		h := captureHost()
		return hosttest.MemoryFixture{Host: h, Probe: probe{h}, Container: "box-1", LeaseID: snapshot.RunLease("mem-1")}
	})
}
