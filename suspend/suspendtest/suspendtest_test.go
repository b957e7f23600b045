package suspendtest_test

import (
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend/suspendtest"
)

// TestMemhost runs the end-to-end suspend suite over host/memhost: the
// busybox:1 image and a running container box-1 of it that wrote files.
func TestMemhost(t *testing.T) {
	suspendtest.Run(t, func(t *testing.T) suspendtest.Fixture {
		h := memhost.New(snapshot.Host{ID: "host-a", IDSource: snapshot.IDSourceIntrospection, ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: "linux/amd64"})
		h.AddImage(memhost.Image{
			Base: snapshot.Base{
				Name: "docker.io/library/busybox:1", ManifestDigest: digest.FromString("manifest"),
				ConfigDigest: digest.FromString("config"), Platform: "linux/amd64",
				DiffIDs: []digest.Digest{digest.FromString("diffid-0")},
			},
			Layers: []digest.Digest{digest.FromString("layer-0")},
		})
		h.AddContainer(memhost.Container{ID: "box-1", Image: "docker.io/library/busybox:1", Task: snapshot.TaskRunning,
			Files: map[string][]byte{"data.txt": []byte("hello"), "var/n.txt": []byte("nested")}})
		return suspendtest.Fixture{Host: h, Probe: h, Container: "box-1", Image: "docker.io/library/busybox:1", LeaseID: snapshot.RunLease("suite-1")}
	})
}
