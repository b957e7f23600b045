package migrate

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"slices"
	"strings"
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

// allowedPAX are the PAX records an archive entry may carry
// (docs/design.md "Hardening", "Archives"): anything else — GNU.sparse.*
// (a sparse file, which archive/tar expands: a 2 KB entry becomes 256 MiB
// of zeros), SCHILY.xattr.*, linkpath, atime, ctime, comment, charset, … —
// is refused.
var allowedPAX = map[string]bool{"path": true, "size": true, "mtime": true, "uid": true, "gid": true, "uname": true, "gname": true}

// checkPAX refuses an entry that is a GNU sparse file (TypeGNUSparse, or
// GNU.sparse.* PAX records) or carries a PAX record outside allowedPAX,
// naming the entry and the record.
func checkPAX(hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return refused("archive entry %q: a GNU sparse file; an OCI layout archive holds regular files only", hdr.Name)
	}
	keys := make([]string, 0, len(hdr.PAXRecords))
	for k := range hdr.PAXRecords {
		if !allowedPAX[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	if i := slices.IndexFunc(keys, func(k string) bool { return strings.HasPrefix(k, "GNU.sparse.") }); i >= 0 {
		return refused("archive entry %q: a PAX sparse file (record %q); an OCI layout archive holds regular files only", hdr.Name, keys[i])
	}
	return refused("archive entry %q: PAX record %q; only path, size, mtime, uid, gid, uname and gname are allowed", hdr.Name, keys[0])
}

// ScanArchive is the import pre-scan of docs/design.md "Moving runs", run
// over the
// whole tar stream before anything of it is stored or trusted. Allowed are
// regular files named exactly "oci-layout", "index.json" or
// "blobs/sha256/<64 lowercase hex>", and the directory entries "blobs/" and
// "blobs/sha256/" that containerd's exporter writes — each also with a
// leading "./", as `tar -C DIR -cf run.tar .` writes them, beside its "./"
// entry. Refused, with an error wrapping ErrArtifactRefused that names the
// entry: any other name (a path traversal, an absolute name, "././x",
// another algorithm), any other type
// (symbolic and hard links, devices, FIFOs, global PAX headers, GNU sparse
// files), a PAX record other than path, size, mtime, uid, gid, uname and
// gname (checkPAX: GNU.sparse.* among them), a name seen
// twice (with or without "./"), a blob whose sha256 is not its name, an oci-layout that is not
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
		// One leading "./" is what tar writes for the members of ".";
		// names are compared without it.
		name := strings.TrimPrefix(hdr.Name, "./")
		if hdr.Typeflag == tar.TypeDir && (hdr.Name == "./" || hdr.Name == ".") {
			name = "./"
		}
		if seen[name] {
			return nil, refused("archive entry %q appears twice", hdr.Name)
		}
		if err := checkPAX(hdr); err != nil {
			return nil, err
		}
		seen[name] = true
		switch hdr.Typeflag {
		case tar.TypeDir:
			if name != "./" && name != "blobs/" && name != "blobs/sha256/" {
				return nil, refused("archive entry %q: a directory other than blobs/ and blobs/sha256/", hdr.Name)
			}
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			return nil, refused("archive entry %q: a link (to %q); an OCI layout archive holds regular files only", hdr.Name, hdr.Linkname)
		default:
			return nil, refused("archive entry %q: type %q; an OCI layout archive holds regular files only", hdr.Name, string(hdr.Typeflag))
		}
		if hdr.Size < 0 {
			return nil, refused("archive entry %q: negative size %d", hdr.Name, hdr.Size)
		}
		switch name {
		case ocispec.ImageLayoutFile, ocispec.ImageIndexFile:
			if hdr.Size > MaxArtifactMetadata {
				return nil, refused("archive entry %q: %d bytes, more than %d", hdr.Name, hdr.Size, MaxArtifactMetadata)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, refused("archive entry %q: %v", hdr.Name, err)
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
			return nil, refused("archive entry %q: only oci-layout, index.json and blobs/sha256/<64 lowercase hex> are allowed", hdr.Name)
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
			return nil, refused("archive entry %q: %v", hdr.Name, err)
		}
		if n != hdr.Size {
			return nil, refused("archive entry %q: %d bytes read, header says %d", hdr.Name, n, hdr.Size)
		}
		if got := h.Digest(); got != want {
			return nil, refused("archive entry %q: content has digest %s, not the %s its name says", hdr.Name, got, want)
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
