//go:build cgo && libzstd

package containerd

import (
	"io"

	czstd "github.com/DataDog/zstd"
)

// layerEncoderName names the zstd encoder storeLayer uses in this build
// (-tags libzstd with cgo: the reference C library, libzstd, at level 1).
const layerEncoderName = "libzstd level 1 (cgo)"

// newLayerEncoder returns the zstd encoder of suspend's layer, writing one
// frame to w; Close ends the frame and frees the encoder. This build
// (opt-in: `make build TAGS=libzstd`, cgo) uses the reference C library
// (libzstd, vendored by github.com/DataDog/zstd) at level 1, as `zstd -1`
// does: on the layers suspend writes it costs about two thirds of the CPU
// of klauspost's SpeedFastest (docs/dev/perf-bulk.md "1. Suspend"). It is
// not the default because linking C code makes Go link externally, and
// every process of that binary — `manifest` and `resume --check` too —
// then maps ≈ 7 MiB more (peak RSS 29 MB against 22 MB, over the 25 MB
// goal). Without the tag, zstdenc_go.go uses klauspost's encoder. Either
// way the frame has no checksum (the layer's digest and diffID cover
// every byte) and any zstd decoder reads it.
func newLayerEncoder(w io.Writer) (io.WriteCloser, error) {
	return &cEncoder{w: czstd.NewWriterLevel(w, 1)}, nil
}

// cEncoder makes Close idempotent: the binding's Close frees the C
// encoder, and a second one would use it after the free. (When libzstd
// itself reports an error, which a valid level and enough memory never
// cause, the binding keeps the encoder: it is not freed.)
type cEncoder struct {
	w      *czstd.Writer
	closed bool
}

func (e *cEncoder) Write(p []byte) (int, error) { return e.w.Write(p) }

func (e *cEncoder) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	return e.w.Close()
}
