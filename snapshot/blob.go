package snapshot

import (
	"fmt"
	"io"

	"github.com/sandbox-resume/sandbox-resume/errdef"
)

// ErrBlobCorrupt is wrapped by ReadBlob when a stored blob that a verified
// ref records (its runtime spec) is not the recorded one: another size or
// another digest. Its class is "snapshot-missing" (internal/exitcode), as
// ErrDiffCorrupt's.
var ErrBlobCorrupt = errdef.New(errdef.ErrSnapshotMissing, "recorded blob corrupt")

// ReadBlob reads a stored blob that a verified ref records — its runtime
// spec (docs/design.md "Resume decision", check 9) — in one pass and
// returns its bytes, checking as it reads that the store's size of the
// blob is d.Size (before reading: no more than d.Size bytes are read) and
// that the bytes read have digest d.Digest. A mismatch is an error
// wrapping ErrBlobCorrupt naming the digest and both values; an error
// reading blob is returned as it is, wrapped with the digest. The real
// runtime and the fakes call it, so both verify alike.
func ReadBlob(blob Blob, d Descriptor) ([]byte, error) {
	if blob.Size() != d.Size {
		return nil, fmt.Errorf("blob %s: %d bytes, the ref records %d: %w", d.Digest, blob.Size(), d.Size, ErrBlobCorrupt)
	}
	if err := d.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("blob %q: %v: %w", d.Digest, err, ErrBlobCorrupt)
	}
	h := d.Digest.Algorithm().Digester()
	out := make([]byte, d.Size)
	n, err := io.ReadFull(io.NewSectionReader(blob, 0, d.Size), out)
	if err != nil {
		return nil, fmt.Errorf("blob %s: read %d of %d bytes: %w", d.Digest, n, d.Size, err)
	}
	h.Hash().Write(out)
	if got := h.Digest(); got != d.Digest {
		return nil, fmt.Errorf("blob %s: its %d bytes have digest %s: %w", d.Digest, d.Size, got, ErrBlobCorrupt)
	}
	return out, nil
}
