package snapshot

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
)

// ErrDiffCorrupt is wrapped by VerifyDiff when a stored rootfs diff blob
// does not match the verified ref that records it: another size or digest,
// a decompression that fails, exceeds uncompressedSize, or hashes to
// another diffID. Its class is "snapshot-missing" (internal/exitcode);
// migrate reports it inside a refused artifact.
var ErrDiffCorrupt = errdef.New(errdef.ErrSnapshotMissing, "rootfs diff corrupt")

// Blob is a stored blob as VerifyDiff reads it: random access to its bytes
// and the size in bytes its store reports. containerd's content.ReaderAt
// and *bytes.Reader are Blobs.
type Blob interface {
	io.ReaderAt
	Size() int64
}

// verifyBufferSize is how much of the blob VerifyDiff reads at a time
// (1 MiB: each ReadAt of containerd's content store is a round trip).
const verifyBufferSize = 1 << 20

// Magic numbers VerifyDiff recognizes (the ones containerd's
// archive/compression.DetectCompression recognizes): gzip (RFC 1952 with
// deflate), a zstd frame and a zstd skippable frame (RFC 8878 §3).
var (
	gzipMagic = []byte{0x1f, 0x8b, 0x08}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

const (
	zstdSkippableStart = 0x184d2a50
	zstdSkippableMask  = 0xfffffff0
)

// VerifyDiff is the full layer verifier of sandbox-resume (docs/design.md
// "Moving runs", "Materialize"): migration (import, pull) and every fake
// call it; materialize on containerd calls VerifyLayerBlob instead and
// leaves the diffID to the daemon's apply. It streams blob once and checks
// it against d, taken from a verified ref:
//
//   - the store's size of the blob is d.Size (checked before reading);
//   - its decompression — gzip, zstd or none, chosen by the blob's magic
//     number as containerd's diff applier chooses it — is stopped as soon
//     as it would exceed d.UncompressedSize bytes, so a decompression bomb
//     costs no more than the recorded size;
//   - every byte of the blob was read and its sha256 is d.Digest;
//   - the decompressed bytes are exactly d.UncompressedSize long and their
//     sha256 is d.DiffID.
//
// A mismatch is an error wrapping ErrDiffCorrupt that names the blob's
// digest and both values. An error reading blob is returned as it is,
// wrapped with the digest (it is not a mismatch).
func VerifyDiff(blob Blob, d Layer) error {
	if blob.Size() != d.Size {
		return fmt.Errorf("layer %s: %d bytes, the ref records %d: %w", d.Digest, blob.Size(), d.Size, ErrDiffCorrupt)
	}
	src := &readErrors{r: io.NewSectionReader(blob, 0, d.Size)}
	blobHash := digest.SHA256.Digester()
	rd := readBuffer(io.TeeReader(src, blobHash.Hash()))
	defer putReadBuffer(rd)
	dr, closeDR, err := decompress(rd)
	if err != nil {
		if src.err != nil {
			return fmt.Errorf("layer %s: read: %w", d.Digest, src.err)
		}
		return fmt.Errorf("layer %s: decompress: %v: %w", d.Digest, err, ErrDiffCorrupt)
	}
	defer closeDR()
	tarHash := digest.SHA256.Digester()
	n, err := io.Copy(&boundedWriter{w: tarHash.Hash(), left: d.UncompressedSize}, dr)
	switch {
	case src.err != nil:
		return fmt.Errorf("layer %s: read: %w", d.Digest, src.err)
	case errors.Is(err, errTooLong):
		return fmt.Errorf("layer %s decompresses to more than the recorded uncompressedSize %d bytes: %w", d.Digest, d.UncompressedSize, ErrDiffCorrupt)
	case err != nil:
		return fmt.Errorf("layer %s: decompress: %v: %w", d.Digest, err, ErrDiffCorrupt)
	}
	// Read what the decompressor left of the blob, so its digest covers it all.
	if _, err := io.Copy(io.Discard, rd); err != nil {
		return fmt.Errorf("layer %s: read: %w", d.Digest, err)
	}
	if got := blobHash.Digest(); got != d.Digest {
		return fmt.Errorf("layer blob has digest %s, the ref records %s: %w", got, d.Digest, ErrDiffCorrupt)
	}
	if n != d.UncompressedSize {
		return fmt.Errorf("layer %s decompresses to %d bytes, the ref records uncompressedSize %d: %w", d.Digest, n, d.UncompressedSize, ErrDiffCorrupt)
	}
	if got := tarHash.Digest(); got != d.DiffID {
		return fmt.Errorf("layer %s decompresses to diffID %s, the ref records %s: %w", d.Digest, got, d.DiffID, ErrDiffCorrupt)
	}
	return nil
}

// VerifyLayerBlob is the check of a stored layer blob that decompresses
// nothing (docs/design.md "Materialize"): the store's size of blob is
// d.Size (checked before reading), and every byte of it, read once, has
// the sha256 d.Digest. It leaves the diffID and uncompressedSize to the
// one who decompresses: resume calls it before containerd's apply, which
// checks the diffID of what it extracts before it commits. A mismatch is
// an error wrapping ErrDiffCorrupt that names the digest; an error reading
// blob is returned as it is, wrapped with the digest.
func VerifyLayerBlob(blob Blob, d Layer) error {
	if blob.Size() != d.Size {
		return fmt.Errorf("layer %s: %d bytes, the ref records %d: %w", d.Digest, blob.Size(), d.Size, ErrDiffCorrupt)
	}
	h := digest.SHA256.Digester()
	buf := make([]byte, verifyBufferSize)
	if _, err := io.CopyBuffer(h.Hash(), io.NewSectionReader(blob, 0, d.Size), buf); err != nil {
		return fmt.Errorf("layer %s: read: %w", d.Digest, err)
	}
	if got := h.Digest(); got != d.Digest {
		return fmt.Errorf("layer blob has digest %s, the ref records %s: %w", got, d.Digest, ErrDiffCorrupt)
	}
	return nil
}

// decompress returns a reader of the decompressed stream of rd, chosen by
// its magic number (uncompressed when there is none), and its closer.
func decompress(rd *bufio.Reader) (io.Reader, func(), error) {
	head, err := rd.Peek(8)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { zr.Close() }, nil
	case bytes.HasPrefix(head, zstdMagic),
		len(head) == 8 && binary.LittleEndian.Uint32(head[:4])&zstdSkippableMask == zstdSkippableStart:
		zr, err := zstdDecoder(rd)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { putZstdDecoder(zr) }, nil
	}
	return rd, func() {}, nil
}

// readBuffers holds the verifyBufferSize read buffers of VerifyDiff
// between layers (a *bufio.Reader each).
var readBuffers sync.Pool

// readBuffer returns a verifyBufferSize buffered reader of r.
func readBuffer(r io.Reader) *bufio.Reader {
	if rd, ok := readBuffers.Get().(*bufio.Reader); ok {
		rd.Reset(r)
		return rd
	}
	return bufio.NewReaderSize(r, verifyBufferSize)
}

// putReadBuffer drops rd's reader and keeps rd for the next layer.
func putReadBuffer(rd *bufio.Reader) {
	rd.Reset(nil)
	readBuffers.Put(rd)
}

// zstdDecoders holds zstd decoders between layers: making one (with
// WithDecoderLowmem(false), its buffers allocated up front) costs more CPU
// than verifying a small layer, and bulk verification (import of many
// layers) makes one per layer.
var zstdDecoders sync.Pool

// zstdDecoder returns a decoder of rd, from zstdDecoders when one is
// there.
func zstdDecoder(rd io.Reader) (*zstd.Decoder, error) {
	if zr, ok := zstdDecoders.Get().(*zstd.Decoder); ok {
		if err := zr.Reset(rd); err == nil {
			return zr, nil
		}
		zr.Close()
	}
	return zstd.NewReader(rd, zstd.WithDecoderLowmem(false))
}

// putZstdDecoder releases the stream zr decoded (Reset(nil) stops its
// goroutines and drops the reference) and keeps zr for the next layer; a
// decoder that cannot be reset is closed instead.
func putZstdDecoder(zr *zstd.Decoder) {
	if err := zr.Reset(nil); err != nil {
		zr.Close()
		return
	}
	zstdDecoders.Put(zr)
}

// readErrors remembers the first error of r other than io.EOF, so that a
// failing store is not mistaken for a corrupt blob.
type readErrors struct {
	r   io.Reader
	err error
}

func (e *readErrors) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && e.err == nil {
		e.err = err
	}
	return n, err
}

// errTooLong stops a decompression at the recorded size.
var errTooLong = errors.New("decompressed beyond uncompressedSize")

// boundedWriter passes on at most left bytes, then fails with errTooLong.
type boundedWriter struct {
	w    io.Writer
	left int64
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > b.left {
		return 0, errTooLong
	}
	b.left -= int64(len(p))
	return b.w.Write(p)
}
