package migrate

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// paxSparseEntry returns the bytes of a GNU PAX sparse (format 1.0) tar
// entry named name whose expanded content is size zero bytes, as GNU tar
// writes it: an 'x' header with GNU.sparse.* records, then a regular
// header whose data is the sparse map (one hole). archive/tar cannot
// write one, so the 'x' header is a regular header patched.
func paxSparseEntry(t *testing.T, name string, size int64) []byte {
	t.Helper()
	rec := func(k, v string) string {
		l := len(k) + len(v) + 3
		for n := len(strconv.Itoa(l)); len(strconv.Itoa(l+n)) != n; n++ {
		}
		l += len(strconv.Itoa(l + len(strconv.Itoa(l))))
		return fmt.Sprintf("%d %s=%s\n", l, k, v)
	}
	pax := rec("GNU.sparse.major", "1") + rec("GNU.sparse.minor", "0") + rec("GNU.sparse.name", name) + rec("GNU.sparse.realsize", strconv.FormatInt(size, 10))
	smap := []byte(fmt.Sprintf("1\n%d\n0\n", size))
	smap = append(smap, make([]byte, 512-len(smap))...)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name string
		data []byte
	}{{"PaxHeaders/x", []byte(pax)}, {"GNUSparseFile.0/x", smap}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.data)), Format: tar.FormatUSTAR}); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.data)
	}
	tw.Flush() // no end-of-archive blocks: the caller appends
	b := buf.Bytes()
	b[156] = 'x' // the first header's type: a PAX extended header
	sum := 0
	copy(b[148:156], "        ")
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// TestScanArchiveRefusesPAX: docs/design.md "Hardening", "Archives": a PAX
// sparse entry (measured: a 2 KB entry made import write 256 MiB into the
// content store, exit 0), an old GNU sparse entry and any PAX record beyond
// path, size, mtime, uid, gid, uname and gname are refused by the
// pre-scan, before anything is stored.
func TestScanArchiveRefusesPAX(t *testing.T) {
	es, trust, _ := goodArchive(t)
	good := buildTar(t, es)
	body := good[:len(good)-1024] // without the two end-of-archive blocks

	const size = 1 << 20
	zeros := make([]byte, size)
	sparse := paxSparseEntry(t, "blobs/sha256/"+digest.FromBytes(zeros).Encoded(), size)
	if len(sparse) > 2048 {
		t.Fatalf("the sparse entry is %d bytes", len(sparse))
	}
	archive := append(append(append([]byte(nil), body...), sparse...), make([]byte, 1024)...)
	a, err := ScanArchive(bytes.NewReader(archive))
	if !errors.Is(err, ErrArtifactRefused) || !strings.Contains(err.Error(), "sparse") {
		n := 0
		if a != nil {
			n = len(a.Blobs)
			_, err = CheckArchive(a, trust)
		}
		t.Fatalf("a PAX sparse entry of %d bytes expanding to %d: ScanArchive kept %d blobs, then %v; want a sparse refusal", len(sparse), size, n, err)
	}

	for rec, edit := range map[string]func(h *tar.Header){
		"SCHILY.xattr.user.x": func(h *tar.Header) { h.PAXRecords = map[string]string{"SCHILY.xattr.user.x": "1"} },
		"comment":             func(h *tar.Header) { h.PAXRecords = map[string]string{"comment": "hello"} },
		"atime":               func(h *tar.Header) { h.AccessTime = time.Unix(1700000000, 5) },
		"linkpath":            func(h *tar.Header) { h.Linkname = "/" + strings.Repeat("x/", 60) },
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for i, e := range es {
			h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.data))}
			if e.typ != tar.TypeReg {
				h.Size = 0
			}
			if i == 2 {
				edit(h)
				h.Format = tar.FormatPAX
			}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			tw.Write(e.data)
		}
		tw.Close()
		_, err := ScanArchive(bytes.NewReader(buf.Bytes()))
		if !errors.Is(err, ErrArtifactRefused) || !strings.Contains(err.Error(), `PAX record "`+rec+`"`) {
			t.Errorf("PAX record %s: %v, want a refusal naming it", rec, err)
		}
	}
	// The records archive/tar writes itself for long names, big ids and
	// times are allowed.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, e := range es {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.data))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if i == 2 {
			h.PAXRecords, h.Format = map[string]string{"mtime": "1700000000.5", "uname": "ü", "uid": "99999999999"}, tar.FormatPAX
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.data)
	}
	tw.Close()
	if _, err := ScanArchive(bytes.NewReader(buf.Bytes())); err != nil {
		t.Errorf("allowed PAX records: %v", err)
	}
}

// TestCheckArchiveRefusesUnreferenced: only blobs reachable from
// index.json may reach the content store; an extra blob is refused (2),
// named.
func TestCheckArchiveRefusesUnreferenced(t *testing.T) {
	es, trust, _ := goodArchive(t)
	extra := blobEntry(bytes.Repeat([]byte("stowaway "), 1000))
	a, err := ScanArchive(bytes.NewReader(buildTar(t, append(es, extra))))
	if err != nil {
		t.Fatal(err)
	}
	_, err = CheckArchive(a, trust)
	if !errors.Is(err, ErrArtifactRefused) || !strings.Contains(err.Error(), strings.TrimPrefix(extra.name, "blobs/sha256/")) || !strings.Contains(err.Error(), "not reachable") {
		t.Fatalf("an unreferenced blob: %v, want a refusal naming it", err)
	}
}

// TestCheckBaseName: docs/design.md "Hardening", "Base names": the ref's
// base.name must be its core.image (normalized) with at most the tag or
// the digest dropped; any other name is refused before import or pull
// creates an image record under it.
func TestCheckBaseName(t *testing.T) {
	r, err := snapshot.OpenRef(readTestdata(t, "pinned.ref.json"), testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	image := r.Core.Image // docker.io/library/busybox:1.36@sha256:…
	dg := image[strings.Index(image, "@")+1:]
	for name, ok := range map[string]bool{
		image:                              true,
		"docker.io/library/busybox@" + dg:  true, // what suspend records (reference.ParseDockerRef)
		"docker.io/library/busybox:1.36":   true,
		"busybox:1.36":                     true, // normalized the same
		"docker.io/library/busybox":        false,
		"docker.io/library/busybox:latest": false,
		"docker.io/library/busybox:1.37":   false,
		"docker.io/library/alpine:1.36":    false,
		"registry.example/busybox:1.36":    false,
		"docker.io/library/busybox@sha256:" + strings.Repeat("0", 64): false,
		"": false,
	} {
		r.Base.Name = name
		err := checkBaseName(r)
		if ok != (err == nil) || err != nil && !errors.Is(err, ErrArtifactRefused) {
			t.Errorf("base.name %q: %v, want accepted %t", name, err, ok)
		}
	}

	// Through CheckArchive: a signed ref naming another image is refused.
	layer := []byte("layer bytes")
	r.Base.Name = image
	r.Layers[0].Digest, r.Layers[0].Size = digest.FromBytes(layer), int64(len(layer))
	r.Base.Name = "docker.io/library/evil:latest"
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	file, err := snapshot.SignRef(r, priv)
	if err != nil {
		t.Fatal(err)
	}
	body, desc, err := ArtifactManifest(file, r, baseDesc(r))
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{desc}})
	a, err := ScanArchive(bytes.NewReader(buildTar(t, []tarEntry{
		blobEntry(body), blobEntry(file), blobEntry(layer),
		{name: "index.json", typ: tar.TypeReg, data: idx},
		{name: "oci-layout", typ: tar.TypeReg, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	})))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckArchive(a, envelope.NewKeyRing(pub)); !errors.Is(err, ErrArtifactRefused) || !strings.Contains(err.Error(), "evil") {
		t.Fatalf("a signed ref with base.name evil: %v, want a refusal naming it", err)
	}
}
