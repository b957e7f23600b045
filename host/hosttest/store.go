package hosttest

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
)

// RunStore runs the part of the suite migrate relies on (migrate.Store):
// image names (never re-pointed), blobs written under a lease and read
// back (ReadBlob, BlobSize, OpenBlob), a temporary lease whose release
// removes what only it held, and an OCI image layout archive written from
// the store and imported back. newFacts gives the hosts (its fixture
// stores the test images).
func RunStore(t *testing.T, newFacts NewFacts) {
	t.Run("ImageNames", func(t *testing.T) {
		h, fx := newFacts(t)
		im := build(t, fx, "store-names")
		name := fmt.Sprintf("example.test/sr/named-%d:1", time.Now().UnixNano())
		if _, err := h.ImageTarget(ctx(t), name); !errdefs.IsNotFound(err) {
			t.Fatalf("ImageTarget(absent) = %v, want NotFound", err)
		}
		if err := h.CreateImage(ctx(t), name, im.Manifest); err != nil {
			t.Fatalf("CreateImage: %v", err)
		}
		got, err := h.ImageTarget(ctx(t), name)
		if err != nil || got.Digest != im.Manifest.Digest {
			t.Fatalf("ImageTarget = %v, %v; want %s", got.Digest, err, im.Manifest.Digest)
		}
		if err := h.CreateImage(ctx(t), name, im.Index); !errdefs.IsAlreadyExists(err) {
			t.Fatalf("CreateImage of an existing name = %v, want AlreadyExists", err)
		}
		if got, _ := h.ImageTarget(ctx(t), name); got.Digest != im.Manifest.Digest {
			t.Fatalf("an existing name was re-pointed at %s", got.Digest)
		}
	})

	t.Run("WriteAndRead", func(t *testing.T) {
		h, _ := newFacts(t)
		lease := fmt.Sprintf("sandbox-resume.run/store-%d", time.Now().UnixNano())
		if err := h.CreateLease(ctx(t), lease, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.DeleteLease(ctx(t), lease) })
		data := fmt.Appendf(nil, "a blob of the store suite %d\n", time.Now().UnixNano())
		for range 2 { // a blob that exists already is not an error
			desc, err := h.WriteBlob(ctx(t), lease, "store-suite", "application/octet-stream", data)
			if err != nil {
				t.Fatalf("WriteBlob: %v", err)
			}
			if desc.Digest != digest.FromBytes(data) || desc.Size != int64(len(data)) || desc.MediaType != "application/octet-stream" {
				t.Fatalf("WriteBlob = %+v", desc)
			}
		}
		d := digest.FromBytes(data)
		if got, err := h.ReadBlob(ctx(t), d); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadBlob = %q, %v", got, err)
		}
		if n, err := h.BlobSize(ctx(t), d); err != nil || n != int64(len(data)) {
			t.Fatalf("BlobSize = %d, %v; want %d", n, err, len(data))
		}
		b, err := h.OpenBlob(ctx(t), ocispec.Descriptor{Digest: d, Size: int64(len(data))})
		if err != nil {
			t.Fatalf("OpenBlob: %v", err)
		}
		got, err := io.ReadAll(io.NewSectionReader(b, 0, int64(len(data))))
		b.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("OpenBlob read %q, %v", got, err)
		}
		if err := h.AddToLease(ctx(t), lease, d, d); err != nil {
			t.Fatalf("AddToLease (twice the same blob): %v", err)
		}
		absent := digest.FromString("sandbox-resume store suite: absent")
		if _, err := h.ReadBlob(ctx(t), absent); !errdefs.IsNotFound(err) {
			t.Fatalf("ReadBlob(absent) = %v, want NotFound", err)
		}
		if _, err := h.OpenBlob(ctx(t), ocispec.Descriptor{Digest: absent}); !errdefs.IsNotFound(err) {
			t.Fatalf("OpenBlob(absent) = %v, want NotFound", err)
		}
		if err := h.CreateLease(ctx(t), lease, nil); !errdefs.IsAlreadyExists(err) {
			t.Fatalf("CreateLease of an existing lease = %v, want AlreadyExists", err)
		}
	})

	t.Run("TempLease", func(t *testing.T) {
		h, _ := newFacts(t)
		id, release, err := h.TempLease(ctx(t))
		if err != nil {
			t.Fatalf("TempLease: %v", err)
		}
		data := fmt.Appendf(nil, "held by a temporary lease only %d\n", time.Now().UnixNano())
		if _, err := h.WriteBlob(ctx(t), id, "temp-suite", "application/octet-stream", data); err != nil {
			t.Fatalf("WriteBlob under the temporary lease: %v", err)
		}
		if _, err := h.BlobSize(ctx(t), digest.FromBytes(data)); err != nil {
			t.Fatalf("BlobSize before release: %v", err)
		}
		release()
		if _, err := h.BlobSize(ctx(t), digest.FromBytes(data)); !errdefs.IsNotFound(err) {
			t.Fatalf("BlobSize after release = %v, want NotFound (the content only the lease held is gone)", err)
		}
	})

	t.Run("Archive", func(t *testing.T) {
		h, fx := newFacts(t)
		im := build(t, fx, "store-archive")
		const name = "example.test/sr/archived:1"
		var buf bytes.Buffer
		if err := h.WriteArchive(ctx(t), &buf, host.ArchiveEntry{Desc: im.Manifest, Name: name}); err != nil {
			t.Fatalf("WriteArchive: %v", err)
		}
		files := map[string][]byte{}
		tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("archive: %v", err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if hdr.Typeflag == tar.TypeReg {
				files[hdr.Name] = b
			}
		}
		if _, ok := files["manifest.json"]; ok {
			t.Error("the archive holds a Docker manifest.json")
		}
		if _, ok := files[ocispec.ImageLayoutFile]; !ok {
			t.Errorf("the archive holds no %s", ocispec.ImageLayoutFile)
		}
		want := []digest.Digest{im.Manifest.Digest, im.Config.Digest}
		for _, l := range im.Layers {
			want = append(want, l.Digest)
		}
		var got []digest.Digest
		for n, b := range files {
			if enc, ok := strings.CutPrefix(n, "blobs/sha256/"); ok {
				d := digest.NewDigestFromEncoded(digest.SHA256, enc)
				if digest.FromBytes(b) != d {
					t.Errorf("archive blob %s holds bytes with digest %s", n, digest.FromBytes(b))
				}
				got = append(got, d)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("archive blobs %v, want the manifest, config and layers %v", got, want)
		}
		var idx ocispec.Index
		if err := json.Unmarshal(files[ocispec.ImageIndexFile], &idx); err != nil || len(idx.Manifests) != 1 ||
			idx.Manifests[0].Digest != im.Manifest.Digest || idx.Manifests[0].Annotations[ocispec.AnnotationRefName] == "" {
			t.Fatalf("index.json %s (%v): want one manifest %s with a ref name", files[ocispec.ImageIndexFile], err, im.Manifest.Digest)
		}
		lease, release, err := h.TempLease(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		d, err := h.ImportArchive(ctx(t), lease, bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("ImportArchive: %v", err)
		}
		if d != digest.FromBytes(files[ocispec.ImageIndexFile]) {
			t.Fatalf("ImportArchive = %s, want the digest of index.json %s", d, digest.FromBytes(files[ocispec.ImageIndexFile]))
		}
		for _, w := range want {
			if _, err := h.BlobSize(ctx(t), w); err != nil {
				t.Errorf("after import: blob %s: %v", w, err)
			}
		}
	})
}
