package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// layerOf returns a blob compressing raw with how ("zstd", "gzip", "none")
// and its Layer.
func layerOf(t *testing.T, raw []byte, how string) ([]byte, Layer) {
	t.Helper()
	var buf bytes.Buffer
	mt := ocispec.MediaTypeImageLayer
	switch how {
	case "zstd":
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(raw)
		w.Close()
		mt = ocispec.MediaTypeImageLayerZstd
	case "gzip":
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		w.Close()
		mt = ocispec.MediaTypeImageLayerGzip
	default:
		buf.Write(raw)
	}
	b := buf.Bytes()
	return b, Layer{MediaType: mt, Digest: digest.FromBytes(b), Size: int64(len(b)), DiffID: digest.FromBytes(raw), UncompressedSize: int64(len(raw))}
}

// failingBlob fails every read after the first off bytes.
type failingBlob struct {
	*bytes.Reader
	off int64
}

func (f failingBlob) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.off {
		return 0, errors.New("store went away")
	}
	return f.Reader.ReadAt(p, off)
}

// TestVerifyDiff checks every rule of the layer verifier against blobs
// made here, for each compression it reads.
func TestVerifyDiff(t *testing.T) {
	raw := []byte(strings.Repeat("a tar, more or less; ", 5000))
	for _, how := range []string{"zstd", "gzip", "none"} {
		t.Run(how, func(t *testing.T) {
			blob, d := layerOf(t, raw, how)
			if err := VerifyDiff(bytes.NewReader(blob), d); err != nil {
				t.Fatalf("good blob: %v", err)
			}
			flipped := append([]byte(nil), blob...)
			flipped[len(flipped)/2] ^= 0x40
			otherRaw := append([]byte(nil), raw...)
			otherRaw[0] = 'A'
			cases := map[string]struct {
				blob []byte
				d    Layer
				want string
			}{
				"size":                   {blob[:len(blob)-1], d, "bytes, the ref records"},
				"digest":                 {blob, with(d, func(d *Layer) { d.Digest = digest.FromString("x") }), "has digest"},
				"a flipped byte":         {flipped, d, ""},
				"diffID":                 {blob, with(d, func(d *Layer) { d.DiffID = digest.FromBytes(otherRaw) }), "diffID"},
				"shorter than recorded":  {blob, with(d, func(d *Layer) { d.UncompressedSize++ }), "uncompressedSize"},
				"longer than recorded":   {blob, with(d, func(d *Layer) { d.UncompressedSize-- }), "more than the recorded uncompressedSize"},
				"nothing may decompress": {blob, with(d, func(d *Layer) { d.UncompressedSize = 0 }), "more than the recorded uncompressedSize"},
			}
			for name, tc := range cases {
				err := VerifyDiff(bytes.NewReader(tc.blob), tc.d)
				if !errors.Is(err, ErrDiffCorrupt) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.d.Digest.String()) {
					t.Errorf("%s: %v, want ErrDiffCorrupt mentioning %q and the digest", name, err, tc.want)
				}
			}
			// A store that fails mid-read is not a corrupt blob.
			err := VerifyDiff(failingBlob{bytes.NewReader(blob), int64(len(blob) / 2)}, d)
			if err == nil || errors.Is(err, ErrDiffCorrupt) || !strings.Contains(err.Error(), "store went away") {
				t.Errorf("failing store: %v, want its read error, not ErrDiffCorrupt", err)
			}
		})
	}
}

// TestVerifyDiffBomb: a zstd bomb (a small blob of a huge decompression)
// is stopped at the recorded size, not read to its end.
func TestVerifyDiffBomb(t *testing.T) {
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 1<<20)
	for i := 0; i < 256; i++ { // 256 MiB of zeros
		w.Write(zero)
	}
	w.Close()
	b := buf.Bytes()
	d := Layer{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: digest.FromBytes(b), Size: int64(len(b)), DiffID: digest.FromString("x"), UncompressedSize: 1 << 20}
	counting := &countingBlob{Reader: bytes.NewReader(b)}
	err = VerifyDiff(counting, d)
	if !errors.Is(err, ErrDiffCorrupt) || !strings.Contains(err.Error(), "more than the recorded uncompressedSize") {
		t.Fatalf("bomb: %v", err)
	}
	if counting.n >= int64(len(b)) && len(b) > 2*verifyBufferSize {
		t.Errorf("read all %d bytes of the bomb", counting.n)
	}
}

type countingBlob struct {
	*bytes.Reader
	n int64
}

func (c *countingBlob) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.Reader.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

func with(d Layer, f func(*Layer)) Layer { f(&d); return d }

var _ io.ReaderAt = failingBlob{}

// TestVerifyLayerBlob: the check without decompression refuses another
// size, a flipped byte and another digest, passes a blob whose diffID or
// uncompressedSize is wrong (those are the applier's to check), and does
// not take a failing store for a corrupt blob.
func TestVerifyLayerBlob(t *testing.T) {
	raw := []byte(strings.Repeat("a tar, more or less; ", 5000))
	blob, d := layerOf(t, raw, "zstd")
	if err := VerifyLayerBlob(bytes.NewReader(blob), d); err != nil {
		t.Fatalf("good blob: %v", err)
	}
	for name, bad := range map[string]Layer{
		"diffID":           with(d, func(d *Layer) { d.DiffID = digest.FromString("x") }),
		"uncompressedSize": with(d, func(d *Layer) { d.UncompressedSize = 1 }),
	} {
		if err := VerifyLayerBlob(bytes.NewReader(blob), bad); err != nil {
			t.Errorf("%s changed: %v, want nil (not this check's)", name, err)
		}
	}
	flipped := append([]byte(nil), blob...)
	flipped[len(flipped)/2] ^= 0x40
	for name, tc := range map[string]struct {
		blob []byte
		d    Layer
		want string
	}{
		"size":           {blob[:len(blob)-1], d, "bytes, the ref records"},
		"digest":         {blob, with(d, func(d *Layer) { d.Digest = digest.FromString("x") }), "has digest"},
		"a flipped byte": {flipped, d, "has digest"},
	} {
		err := VerifyLayerBlob(bytes.NewReader(tc.blob), tc.d)
		if !errors.Is(err, ErrDiffCorrupt) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.d.Digest.String()) {
			t.Errorf("%s: %v, want ErrDiffCorrupt mentioning %q and the digest", name, err, tc.want)
		}
	}
	err := VerifyLayerBlob(failingBlob{bytes.NewReader(blob), int64(len(blob) / 2)}, d)
	if err == nil || errors.Is(err, ErrDiffCorrupt) || !strings.Contains(err.Error(), "store went away") {
		t.Errorf("failing store: %v, want its read error, not ErrDiffCorrupt", err)
	}
}

// TestVerifyDiffReusesDecoders: verifications one after another (so with
// decoders taken back from the pool, some abandoned mid-stream by a
// failure) give the same verdicts as the first.
func TestVerifyDiffReusesDecoders(t *testing.T) {
	a, da := layerOf(t, []byte(strings.Repeat("first layer; ", 4000)), "zstd")
	b, db := layerOf(t, []byte(strings.Repeat("second, other layer; ", 9000)), "zstd")
	short := with(db, func(d *Layer) { d.UncompressedSize = 100 })
	for i := range 20 {
		if err := VerifyDiff(bytes.NewReader(a), da); err != nil {
			t.Fatalf("round %d: first layer: %v", i, err)
		}
		if err := VerifyDiff(bytes.NewReader(b), short); !errors.Is(err, ErrDiffCorrupt) {
			t.Fatalf("round %d: bounded second layer: %v, want ErrDiffCorrupt", i, err)
		}
		if err := VerifyDiff(bytes.NewReader(b), db); err != nil {
			t.Fatalf("round %d: second layer: %v", i, err)
		}
		if err := VerifyDiff(bytes.NewReader(a), db); !errors.Is(err, ErrDiffCorrupt) {
			t.Fatalf("round %d: first blob as the second layer: %v, want ErrDiffCorrupt", i, err)
		}
	}
}

// BenchmarkVerifyDiffSmall is VerifyDiff of a 16 KiB zstd layer (a
// generation-2 diff of a few files): its fixed cost, the decoder's set-up,
// dominates. Compare with -count ≥ 6 before and after a change.
func BenchmarkVerifyDiffSmall(b *testing.B) {
	var raw bytes.Buffer
	for i := 0; raw.Len() < 16<<10; i++ {
		fmt.Fprintf(&raw, "line %d of a small changed file\n", i)
	}
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	if err != nil {
		b.Fatal(err)
	}
	w.Write(raw.Bytes())
	w.Close()
	blob := buf.Bytes()
	d := Layer{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: digest.FromBytes(blob), Size: int64(len(blob)), DiffID: digest.FromBytes(raw.Bytes()), UncompressedSize: int64(raw.Len())}
	b.ReportAllocs()
	for b.Loop() {
		if err := VerifyDiff(bytes.NewReader(blob), d); err != nil {
			b.Fatal(err)
		}
	}
}
