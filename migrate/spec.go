package migrate

import (
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ArchiveSpec reads the recorded runtime spec blob d of a ref from a
// migration archive r without storing anything (`inspect --archive`,
// docs/design.md "Repin and fork"): the archive passes the import
// pre-scan (ScanArchive, whose refusals wrap ErrArtifactRefused), and the
// blob must be in it with d's size (the pre-scan checked its digest
// against its name). A spec the archive does not hold wraps
// errdef.ErrSnapshotMissing; another size wraps snapshot.ErrBlobCorrupt.
func ArchiveSpec(r io.Reader, d snapshot.Descriptor) ([]byte, error) {
	if err := d.Digest.Validate(); err != nil || d.Digest.Algorithm() != digest.SHA256 {
		return nil, fmt.Errorf("spec blob %q: not a sha256 digest: %w", d.Digest, snapshot.ErrBlobCorrupt)
	}
	a, err := ScanArchive(r)
	if err != nil {
		return nil, err
	}
	size, ok := a.Blobs[d.Digest]
	if !ok {
		return nil, fmt.Errorf("spec blob %s is not in the archive: %w", d.Digest, errdef.ErrSnapshotMissing)
	}
	if size != d.Size {
		return nil, fmt.Errorf("spec blob %s: %d bytes in the archive, the ref records %d: %w", d.Digest, size, d.Size, snapshot.ErrBlobCorrupt)
	}
	b, ok := a.Blob(d.Digest)
	if !ok {
		return nil, fmt.Errorf("spec blob %s: %d bytes, more than the archive's metadata limit: %w", d.Digest, size, snapshot.ErrBlobCorrupt)
	}
	return b, nil
}
