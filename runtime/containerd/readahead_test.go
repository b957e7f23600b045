package containerd

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// countingReaderAt is a content.ReaderAt over b counting ReadAt calls.
type countingReaderAt struct {
	b     []byte
	calls int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.calls++
	if off >= int64(len(c.b)) {
		return 0, io.EOF
	}
	n := copy(p, c.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (c *countingReaderAt) Size() int64  { return int64(len(c.b)) }
func (c *countingReaderAt) Close() error { return nil }

type oneBlob struct {
	content.InfoReaderProvider
	ra *countingReaderAt
}

func (o oneBlob) ReaderAt(context.Context, ocispec.Descriptor) (content.ReaderAt, error) {
	return o.ra, nil
}

// TestReadAhead: io.Copy through content.NewReader (as containerd's
// exporter reads a blob) returns the blob's exact bytes with one ReadAt of
// the content store per readBufferSize window, not one per 32 KiB.
func TestReadAhead(t *testing.T) {
	for _, size := range []int{0, 1, 32 << 10, readBufferSize, 3*readBufferSize + 12345} {
		blob := make([]byte, size)
		rng := rand.New(rand.NewPCG(uint64(size), 2))
		for i := range blob {
			blob[i] = byte(rng.Uint32())
		}
		inner := &countingReaderAt{b: blob}
		ra, err := readAheadProvider{oneBlob{ra: inner}}.ReaderAt(context.Background(), ocispec.Descriptor{Size: int64(size)})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if _, err := io.Copy(struct{ io.Writer }{&out}, content.NewReader(ra)); err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		if !bytes.Equal(out.Bytes(), blob) {
			t.Errorf("%d bytes: read back %d bytes, not the blob", size, out.Len())
		}
		if want := (size + readBufferSize - 1) / readBufferSize; inner.calls > want+1 {
			t.Errorf("%d bytes: %d reads of the content store, want ≤ %d", size, inner.calls, want+1)
		}
	}
}
