package containerd

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestLayerEncoder: the build's layer encoder (klauspost by default,
// libzstd with -tags libzstd: make test runs both) writes one zstd frame
// that klauspost's decoder, the one materialize uses, reads back to the
// same bytes, with no frame checksum; it compresses text; Close twice is
// harmless; an error of the writer below reaches the caller.
func TestLayerEncoder(t *testing.T) {
	t.Logf("encoder: %s", layerEncoderName)
	rng := rand.New(rand.NewPCG(1, 2))
	var want bytes.Buffer
	for i := range 64 {
		p := make([]byte, 1+rng.IntN(200<<10))
		if i%2 == 0 {
			for k := range p {
				p[k] = byte(rng.Uint32())
			}
		} else {
			for k := range p {
				p[k] = "suspend resume layer "[k%21]
			}
		}
		want.Write(p)
	}
	var out bytes.Buffer
	zw, err := newLayerEncoder(&out)
	if err != nil {
		t.Fatal(err)
	}
	src := want.Bytes()
	for len(src) > 0 {
		n := min(len(src), 1+rng.IntN(3<<20))
		if k, err := zw.Write(src[:n]); k != n || err != nil {
			t.Fatalf("Write = %d, %v", k, err)
		}
		src = src[n:]
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if out.Len() >= want.Len()*3/4 {
		t.Fatalf("%d bytes compressed to %d", want.Len(), out.Len())
	}
	// Frame header descriptor (after the 4-byte magic): bit 2 is the
	// content checksum flag.
	if out.Len() < 5 || out.Bytes()[4]&0x04 != 0 {
		t.Fatalf("frame header % x: want no content checksum", out.Bytes()[:min(out.Len(), 8)])
	}
	dec, err := zstd.NewReader(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	got, err := io.ReadAll(dec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("decoded %d bytes, want %d (or different)", len(got), want.Len())
	}

	boom := errors.New("ingest gone")
	zw, err = newLayerEncoder(&recordWriter{failAt: 0, failErr: boom})
	if err != nil {
		t.Fatal(err)
	}
	_, werr := zw.Write(want.Bytes()[:4<<20])
	cerr := zw.Close()
	if !errors.Is(werr, boom) && !errors.Is(cerr, boom) {
		t.Fatalf("Write: %v, Close: %v; want %v from one of them", werr, cerr, boom)
	}
}
