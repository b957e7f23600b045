package hosttest

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// FactsFixture changes the stores behind a host under RunFacts.
type FactsFixture interface {
	// HostPlatform is the platform the Facts report as the host's.
	HostPlatform() ocispec.Platform
	// Put stores every blob of im in the content store (kept until the test
	// ends even when no image names it).
	Put(t testing.TB, im *testimage.Image)
	// Name creates or re-points the image name (already normalized) at target.
	Name(t testing.TB, name string, target ocispec.Descriptor)
	// Delete removes blob d from the content store.
	Delete(t testing.TB, d digest.Digest)
	// CheckSpec fails t unless resume's check 10 accepts spec compared
	// with itself under containerEnv (runspec.Compare finds no drift):
	// the suite cannot import runspec, a later item.
	CheckSpec(t testing.TB, spec []byte, containerEnv map[string]string)
}

// NewFacts returns a fresh host with empty stores and its FactsFixture;
// RunFacts calls it once per subtest.
type NewFacts func(t *testing.T) (host.Host, FactsFixture)

func build(t *testing.T, fx FactsFixture, marker string) *testimage.Image {
	t.Helper()
	im, err := testimage.Synthetic(fx.HostPlatform(), marker)
	if err != nil {
		t.Fatal(err)
	}
	fx.Put(t, im)
	return im
}

// want is the Base an image built by testimage resolves to.
func want(name string, im *testimage.Image, viaIndex bool) snapshot.Base {
	b := snapshot.Base{
		Name:           name,
		ManifestDigest: im.Manifest.Digest,
		ConfigDigest:   im.Config.Digest,
		Platform:       im.PlatformString(),
		DiffIDs:        im.DiffIDs,
	}
	if viaIndex {
		b.IndexDigest = im.Index.Digest
	}
	return b
}

func equalBase(a, b snapshot.Base) bool {
	return a.Name == b.Name && a.IndexDigest == b.IndexDigest && a.ManifestDigest == b.ManifestDigest &&
		a.ConfigDigest == b.ConfigDigest && a.Platform == b.Platform && slices.Equal(a.DiffIDs, b.DiffIDs)
}

func resolve(t *testing.T, f host.Host, ref string, exp snapshot.Base) {
	t.Helper()
	got, err := f.ResolveImage(ctx(t), ref)
	if err != nil {
		t.Fatalf("ResolveImage(%q): %v", ref, err)
	}
	if !equalBase(got, exp) {
		t.Fatalf("ResolveImage(%q)\n got  %+v\n want %+v", ref, got, exp)
	}
	if got.DiffIDs == nil {
		t.Fatalf("ResolveImage(%q): DiffIDs is nil, want a non-nil slice", ref)
	}
}

func wantErr(t *testing.T, what string, err error, class error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, class)
	}
	if !errors.Is(err, class) && !sameClass(err, class) {
		t.Fatalf("%s: error %q does not wrap %v", what, err, class)
	}
}

// RunFacts runs the part of the suite the resume decision relies on —
// resolution, presence, blob sizes, spec blob reads (size and digest
// verified), the spec a `/1` ref is built with, image config labels, host
// facts and platform matching, against the digests the test images were
// built with (internal/testimage) — on the hosts newFacts returns.
func RunFacts(t *testing.T, newFacts NewFacts) {
	t.Run("Host", func(t *testing.T) {
		f, fx := newFacts(t)
		h, err := f.Host(ctx(t))
		if err != nil {
			t.Fatalf("Host: %v", err)
		}
		if h.ID == "" || (h.IDSource != snapshot.IDSourceIntrospection && h.IDSource != snapshot.IDSourceOverride) {
			t.Errorf("Host id %q source %q: want a non-empty id from %q or %q", h.ID, h.IDSource, snapshot.IDSourceIntrospection, snapshot.IDSourceOverride)
		}
		if h.ContainerdVersion == "" || h.Snapshotter == "" {
			t.Errorf("Host version %q snapshotter %q: want both", h.ContainerdVersion, h.Snapshotter)
		}
		if p := platforms.Format(fx.HostPlatform()); h.Platform != p {
			t.Errorf("Host platform %q, want %q", h.Platform, p)
		}
		h2, err := f.Host(ctx(t))
		if err != nil || h2 != h {
			t.Errorf("second Host = %+v, %v; want %+v", h2, err, h)
		}
	})

	t.Run("PlatformMatches", func(t *testing.T) {
		f, fx := newFacts(t)
		host := fx.HostPlatform()
		if !f.PlatformMatches(platforms.Format(host)) {
			t.Errorf("PlatformMatches(%q) = false for the host platform", platforms.Format(host))
		}
		other := platforms.Format(testimage.OtherPlatform(host))
		for _, p := range []string{other, "windows/" + host.Architecture, "not a platform!"} {
			if f.PlatformMatches(p) {
				t.Errorf("PlatformMatches(%q) = true on host %s", p, platforms.Format(host))
			}
		}
		if host.Architecture == "amd64" && f.PlatformMatches("linux/386") {
			t.Errorf("PlatformMatches(linux/386) = true on amd64: not strict")
		}
	})

	t.Run("TagOfIndex", func(t *testing.T) {
		f, fx := newFacts(t)
		im := build(t, fx, "tag-of-index")
		const name = "example.test/sr/img:1"
		fx.Name(t, name, im.Index)
		resolve(t, f, name, want(name, im, true))
	})

	t.Run("TagOfManifest", func(t *testing.T) {
		f, fx := newFacts(t)
		im := build(t, fx, "tag-of-manifest")
		const name = "example.test/sr/single:1"
		fx.Name(t, name, im.Manifest)
		resolve(t, f, name, want(name, im, false))
	})

	t.Run("ShortAndNormalizedNamesAgree", func(t *testing.T) {
		f, fx := newFacts(t)
		im := build(t, fx, "short")
		const name = "docker.io/library/srtest:1"
		fx.Name(t, name, im.Index)
		exp := want(name, im, true)
		for _, ref := range []string{"srtest:1", "library/srtest:1", "docker.io/srtest:1", name} {
			resolve(t, f, ref, exp)
		}
		_, err := f.ResolveImage(ctx(t), "srtest") // :latest is not stored
		wantErr(t, "ResolveImage(srtest)", err, errdefs.ErrNotFound)
	})

	t.Run("RepointedNameResolvesToNewContent", func(t *testing.T) {
		f, fx := newFacts(t)
		a := build(t, fx, "first")
		b := build(t, fx, "second")
		if a.Manifest.Digest == b.Manifest.Digest {
			t.Fatal("test images with different markers share a manifest digest")
		}
		const name = "example.test/sr/moving:1"
		fx.Name(t, name, a.Index)
		resolve(t, f, name, want(name, a, true))
		fx.Name(t, name, b.Index)
		resolve(t, f, name, want(name, b, true))
	})

	t.Run("DigestReference", func(t *testing.T) {
		f, fx := newFacts(t)
		im := build(t, fx, "by-digest")
		// No name points at the image: a digest resolves as a content key.
		ref := "example.test/sr/img@" + im.Index.Digest.String()
		resolve(t, f, ref, want(ref, im, true))
		ref = "example.test/sr/img@" + im.Manifest.Digest.String()
		resolve(t, f, ref, want(ref, im, false))
		// A tag beside a digest is dropped by normalization.
		resolve(t, f, "example.test/sr/img:1@"+im.Manifest.Digest.String(), want(ref, im, false))

		absent := digest.FromString("sandbox-resume: bytes that are not stored")
		_, err := f.ResolveImage(ctx(t), "example.test/sr/img@"+absent.String())
		wantErr(t, "ResolveImage(absent digest)", err, errdefs.ErrNotFound)
		if err != nil && !containsDigest(err, absent) {
			t.Errorf("error %q does not name the digest %s", err, absent)
		}
	})

	t.Run("MissingPlatform", func(t *testing.T) {
		f, fx := newFacts(t)
		im := build(t, fx, "foreign")
		fx.Name(t, "example.test/sr/foreign:1", im.Foreign)
		_, err := f.ResolveImage(ctx(t), "example.test/sr/foreign:1")
		wantErr(t, "ResolveImage(index without the host platform)", err, errdefs.ErrNotFound)
		fx.Name(t, "example.test/sr/other:1", im.Other)
		_, err = f.ResolveImage(ctx(t), "example.test/sr/other:1")
		wantErr(t, "ResolveImage(manifest for another platform)", err, errdefs.ErrNotFound)
	})

	t.Run("UnknownAndInvalidReferences", func(t *testing.T) {
		f, _ := newFacts(t)
		_, err := f.ResolveImage(ctx(t), "example.test/sr/nothing:1")
		wantErr(t, "ResolveImage(unknown name)", err, errdefs.ErrNotFound)
		for _, ref := range []string{"", "example.test/UPPER:1", "a:b:c", "example.test/x@sha256:123"} {
			_, err := f.ResolveImage(ctx(t), ref)
			wantErr(t, "ResolveImage("+ref+")", err, errdefs.ErrInvalidArgument)
		}
	})

	t.Run("MissingContent", func(t *testing.T) {
		f, fx := newFacts(t)
		im := build(t, fx, "presence")
		fx.Name(t, "example.test/sr/presence:1", im.Index)
		missing, err := f.MissingContent(ctx(t), im.Manifest.Digest)
		if err != nil || len(missing) != 0 {
			t.Fatalf("MissingContent(complete) = %v, %v; want none", missing, err)
		}
		fx.Delete(t, im.Layers[0].Digest)
		missing, err = f.MissingContent(ctx(t), im.Manifest.Digest)
		if err != nil || !slices.Equal(missing, []digest.Digest{im.Layers[0].Digest}) {
			t.Fatalf("MissingContent(layer deleted) = %v, %v; want [%s]", missing, err, im.Layers[0].Digest)
		}
		// Resolution reads only index, manifest and config.
		resolve(t, f, "example.test/sr/presence:1", want("example.test/sr/presence:1", im, true))
		fx.Delete(t, im.Config.Digest)
		missing, err = f.MissingContent(ctx(t), im.Manifest.Digest)
		if exp := []digest.Digest{im.Config.Digest, im.Layers[0].Digest}; err != nil || !slices.Equal(missing, exp) {
			t.Fatalf("MissingContent(config and layer deleted) = %v, %v; want %v", missing, err, exp)
		}
		_, err = f.ResolveImage(ctx(t), "example.test/sr/presence:1")
		wantErr(t, "ResolveImage(config deleted)", err, errdefs.ErrNotFound)
		fx.Delete(t, im.Manifest.Digest)
		missing, err = f.MissingContent(ctx(t), im.Manifest.Digest)
		if err != nil || !slices.Equal(missing, []digest.Digest{im.Manifest.Digest}) {
			t.Fatalf("MissingContent(manifest deleted) = %v, %v; want [%s]", missing, err, im.Manifest.Digest)
		}
		absent := digest.FromString("never stored")
		missing, err = f.MissingContent(ctx(t), absent)
		if err != nil || !slices.Equal(missing, []digest.Digest{absent}) {
			t.Fatalf("MissingContent(never stored) = %v, %v; want [%s]", missing, err, absent)
		}
		_, err = f.MissingContent(ctx(t), im.Index.Digest)
		wantErr(t, "MissingContent(an index)", err, errdefs.ErrInvalidArgument)
		_, err = f.MissingContent(ctx(t), "sha256:nothex")
		wantErr(t, "MissingContent(invalid digest)", err, errdefs.ErrInvalidArgument)
	})

	t.Run("ReadSpec", func(t *testing.T) {
		f, fx := newFacts(t)
		im := build(t, fx, "read-spec")
		var cfg []byte
		for _, b := range im.Blobs {
			if b.Desc.Digest == im.Config.Digest {
				cfg = b.Data
			}
		}
		d := snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: im.Config.Digest, Size: im.Config.Size}
		got, err := f.ReadSpec(ctx(t), d)
		if err != nil || string(got) != string(cfg) {
			t.Fatalf("ReadSpec(%s) = %q, %v; want the blob's bytes", d.Digest, got, err)
		}
		wrong := d
		wrong.Size++
		_, err = f.ReadSpec(ctx(t), wrong)
		wantErr(t, "ReadSpec(another size)", err, snapshot.ErrBlobCorrupt)
		absent := snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: digest.FromString("absent spec"), Size: 3}
		_, err = f.ReadSpec(ctx(t), absent)
		wantErr(t, "ReadSpec(absent)", err, errdefs.ErrNotFound)
		if err != nil && !containsDigest(err, absent.Digest) {
			t.Errorf("error %q does not name the digest %s", err, absent.Digest)
		}
	})

	t.Run("BuildSpec", func(t *testing.T) {
		f, fx := newFacts(t)
		im := build(t, fx, "build-spec")
		fx.Name(t, "example.test/sr/build:1", im.Index)
		base := want("example.test/sr/build:1", im, true)
		b, err := f.BuildSpec(ctx(t), "built-1", base, nil, []string{"GREETING=hello", "PATH=/usr/bin:/bin"})
		if err != nil {
			t.Fatalf("BuildSpec: %v", err)
		}
		// A spec check 10 accepts, equal to itself.
		fx.CheckSpec(t, b, map[string]string{"GREETING": "hello"})
		var s struct {
			Process struct {
				Args []string `json:"args"`
				Env  []string `json:"env"`
				Cwd  string   `json:"cwd"`
			} `json:"process"`
			Root  struct{ Path string } `json:"root"`
			Linux struct {
				CgroupsPath string `json:"cgroupsPath"`
			} `json:"linux"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Process.Args, []string{"/bin/sh"}) || s.Process.Cwd != "/" ||
			!slices.Equal(s.Process.Env, []string{"PATH=/usr/bin:/bin", "GREETING=hello"}) {
			t.Errorf("built process %+v: want the image's /bin/sh in /, its PATH replaced and GREETING added", s.Process)
		}
		if s.Root.Path != host.BundleRootfs || s.Linux.CgroupsPath != "/"+f.Namespace()+"/built-1" {
			t.Errorf("built root.path %q cgroupsPath %q", s.Root.Path, s.Linux.CgroupsPath)
		}
		fx.Delete(t, im.Config.Digest)
		_, err = f.BuildSpec(ctx(t), "built-2", base, nil, nil)
		wantErr(t, "BuildSpec(config deleted)", err, errdefs.ErrNotFound)
	})

	t.Run("ImageLabels", func(t *testing.T) {
		f, fx := newFacts(t)
		labels := map[string]string{
			"devcontainer.metadata":          `[{"id":"ghcr.io/devcontainers/features/node:1"},{"postCreateCommand":"npm ci"}]`,
			"org.opencontainers.image.title": "labelled",
			"empty":                          "",
		}
		im, err := testimage.Synthetic(fx.HostPlatform(), "labelled", testimage.WithLabels(labels))
		if err != nil {
			t.Fatal(err)
		}
		fx.Put(t, im)
		got, err := f.ImageLabels(ctx(t), im.Config.Digest)
		if err != nil || !maps.Equal(got, labels) {
			t.Fatalf("ImageLabels(labelled config) = %q, %v; want %q", got, err, labels)
		}
		plain := build(t, fx, "unlabelled")
		got, err = f.ImageLabels(ctx(t), plain.Config.Digest)
		if err != nil || len(got) != 0 {
			t.Fatalf("ImageLabels(config without labels) = %q, %v; want none", got, err)
		}
		fx.Delete(t, im.Config.Digest)
		_, err = f.ImageLabels(ctx(t), im.Config.Digest)
		wantErr(t, "ImageLabels(deleted config)", err, errdefs.ErrNotFound)
		if err != nil && !containsDigest(err, im.Config.Digest) {
			t.Errorf("error %q does not name the digest %s", err, im.Config.Digest)
		}
		_, err = f.ImageLabels(ctx(t), plain.Layers[0].Digest)
		wantErr(t, "ImageLabels(a layer blob)", err, errdefs.ErrInvalidArgument)
		if err != nil && !containsDigest(err, plain.Layers[0].Digest) {
			t.Errorf("error %q does not name the digest %s", err, plain.Layers[0].Digest)
		}
		_, err = f.ImageLabels(ctx(t), "sha256:nothex")
		wantErr(t, "ImageLabels(invalid digest)", err, errdefs.ErrInvalidArgument)
	})

	t.Run("BlobSize", func(t *testing.T) {
		f, fx := newFacts(t)
		im := build(t, fx, "sizes")
		for _, b := range im.Blobs {
			n, err := f.BlobSize(ctx(t), b.Desc.Digest)
			if err != nil || n != int64(len(b.Data)) {
				t.Fatalf("BlobSize(%s) = %d, %v; want %d", b.Desc.Digest, n, err, len(b.Data))
			}
		}
		absent := digest.FromString("absent blob")
		_, err := f.BlobSize(ctx(t), absent)
		wantErr(t, "BlobSize(absent)", err, errdefs.ErrNotFound)
		if err != nil && !containsDigest(err, absent) {
			t.Errorf("error %q does not name the digest %s", err, absent)
		}
		_, err = f.BlobSize(ctx(t), "sha256:nothex")
		wantErr(t, "BlobSize(invalid digest)", err, errdefs.ErrInvalidArgument)
	})
}

func containsDigest(err error, d digest.Digest) bool {
	return err != nil && strings.Contains(err.Error(), d.String())
}

// sameClass reports whether err carries class the way errdefs tests it
// (errors converted from gRPC carry the class as an interface).
func sameClass(err, class error) bool {
	for _, c := range []struct {
		class error
		is    func(error) bool
	}{
		{errdefs.ErrNotFound, errdefs.IsNotFound},
		{errdefs.ErrInvalidArgument, errdefs.IsInvalidArgument},
		{errdefs.ErrUnavailable, errdefs.IsUnavailable},
		{errdefs.ErrAlreadyExists, errdefs.IsAlreadyExists},
	} {
		if errors.Is(class, c.class) {
			return c.is(err)
		}
	}
	return false
}
