package fake_test

import (
	"testing"

	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/resume/facttest"
	"github.com/sandbox-resume/sandbox-resume/resume/fake"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

var _ resume.Facts = (*fake.Facts)(nil)

type fixture struct {
	f *fake.Facts
	p ocispec.Platform
}

func (x fixture) HostPlatform() ocispec.Platform { return x.p }

func (x fixture) Put(t testing.TB, im *testimage.Image) {
	for _, b := range im.Blobs {
		if got := x.f.PutBlob(b.Data); got != b.Desc.Digest {
			t.Fatalf("PutBlob: digest %s, want %s", got, b.Desc.Digest)
		}
	}
}

func (x fixture) Name(t testing.TB, name string, target ocispec.Descriptor) {
	if err := x.f.SetImage(name, target); err != nil {
		t.Fatal(err)
	}
}

func (x fixture) Delete(t testing.TB, d digest.Digest) { x.f.DeleteBlob(d) }

func TestFactsConformance(t *testing.T) {
	for _, plat := range []string{"linux/amd64", "linux/arm64", "linux/arm/v7"} {
		t.Run(plat, func(t *testing.T) {
			facttest.RunFactsSuite(t, func(t *testing.T) (resume.Facts, facttest.Fixture) {
				f, err := fake.NewFacts(snapshot.Host{
					ID: "00000000-0000-4000-8000-000000000001", IDSource: snapshot.IDSourceIntrospection,
					ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: plat,
				})
				if err != nil {
					t.Fatal(err)
				}
				return f, fixture{f, platforms.MustParse(plat)}
			})
		})
	}
}

func TestNewFactsRejectsBadPlatform(t *testing.T) {
	if _, err := fake.NewFacts(snapshot.Host{Platform: "not a platform!"}); err == nil {
		t.Fatal("NewFacts accepted an unparsable platform")
	}
}
