package migrate

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Archive is what ScanArchive found in an OCI layout archive: every blob
// (digest → size in bytes, each checked against its name), the bytes of
// index.json and of every blob of at most MaxArtifactMetadata bytes (while
// their total stays within 64 MiB), and the digest of index.json.
type Archive struct {
	Blobs       map[digest.Digest]int64
	Index       []byte
	IndexDigest digest.Digest
	small       map[digest.Digest][]byte
}

// Blob returns the bytes of a kept blob (see Archive) and whether it was
// kept.
func (a *Archive) Blob(d digest.Digest) ([]byte, bool) {
	b, ok := a.small[d]
	return b, ok
}

// blobNameRE is compiled on first use, not at process start.
var blobNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^blobs/sha256/([0-9a-f]{64})$`) })

// ScanArchive is the import pre-scan of docs/design.md "Moving runs", run
// over the
// whole tar stream before anything of it is stored or trusted. Allowed are
// regular files named exactly "oci-layout", "index.json" or
// "blobs/sha256/<64 lowercase hex>", and the directory entries "blobs/" and
// "blobs/sha256/" that containerd's exporter writes. Refused, with an error
// wrapping ErrArtifactRefused that names the entry: any other name (a path
// traversal, an absolute or "./" name, another algorithm), any other type
// (symbolic and hard links, devices, FIFOs, global PAX headers), a name seen
// twice, a blob whose sha256 is not its name, an oci-layout that is not
// {"imageLayoutVersion": "1.0.0"}, index.json or oci-layout missing or over
// MaxArtifactMetadata bytes, and a tar that does not parse.
func ScanArchive(r io.Reader) (*Archive, error) {
	tr := tar.NewReader(r)
	a := &Archive{Blobs: map[digest.Digest]int64{}, small: map[digest.Digest][]byte{}}
	seen := map[string]bool{}
	var layout []byte
	kept := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, refused("archive: not a readable tar after %d entries: %v", len(seen), err)
		}
		name := hdr.Name
		if seen[name] {
			return nil, refused("archive entry %q appears twice", name)
		}
		seen[name] = true
		switch hdr.Typeflag {
		case tar.TypeDir:
			if name != "blobs/" && name != "blobs/sha256/" {
				return nil, refused("archive entry %q: a directory other than blobs/ and blobs/sha256/", name)
			}
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			return nil, refused("archive entry %q: a link (to %q); an OCI layout archive holds regular files only", name, hdr.Linkname)
		default:
			return nil, refused("archive entry %q: type %q; an OCI layout archive holds regular files only", name, string(hdr.Typeflag))
		}
		if hdr.Size < 0 {
			return nil, refused("archive entry %q: negative size %d", name, hdr.Size)
		}
		switch name {
		case ocispec.ImageLayoutFile, ocispec.ImageIndexFile:
			if hdr.Size > MaxArtifactMetadata {
				return nil, refused("archive entry %q: %d bytes, more than %d", name, hdr.Size, MaxArtifactMetadata)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, refused("archive entry %q: %v", name, err)
			}
			if name == ocispec.ImageLayoutFile {
				layout = b
			} else {
				a.Index, a.IndexDigest = b, digest.FromBytes(b)
			}
			continue
		}
		m := blobNameRE().FindStringSubmatch(name)
		if m == nil {
			return nil, refused("archive entry %q: only oci-layout, index.json and blobs/sha256/<64 lowercase hex> are allowed", name)
		}
		want := digest.NewDigestFromEncoded(digest.SHA256, m[1])
		h := digest.SHA256.Digester()
		var buf *bytes.Buffer
		w := io.Writer(h.Hash())
		if hdr.Size <= MaxArtifactMetadata && kept+int(hdr.Size) <= maxKept {
			buf = bytes.NewBuffer(make([]byte, 0, hdr.Size))
			w = io.MultiWriter(w, buf)
		}
		n, err := io.Copy(w, tr)
		if err != nil {
			return nil, refused("archive entry %q: %v", name, err)
		}
		if n != hdr.Size {
			return nil, refused("archive entry %q: %d bytes read, header says %d", name, n, hdr.Size)
		}
		if got := h.Digest(); got != want {
			return nil, refused("archive entry %q: content has digest %s, not the %s its name says", name, got, want)
		}
		a.Blobs[want] = n
		if buf != nil {
			a.small[want] = buf.Bytes()
			kept += buf.Len()
		}
	}
	if layout == nil {
		return nil, refused("archive: no %s entry (not an OCI image layout)", ocispec.ImageLayoutFile)
	}
	var l ocispec.ImageLayout
	if err := json.Unmarshal(layout, &l); err != nil || l.Version != ocispec.ImageLayoutVersion {
		return nil, refused("archive entry %s: not {\"imageLayoutVersion\": %q}", ocispec.ImageLayoutFile, ocispec.ImageLayoutVersion)
	}
	if a.Index == nil {
		return nil, refused("archive: no %s entry", ocispec.ImageIndexFile)
	}
	return a, nil
}
