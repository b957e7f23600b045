package containerd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// emptySnapshotter has no snapshots and prepares any key (the rest of the
// interface is not called by one ApplyLayers of one layer).
type emptySnapshotter struct{ snapshots.Snapshotter }

func (emptySnapshotter) Stat(context.Context, string) (snapshots.Info, error) {
	return snapshots.Info{}, errdefs.ErrNotFound
}
func (emptySnapshotter) Prepare(context.Context, string, string, ...snapshots.Opt) ([]mount.Mount, error) {
	return nil, nil
}
func (emptySnapshotter) Remove(context.Context, string) error { return nil }

// extractsTo is a diff.Applier whose extraction computes diffID got.
type extractsTo struct{ got digest.Digest }

func (a extractsTo) Apply(context.Context, ocispec.Descriptor, []mount.Mount, ...diff.ApplyOpt) (ocispec.Descriptor, error) {
	return ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: a.got}, nil
}

// TestWrongDiffIDText pins containerd's text for a layer whose extraction
// computes another diffID (rootfs.ApplyLayers offers no sentinel), which
// isWrongDiffID reads: a containerd upgrade that changes it fails here.
func TestWrongDiffIDText(t *testing.T) {
	want, got := digest.FromString("recorded"), digest.FromString("extracted")
	layer := rootfs.Layer{
		Blob: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: digest.FromString("blob"), Size: 4},
		Diff: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: want},
	}
	_, err := rootfs.ApplyLayers(context.Background(), []rootfs.Layer{layer}, emptySnapshotter{}, extractsTo{got: got})
	if err == nil {
		t.Fatal("ApplyLayers accepted another diffID")
	}
	if text := fmt.Sprintf("%s %q", wrongDiffIDText, got); err.Error() != text {
		t.Errorf("ApplyLayers: %q, want %q (containerd changed its text: update wrongDiffIDText)", err, text)
	}
	if !isWrongDiffID(err) || !isWrongDiffID(fmt.Errorf("apply: %w", err)) {
		t.Errorf("isWrongDiffID(%v) = false", err)
	}
	// The same extraction with the recorded diffID is accepted, and other
	// failures are not read as a wrong diffID.
	if _, err := rootfs.ApplyLayers(context.Background(), []rootfs.Layer{layer}, committing{}, extractsTo{got: want}); err != nil {
		t.Fatalf("ApplyLayers with the right diffID: %v", err)
	}
	if isWrongDiffID(errors.New("failed to extract layer: no space left on device")) || isWrongDiffID(nil) {
		t.Error("isWrongDiffID accepts another error")
	}
}

// committing is emptySnapshotter that also commits.
type committing struct{ emptySnapshotter }

func (committing) Commit(context.Context, string, string, ...snapshots.Opt) error { return nil }
