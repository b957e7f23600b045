package harness

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
)

func TestShimProtocolErrors(t *testing.T) {
	const v3 = `time="2026-11-30T17:30:30Z" level=info msg="connecting to shim sr-a-1-x" address="unix:///run/containerd/s/09" namespace=sr-a-1 protocol=ttrpc version=3`
	const v2 = `time="2026-11-30T17:30:31Z" level=info msg="connecting to shim sr-a-1-y" address="unix:///run/containerd/s/10" namespace=sr-a-1 protocol=ttrpc version=2`
	log := v3 + "\n" + `time="x" level=info msg="shim disconnected" id=sr-a-1-x` + "\n" + v2 + "\n"
	if _, versions := ShimConnections(log); !slices.Equal(versions, []string{"3", "2"}) {
		t.Fatalf("ShimConnections versions %v, want [3 2]", versions)
	}
	if bad := ShimProtocolErrors(log); !slices.Equal(bad, []string{v2}) {
		t.Fatalf("ShimProtocolErrors = %q, want the version=2 line", bad)
	}
	if bad := ShimProtocolErrors(v3); bad != nil {
		t.Fatalf("ShimProtocolErrors(v3 only) = %q", bad)
	}
}

func TestContainerdVersionFromGoMod(t *testing.T) {
	v, err := ContainerdVersion()
	if err != nil {
		t.Fatal(err)
	}
	if len(v) < 2 || v[0] != 'v' {
		t.Fatalf("ContainerdVersion = %q, want a module version like v2.4.2", v)
	}
}

func TestGCLabels(t *testing.T) {
	im, err := testimageSynthetic()
	if err != nil {
		t.Fatal(err)
	}
	var mb, ib []string
	for _, b := range im.Blobs {
		switch b.Desc.Digest {
		case im.Manifest.Digest:
			for k, v := range gcLabels(b.Children) {
				mb = append(mb, k+"="+v)
			}
		case im.Index.Digest:
			for k, v := range gcLabels(b.Children) {
				ib = append(ib, k+"="+v)
			}
		}
	}
	slices.Sort(mb)
	slices.Sort(ib)
	wantM := []string{
		"containerd.io/gc.ref.content.config=" + im.Config.Digest.String(),
		"containerd.io/gc.ref.content.l.0=" + im.Layers[0].Digest.String(),
	}
	wantI := []string{
		"containerd.io/gc.ref.content.m.0=" + im.Manifest.Digest.String(),
		"containerd.io/gc.ref.content.m.1=" + im.Other.Digest.String(),
	}
	slices.Sort(wantI)
	if !slices.Equal(mb, wantM) || !slices.Equal(ib, wantI) {
		t.Fatalf("manifest labels %v (want %v), index labels %v (want %v)", mb, wantM, ib, wantI)
	}
}

func testimageSynthetic() (*testimage.Image, error) {
	return testimage.Synthetic(testimage.HostPlatform(), "labels")
}

// TestRemoveDirTree: a namespace cgroup with a leftover child cgroup (a
// container's) is removed whole; a directory holding a file is kept.
func TestRemoveDirTree(t *testing.T) {
	root := t.TempDir()
	ns := filepath.Join(root, "sr-x-1")
	if err := os.MkdirAll(filepath.Join(ns, "ctr-1", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	removeDirTree(ns)
	if _, err := os.Stat(ns); !os.IsNotExist(err) {
		t.Fatalf("%s still there after removeDirTree (%v)", ns, err)
	}
	busy := filepath.Join(root, "sr-x-2")
	if err := os.MkdirAll(filepath.Join(busy, "ctr"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(busy, "ctr", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	removeDirTree(busy)
	if _, err := os.Stat(filepath.Join(busy, "ctr", "f")); err != nil {
		t.Fatalf("removeDirTree removed a directory holding a file: %v", err)
	}
}
