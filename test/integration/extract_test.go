package integration

import (
	"archive/tar"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// TestExtractionRefusedIsSnapshotMissing: docs/design.md "Hardening": a
// layer whose blob verifies (digest, size, diffID, uncompressedSize) but
// that containerd refuses to extract — here a hard link to a file the
// layer and its parent lack — is content corrupt (snapshot.ErrDiffCorrupt:
// check 9, exit 7), not an internal error (1) an orchestrator would retry
// forever.
func TestExtractionRefusedIsSnapshotMissing(t *testing.T) {
	d := harness.Start(t, "extract")
	bb := harness.ImportBusybox(t, d, "busybox:1")
	rt := d.Connect(t, "")
	base, err := rt.ResolveImage(ctx(t), bb.Name)
	if err != nil {
		t.Fatal(err)
	}
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	if err := tw.WriteHeader(&tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "no/such/target", Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	var blob bytes.Buffer
	zw, err := compression.CompressStream(&blob, compression.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(tarBuf.Bytes())
	zw.Close()
	const run = "extract-1"
	writeDiff(t, d, d.Namespace, run, blob.Bytes())
	layer := snapshot.Layer{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: digest.FromBytes(blob.Bytes()), Size: int64(blob.Len()),
		DiffID: digest.FromBytes(tarBuf.Bytes()), UncompressedSize: int64(tarBuf.Len())}
	err = rt.CreateContainer(ctx(t), host.ContainerSpec{
		ID: d.ID("extract"), Run: run, Manifest: "blake3:" + strings.Repeat("0", 64), Generation: 1, Ref: digest.FromString("ref"), Fence: 1,
		Base: base, Layers: []snapshot.Layer{layer}, Runtime: snapshot.Runtime{Name: host.DefaultRuntime},
	})
	if !errors.Is(err, snapshot.ErrDiffCorrupt) || !strings.Contains(err.Error(), "refused to extract") {
		t.Fatalf("CreateContainer over a verified layer containerd cannot extract: %v, want ErrDiffCorrupt (content corrupt)", err)
	}
	t.Logf("refused: %v", err)
}
