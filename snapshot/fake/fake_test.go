package fake_test

import (
	"context"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/snapshot/capturertest"
	"github.com/sandbox-resume/sandbox-resume/snapshot/fake"
)

type probe struct{ *fake.Capturer }

func (p probe) Blob(ctx context.Context, d digest.Digest) ([]byte, error) {
	return p.Capturer.Blob(ctx, d)
}

func TestConformance(t *testing.T) {
	capturertest.Run(t, func(t *testing.T) capturertest.Fixture {
		f := NewFixture()
		return capturertest.Fixture{Capturer: f, Probe: probe{f}, Container: "box-1", Image: "docker.io/library/busybox:1", LeaseID: snapshot.RunLease("suite-1"),
			LabelledImage: "docker.io/library/labelled:1", Labels: fixtureLabels}
	})
}

// fixtureLabels are the config labels of the fixture's labelled:1 image.
var fixtureLabels = map[string]string{
	"devcontainer.metadata":          `[{"id":"ghcr.io/devcontainers/features/node:1"}]`,
	"org.opencontainers.image.title": "labelled",
}

// NewFixture returns a fake with the busybox:1 image and a running
// container "box-1" from it, and the labelled:1 image (same layer, a
// config with fixtureLabels).
func NewFixture() *fake.Capturer {
	f := fake.New(snapshot.Host{ID: "host-a", IDSource: snapshot.IDSourceIntrospection, ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: "linux/amd64"})
	f.AddImage(fake.Image{
		Base: snapshot.Base{
			Name: "docker.io/library/busybox:1", ManifestDigest: digest.FromString("manifest"),
			ConfigDigest: digest.FromString("config"), Platform: "linux/amd64",
			DiffIDs: []digest.Digest{digest.FromString("diffid-0")},
		},
		Layers: []digest.Digest{digest.FromString("layer-0")},
	})
	f.AddImage(fake.Image{
		Base: snapshot.Base{
			Name: "docker.io/library/labelled:1", ManifestDigest: digest.FromString("labelled manifest"),
			ConfigDigest: digest.FromString("labelled config"), Platform: "linux/amd64",
			DiffIDs: []digest.Digest{digest.FromString("diffid-0")},
		},
		Layers: []digest.Digest{digest.FromString("layer-0")},
		Labels: fixtureLabels,
	})
	f.AddContainer(fake.Container{ID: "box-1", Image: "docker.io/library/busybox:1", Task: snapshot.TaskRunning,
		Files: map[string][]byte{"data.txt": []byte("hello"), "var/n.txt": []byte("nested")}})
	return f
}
