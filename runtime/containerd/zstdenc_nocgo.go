//go:build !cgo

package containerd

import (
	"io"

	"github.com/klauspost/compress/zstd"
)

// layerEncoderName names the zstd encoder storeLayer uses in this build
// (CGO_ENABLED=0: klauspost's pure-Go encoder at SpeedFastest).
const layerEncoderName = "klauspost SpeedFastest (pure Go)"

// newLayerEncoder returns the zstd encoder of suspend's layer, writing one
// frame to w; Close ends the frame. This build (no cgo) uses klauspost's
// encoder at SpeedFastest, about 1.25–1.6× the CPU of libzstd level 1,
// which the cgo build uses (zstdenc_cgo.go; docs/dev/perf-bulk.md
// "1. Suspend"). No frame checksum: the layer's digest and diffID cover
// every byte.
func newLayerEncoder(w io.Writer) (io.WriteCloser, error) {
	return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false))
}
