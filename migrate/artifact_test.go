package migrate

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// signedFixture returns the pinned golden ref with its rootfsDiff pointed at
// layer, signed with a fresh key, and a key ring trusting that key.
func signedFixture(t *testing.T, layer []byte) (*snapshot.Ref, []byte, *envelope.KeyRing) {
	t.Helper()
	r, err := snapshot.OpenRef(readTestdata(t, "pinned.ref.json"), testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Layers[0].Digest, r.Layers[0].Size = digest.FromBytes(layer), int64(len(layer))
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	file, err := snapshot.SignRef(r, priv)
	if err != nil {
		t.Fatal(err)
	}
	return r, file, envelope.NewKeyRing(pub)
}

// testKey is the key ring of the SnapshotRef golden vectors
// (snapshot/testdata/ref-test.pub).
func testKey(t testing.TB) *envelope.KeyRing {
	t.Helper()
	pub, err := envelope.LoadPublicKey(filepath.Join("..", "snapshot", "testdata", "ref-test.pub"))
	if err != nil {
		t.Fatal(err)
	}
	return envelope.NewKeyRing(pub)
}

// readTestdata reads a SnapshotRef golden vector of snapshot/testdata.
func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "snapshot", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var baseDesc = func(r *snapshot.Ref) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: r.Base.ManifestDigest, Size: 1234}
}

func TestArtifactManifestShape(t *testing.T) {
	layer := []byte("layer bytes")
	r, file, _ := signedFixture(t, layer)
	body, desc, err := ArtifactManifest(file, r, baseDesc(r))
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest != digest.FromBytes(body) || desc.Size != int64(len(body)) || desc.ArtifactType != "application/vnd.sandbox-resume.snapshot.v1" {
		t.Errorf("descriptor %+v", desc)
	}
	// Read back as plain JSON, member names spelled out by hand.
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	cfg := m["config"].(map[string]any)
	layers := m["layers"].([]any)
	subject := m["subject"].(map[string]any)
	ann := m["annotations"].(map[string]any)
	checks := []struct {
		name      string
		got, want any
	}{
		{"schemaVersion", m["schemaVersion"], 2.0},
		{"mediaType", m["mediaType"], "application/vnd.oci.image.manifest.v1+json"},
		{"artifactType", m["artifactType"], "application/vnd.sandbox-resume.snapshot.v1"},
		{"config.mediaType", cfg["mediaType"], "application/vnd.sandbox-resume.snapshot-ref.v1+json"},
		{"config.digest", cfg["digest"], digest.FromBytes(file).String()},
		{"config.size", cfg["size"], float64(len(file))},
		{"len(layers)", len(layers), 1},
		{"layers[0].mediaType", layers[0].(map[string]any)["mediaType"], r.Layers[0].MediaType},
		{"layers[0].digest", layers[0].(map[string]any)["digest"], digest.FromBytes(layer).String()},
		{"subject.digest", subject["digest"], r.Base.ManifestDigest.String()},
		{"annotations run", ann["io.sandbox-resume.run"], r.Run},
		{"annotations manifest", ann["io.sandbox-resume.manifest"], r.Manifest},
		{"annotations created", ann["org.opencontainers.image.created"], r.Created},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	again, _, _ := ArtifactManifest(file, r, baseDesc(r))
	if !bytes.Equal(again, body) {
		t.Errorf("the same ref gave different manifest bytes")
	}
	wrong := baseDesc(r)
	wrong.Digest = digest.FromString("other")
	if _, _, err := ArtifactManifest(file, r, wrong); err == nil {
		t.Errorf("a subject other than the ref's base manifest was accepted")
	}
}

type tarEntry struct {
	name string
	typ  byte
	data []byte
	link string
}

func buildTar(t *testing.T, es []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.data)), Linkname: e.link}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.data)
	}
	tw.Close()
	return buf.Bytes()
}

func blobEntry(b []byte) tarEntry {
	return tarEntry{name: "blobs/sha256/" + digest.FromBytes(b).Encoded(), typ: tar.TypeReg, data: b}
}

// goodArchive is an archive as containerd's exporter lays it out: blobs,
// index.json, oci-layout, then the two directory entries.
func goodArchive(t *testing.T) ([]tarEntry, *envelope.KeyRing, ocispec.Descriptor) {
	layer := []byte("layer bytes")
	r, file, trust := signedFixture(t, layer)
	body, desc, err := ArtifactManifest(file, r, baseDesc(r))
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{desc}})
	return []tarEntry{
		blobEntry(body), blobEntry(file), blobEntry(layer),
		{name: "index.json", typ: tar.TypeReg, data: idx},
		{name: "oci-layout", typ: tar.TypeReg, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "blobs/", typ: tar.TypeDir},
		{name: "blobs/sha256/", typ: tar.TypeDir},
	}, trust, desc
}

func TestScanAndCheckArchive(t *testing.T) {
	es, trust, desc := goodArchive(t)
	a, err := ScanArchive(bytes.NewReader(buildTar(t, es)))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Blobs) != 3 {
		t.Errorf("%d blobs, want 3", len(a.Blobs))
	}
	art, err := CheckArchive(a, trust)
	if err != nil {
		t.Fatal(err)
	}
	if art.Manifest.Digest != desc.Digest || art.Ref.Run == "" || len(art.Base) != 0 {
		t.Errorf("artifact %+v", art)
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := CheckArchive(a, envelope.NewKeyRing(other)); !errors.Is(err, envelope.ErrSignature) {
		t.Errorf("another trusted key: %v, want ErrSignature", err)
	}
}

// TestScanArchiveDotSlash: an archive repacked with `tar -C DIR -cf
// run.tar .` names every entry with a leading "./" and adds "./": the
// pre-scan accepts it and finds the same blobs and index.
func TestScanArchiveDotSlash(t *testing.T) {
	es, trust, desc := goodArchive(t)
	dotted := []tarEntry{{name: "./", typ: tar.TypeDir}}
	for _, e := range es {
		e.name = "./" + e.name
		dotted = append(dotted, e)
	}
	a, err := ScanArchive(bytes.NewReader(buildTar(t, dotted)))
	if err != nil {
		t.Fatal(err)
	}
	art, err := CheckArchive(a, trust)
	if err != nil || art.Manifest.Digest != desc.Digest || len(a.Blobs) != 3 {
		t.Fatalf("dotted archive: %+v, %v", art, err)
	}
}

func TestScanArchiveRefuses(t *testing.T) {
	flip := func(es []tarEntry) []tarEntry {
		d := append([]byte{}, es[2].data...)
		d[0] ^= 1
		es[2].data = d
		return es
	}
	cases := []struct {
		name, want string
		edit       func([]tarEntry) []tarEntry
	}{
		{"traversal", `"../x"`, func(es []tarEntry) []tarEntry { return append(es, tarEntry{name: "../x", typ: tar.TypeReg}) }},
		{"dot slash duplicate", `"./index.json" appears twice`, func(es []tarEntry) []tarEntry { return append(es, tarEntry{name: "./index.json", typ: tar.TypeReg}) }},
		{"two dot slashes", `"././index.json"`, func(es []tarEntry) []tarEntry {
			es[3].name = "././index.json"
			return es
		}},
		{"dot slash traversal", `"./../x"`, func(es []tarEntry) []tarEntry { return append(es, tarEntry{name: "./../x", typ: tar.TypeReg}) }},
		{"dot slash other directory", `"./etc/"`, func(es []tarEntry) []tarEntry { return append(es, tarEntry{name: "./etc/", typ: tar.TypeDir}) }},
		{"upper-case hex", "BLOBS", func(es []tarEntry) []tarEntry {
			es[0].name = "blobs/sha256/" + strings.ToUpper(strings.TrimPrefix(es[0].name, "blobs/sha256/"))
			return es
		}},
		{"symlink", "a link", func(es []tarEntry) []tarEntry {
			return append(es, tarEntry{name: "blobs/sha256/" + strings.Repeat("a", 64), typ: tar.TypeSymlink, link: "/etc/passwd"})
		}},
		{"hard link", "a link", func(es []tarEntry) []tarEntry {
			return append(es, tarEntry{name: "blobs/sha256/" + strings.Repeat("b", 64), typ: tar.TypeLink, link: es[0].name})
		}},
		{"fifo", "regular files only", func(es []tarEntry) []tarEntry {
			return append(es, tarEntry{name: "blobs/sha256/" + strings.Repeat("c", 64), typ: tar.TypeFifo})
		}},
		{"duplicate", "appears twice", func(es []tarEntry) []tarEntry { return append(es, es[3]) }},
		{"duplicate directory", "appears twice", func(es []tarEntry) []tarEntry { return append(es, es[5]) }},
		{"other directory", "a directory other", func(es []tarEntry) []tarEntry { return append(es, tarEntry{name: "etc/", typ: tar.TypeDir}) }},
		{"digest mismatch", "not the sha256:", flip},
		{"no index", "no index.json", func(es []tarEntry) []tarEntry { return append(es[:3], es[4:]...) }},
		{"no layout", "no oci-layout", func(es []tarEntry) []tarEntry { return append(es[:4], es[5:]...) }},
		{"bad layout", "imageLayoutVersion", func(es []tarEntry) []tarEntry {
			es[4].data = []byte(`{"imageLayoutVersion":"2.0.0"}`)
			return es
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			es, _, _ := goodArchive(t)
			_, err := ScanArchive(bytes.NewReader(buildTar(t, tc.edit(es))))
			if !errors.Is(err, ErrArtifactRefused) {
				t.Fatalf("err = %v, want ErrArtifactRefused", err)
			}
			if !strings.Contains(strings.ToUpper(err.Error()), strings.ToUpper(tc.want)) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	if _, err := ScanArchive(strings.NewReader("not a tar at all, but long enough to hold a header block? no")); !errors.Is(err, ErrArtifactRefused) {
		t.Errorf("garbage: %v", err)
	}
}

func TestCheckArchiveRefuses(t *testing.T) {
	cases := []struct {
		name, want string
		edit       func(t *testing.T, es []tarEntry, desc ocispec.Descriptor) []tarEntry
	}{
		{"index names an absent blob", "is absent", func(t *testing.T, es []tarEntry, _ ocispec.Descriptor) []tarEntry {
			return append(es[:2], es[3:]...) // drop the layer
		}},
		{"no artifact", "no manifest with artifactType", func(t *testing.T, es []tarEntry, _ ocispec.Descriptor) []tarEntry {
			es[3].data = []byte(`{"schemaVersion":2,"manifests":[]}`)
			return es
		}},
		{"wrong config media type", "config media type", func(t *testing.T, es []tarEntry, desc ocispec.Descriptor) []tarEntry {
			var m ocispec.Manifest
			json.Unmarshal(es[0].data, &m)
			m.Config.MediaType = ocispec.MediaTypeImageConfig
			body, _ := json.Marshal(&m)
			es[0] = blobEntry(body)
			nd := ocispec.Descriptor{MediaType: desc.MediaType, Digest: digest.FromBytes(body), Size: int64(len(body))}
			es[3].data, _ = json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []ocispec.Descriptor{nd}})
			return es
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			es, trust, desc := goodArchive(t)
			a, err := ScanArchive(bytes.NewReader(buildTar(t, tc.edit(t, es, desc))))
			if err == nil {
				_, err = CheckArchive(a, trust)
			}
			if !errors.Is(err, ErrArtifactRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrArtifactRefused mentioning %q", err, tc.want)
			}
		})
	}
}

// mapSource is a BlobSource over maps: every blob's size, and the bytes of
// the small ones.
type mapSource struct {
	sizes map[digest.Digest]int64
	small map[digest.Digest][]byte
}

func (m mapSource) Blob(d digest.Digest) ([]byte, bool) { b, ok := m.small[d]; return b, ok }
func (m mapSource) Size(d digest.Digest) (int64, bool)  { n, ok := m.sizes[d]; return n, ok }

// TestArtifactCarriesLayersThenSpec: the artifact of a /2 ref carries every
// layer in order, then the spec blob (docs/design.md "Moving runs"), and
// CheckArtifactManifest accepts exactly that order.
func TestArtifactCarriesLayersThenSpec(t *testing.T) {
	file := readTestdata(t, "ref2/g2.ref.json")
	r, err := snapshot.OpenRef(file, testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	body, desc, err := ArtifactManifest(file, r, baseDesc(r))
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 3 || m.Layers[0].Digest != r.Layers[0].Digest || m.Layers[1].Digest != r.Layers[1].Digest ||
		m.Layers[1].MediaType != ocispec.MediaTypeImageLayer || m.Layers[2].Digest != r.Spec.Digest || m.Layers[2].MediaType != snapshot.MediaTypeSpec {
		t.Fatalf("layers %+v", m.Layers)
	}
	src := mapSource{sizes: map[digest.Digest]int64{digest.FromBytes(file): int64(len(file))}, small: map[digest.Digest][]byte{digest.FromBytes(file): file}}
	for _, l := range m.Layers {
		src.sizes[l.Digest] = l.Size
	}
	art, err := CheckArtifactManifest(src, desc, body, testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(art.Layers) != 3 || art.Ref.Generation != 2 {
		t.Fatalf("artifact layers %v, generation %d", art.Layers, art.Ref.Generation)
	}
	// The spec blob before the layers, or left out, is refused.
	for name, layers := range map[string][]ocispec.Descriptor{
		"spec first": {m.Layers[2], m.Layers[0], m.Layers[1]},
		"no spec":    m.Layers[:2],
	} {
		mm := m
		mm.Layers = layers
		b, err := json.Marshal(&mm)
		if err != nil {
			t.Fatal(err)
		}
		d := ocispec.Descriptor{MediaType: desc.MediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
		if _, err := CheckArtifactManifest(src, d, b, testKey(t)); !errors.Is(err, ErrArtifactRefused) {
			t.Errorf("%s: err = %v, want ErrArtifactRefused", name, err)
		}
	}
}
