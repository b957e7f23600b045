//go:build !cgo || !libzstd

package containerd

import (
	"io"

	"github.com/klauspost/compress/zstd"
)

// layerEncoderName names the zstd encoder storeLayer uses in this build
// (the default: klauspost's pure-Go encoder at SpeedFastest).
const layerEncoderName = "klauspost SpeedFastest (pure Go)"

// newLayerEncoder returns the zstd encoder of suspend's layer, writing one
// frame to w; Close ends the frame. This build (the default) uses
// klauspost's encoder at SpeedFastest, about 1.25–1.6× the CPU of libzstd
// level 1, which `-tags libzstd` uses (zstdenc_libzstd.go, and why it is
// opt-in; docs/dev/perf-bulk.md "1. Suspend"). No frame checksum: the
// layer's digest and diffID cover every byte.
func newLayerEncoder(w io.Writer) (io.WriteCloser, error) {
	return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false))
}
