package integration

import (
	"bytes"
	"io"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// TestBlobReadsStayInNamespace: bulk reads go to the blob files of the
// daemon's content store when this process sees them (runtime/containerd
// localcontent.go), but only for blobs the daemon reports in the
// namespace: a blob another namespace stored, whose file is right there,
// is not found, and one of this namespace reads back byte for byte.
func TestBlobReadsStayInNamespace(t *testing.T) {
	d := harness.Start(t, "localblobs")
	other := d.NewNamespace()
	mine, theirs := d.Connect(t, ""), d.Connect(t, other)
	ctx := d.Context(t)
	data := bytes.Repeat([]byte("only in the other namespace\n"), 10000)
	lease := snapshot.RunLease("localblobs")
	if err := theirs.CreateLease(nsCtx(t, other), lease, nil); err != nil {
		t.Fatal(err)
	}
	desc, err := theirs.WriteBlob(nsCtx(t, other), lease, "localblobs", ocispec.MediaTypeImageLayer, data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mine.OpenBlob(ctx, desc); !errdefs.IsNotFound(err) {
		t.Fatalf("OpenBlob of another namespace's blob: %v, want not found", err)
	}
	b, err := theirs.OpenBlob(nsCtx(t, other), desc)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := io.ReadAll(io.NewSectionReader(b, 0, b.Size()))
	if err != nil {
		t.Fatal(err)
	}
	if digest.FromBytes(got) != desc.Digest {
		t.Fatalf("read back %d bytes with digest %s, want %s", len(got), digest.FromBytes(got), desc.Digest)
	}
}
