package migrate_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// testKey is the key ring of the committed SnapshotRef vectors of
// snapshot/testdata.
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

// run is a suspended run in an in-memory store (host/memhost): its base image (manifest, config,
// one layer), its zstd rootfs diff, and its ref file signed by key.
type run struct {
	store *memhost.Machine
	ref   *snapshot.Ref
	file  []byte
	trust *envelope.KeyRing
	diff  []byte
	base  ocispec.Descriptor
}

// newRun builds a run; edit may change the ref before it is signed.
func newRun(t *testing.T, edit func(*snapshot.Ref)) *run {
	t.Helper()
	s := memhost.New(snapshot.Host{})
	layer := s.Put([]byte("base layer bytes"))
	cfgBytes, _ := json.Marshal(ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: "amd64"},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layer.Digest}}})
	cfg := s.Put(cfgBytes)
	mb, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: cfg.Digest, Size: cfg.Size},
		Layers: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: layer.Digest, Size: layer.Size}}})
	base := s.Put(mb)
	base.MediaType = ocispec.MediaTypeImageManifest

	raw := bytes.Repeat([]byte("changed file "), 500)
	var zb bytes.Buffer
	zw, _ := zstd.NewWriter(&zb)
	zw.Write(raw)
	zw.Close()
	diff := zb.Bytes()
	s.Put(diff)

	r, err := snapshot.OpenRef(readTestdata(t, "pinned.ref.json"), testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Base.ManifestDigest, r.Base.ConfigDigest, r.Base.IndexDigest = base.Digest, cfg.Digest, ""
	r.Base.DiffIDs = []digest.Digest{layer.Digest}
	r.Layers[0] = snapshot.Layer{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: digest.FromBytes(diff), Size: int64(len(diff)),
		DiffID: digest.FromBytes(raw), UncompressedSize: int64(len(raw))}
	if edit != nil {
		edit(r)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	file, err := snapshot.SignRef(r, priv)
	if err != nil {
		t.Fatal(err)
	}
	return &run{store: s, ref: r, file: file, trust: envelope.NewKeyRing(pub), diff: diff, base: base}
}

// exported writes the run's archive from its store.
func (r *run) exported(t *testing.T, withBase bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	res, err := migrate.Export(context.Background(), r.store, r.file, &buf, withBase)
	if err != nil {
		t.Fatal(err)
	}
	if res.Run != r.ref.Run || res.Size != int64(buf.Len()) || res.Artifact.ArtifactType != migrate.ArtifactType || (len(res.Base) == 1) != withBase {
		t.Fatalf("Export = %+v (%d bytes written)", res, buf.Len())
	}
	return buf.Bytes()
}

// TestExportImport moves a run from one in-memory store to another
// through an archive: the real export and import, the real verification.
func TestExportImport(t *testing.T) {
	for _, withBase := range []bool{false, true} {
		r := newRun(t, nil)
		archive := r.exported(t, withBase)
		if !r.store.Holds(snapshot.RunLease(r.ref.Run), r.ref.Layers[0].Digest) {
			t.Fatal("export: the run lease does not hold the diff")
		}
		dst := memhost.New(snapshot.Host{})
		res, err := migrate.Import(context.Background(), dst, bytes.NewReader(archive), r.trust)
		if err != nil {
			t.Fatalf("withBase %t: %v", withBase, err)
		}
		if res.Run != r.ref.Run || !bytes.Equal(res.RefFile, r.file) || res.Lease != snapshot.RunLease(r.ref.Run) {
			t.Fatalf("Import = %+v", res)
		}
		held := func(d digest.Digest) bool { return dst.Holds(res.Lease, d) }
		if !held(r.ref.Layers[0].Digest) || !held(res.Artifact.Digest) || held(r.base.Digest) != withBase {
			t.Errorf("withBase %t: run lease holds diff %t, artifact %t, base %t", withBase,
				held(r.ref.Layers[0].Digest), held(res.Artifact.Digest), held(r.base.Digest))
		}
		if len(dst.Leases()) != 1 {
			t.Errorf("temporary lease left: %v", dst.Leases())
		}
	}
}

// TestImportRefusesCorruptDiff: a diff whose bytes are what the signed
// ref names but whose decompression is not its diffID passes every check
// an archive can be given by name and size, and is refused by the layer
// verifier: migrate.ErrArtifactRefused and snapshot.ErrDiffCorrupt, nothing held,
// the temporary lease's blobs collected.
func TestImportRefusesCorruptDiff(t *testing.T) {
	r := newRun(t, func(ref *snapshot.Ref) { ref.Layers[0].DiffID = digest.FromString("another tar") })
	archive := r.exported(t, false)
	dst := memhost.New(snapshot.Host{})
	_, err := migrate.Import(context.Background(), dst, bytes.NewReader(archive), r.trust)
	if !errors.Is(err, migrate.ErrArtifactRefused) || !errors.Is(err, snapshot.ErrDiffCorrupt) || !strings.Contains(err.Error(), "diffID") {
		t.Fatalf("Import = %v, want migrate.ErrArtifactRefused and snapshot.ErrDiffCorrupt naming the diffID", err)
	}
	if len(dst.Leases()) != 0 || dst.Len() != 0 {
		t.Errorf("a refused import left leases %v and %d blobs", dst.Leases(), dst.Len())
	}
	// And an untrusted ref is refused before anything is stored.
	_, err = migrate.Import(context.Background(), dst, bytes.NewReader(archive), envelope.NewKeyRing())
	if !errors.Is(err, envelope.ErrSignature) || dst.Len() != 0 {
		t.Fatalf("untrusted: %v, %d blobs stored", err, dst.Len())
	}
}

// TestExportRefusesMissingContent: a run whose diff or base manifest is
// gone from the store cannot be exported.
func TestExportRefusesMissingContent(t *testing.T) {
	r := newRun(t, nil)
	r.store.DeleteBlob(r.ref.Layers[0].Digest)
	if _, err := migrate.Export(context.Background(), r.store, r.file, io.Discard, false); !errors.Is(err, errdef.ErrSnapshotMissing) {
		t.Errorf("no diff: %v, want errdef.ErrSnapshotMissing", err)
	}
	r = newRun(t, nil)
	r.store.DeleteBlob(r.base.Digest)
	if _, err := migrate.Export(context.Background(), r.store, r.file, io.Discard, false); !errors.Is(err, errdef.ErrImageUnresolved) {
		t.Errorf("no base: %v, want errdef.ErrImageUnresolved", err)
	}
}

// TestPushPull pushes a run to an in-memory registry and pulls it into a
// store without the base: the artifact and the base (by digest) arrive,
// verified; a registry serving another diff is refused.
func TestPushPull(t *testing.T) {
	r := newRun(t, nil)
	reg := memhost.NewRegistry(r.store)
	target, err := migrate.ParseRemoteRef("reg.example/runs:"+r.ref.Run, false)
	if err != nil {
		t.Fatal(err)
	}
	pres, err := migrate.Push(context.Background(), r.store, reg, r.file, target)
	if err != nil {
		t.Fatal(err)
	}
	if len(pres.Base) != 1 || pres.Base[0] != r.base.Digest.String() || len(reg.Pushes()) != 2 || !strings.HasPrefix(reg.Pushes()[0], "reg.example/runs@") {
		t.Fatalf("Push = %+v, pushes %v", pres, reg.Pushes())
	}
	dst := memhost.New(snapshot.Host{})
	reg.Local = dst
	res, err := migrate.Pull(context.Background(), dst, reg, target, r.trust)
	if err != nil {
		t.Fatal(err)
	}
	if res.Run != r.ref.Run || res.BaseFrom != "reg.example/runs@"+r.base.Digest.String() || !bytes.Equal(res.RefFile, r.file) {
		t.Fatalf("Pull = %+v", res)
	}
	if !dst.Holds(res.Lease, r.ref.Layers[0].Digest) || !dst.Holds(res.Lease, r.base.Digest) {
		t.Errorf("run lease holds diff %t, base %t", dst.Holds(res.Lease, r.ref.Layers[0].Digest), dst.Holds(res.Lease, r.base.Digest))
	}
	if bn := res.BaseName; bn == nil || !bn.Created || dst.Images()[r.ref.Base.Name].Digest != r.base.Digest {
		t.Errorf("BaseName %+v, images %v", bn, dst.Images())
	}

	// The registry now serves other bytes under the diff's digest: the
	// transport's check stops them, nothing is held.
	evil := memhost.New(snapshot.Host{})
	reg.Local = evil
	good, _ := reg.Remote.Blob(context.Background(), r.ref.Layers[0].Digest)
	reg.Remote.CorruptBlob(r.ref.Layers[0].Digest, good[:len(good)-1])
	if _, err := migrate.Pull(context.Background(), evil, reg, target, r.trust); err == nil || len(evil.Leases()) != 0 {
		t.Fatalf("Pull of a changed diff: %v, leases %v", err, evil.Leases())
	}
	reg.Remote.CorruptBlob(r.ref.Layers[0].Digest, good)
}

// TestPullRefusesCorruptDiff: a signed ref whose diffID is not its diff's
// is refused by the layer verifier after the fetch, as import refuses it.
func TestPullRefusesCorruptDiff(t *testing.T) {
	r := newRun(t, func(ref *snapshot.Ref) { ref.Layers[0].UncompressedSize++ })
	reg := memhost.NewRegistry(r.store)
	target, err := migrate.ParseRemoteRef("reg.example/runs:"+r.ref.Run, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Push(context.Background(), r.store, reg, r.file, target); err != nil {
		t.Fatal(err)
	}
	dst := memhost.New(snapshot.Host{})
	reg.Local = dst
	_, err = migrate.Pull(context.Background(), dst, reg, target, r.trust)
	if !errors.Is(err, migrate.ErrArtifactRefused) || !errors.Is(err, snapshot.ErrDiffCorrupt) {
		t.Fatalf("Pull = %v, want migrate.ErrArtifactRefused and snapshot.ErrDiffCorrupt", err)
	}
	if len(dst.Leases()) != 0 || dst.Len() != 0 {
		t.Errorf("a refused pull left leases %v and %d blobs", dst.Leases(), dst.Len())
	}
}

// TestParseRemoteRef checks the loopback rule of plain HTTP, bare
// repositories and digests.
func TestParseRemoteRef(t *testing.T) {
	for ref, loop := range map[string]bool{
		"127.0.0.1:5000/runs:a": true, "localhost:5000/runs:a": true, "localhost/runs:a": true,
		"[::1]:5000/runs:a": true, "127.1.2.3/r:a": true,
		"reg.example/runs:a": false, "10.0.0.1:5000/runs:a": false, "runs:a": false, "localhost.example/r:a": false,
	} {
		r, err := migrate.ParseRemoteRef(ref, false)
		if err != nil || r.Loopback != loop {
			t.Errorf("migrate.ParseRemoteRef(%q) = %+v, %v; want loopback %t", ref, r, err, loop)
		}
	}
	if r, err := migrate.ParseRemoteRef("reg.example/runs", false); err != nil || !r.Bare() || r.Tag() != "" {
		t.Errorf("a bare repository (push tags the generation, pull --run): %+v, %v", r, err)
	}
	if r, err := migrate.ParseRemoteRef("reg.example/runs:t", false); err != nil || r.Bare() || r.Tag() != "t" {
		t.Errorf("a tagged reference: %+v, %v", r, err)
	}
	d := "reg.example/runs@" + digest.FromString("x").String()
	if _, err := migrate.ParseRemoteRef(d, false); err == nil {
		t.Error("a digest reference was accepted for push")
	}
	if _, err := migrate.ParseRemoteRef(d, true); err != nil {
		t.Errorf("a digest reference for pull: %v", err)
	}
}

// TestRunsByGeneration pushes a run without a tag (tagged <run>.g1) and
// pulls a bare repository with WithRun: the highest generation among the
// tags is the one pulled, whatever the order the registry lists them in.
func TestRunsByGeneration(t *testing.T) {
	r := newRun(t, nil)
	reg := memhost.NewRegistry(r.store)
	repo, err := migrate.ParseRemoteRef("reg.example/runs", false)
	if err != nil {
		t.Fatal(err)
	}
	pres, err := migrate.Push(context.Background(), r.store, reg, r.file, repo)
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := reg.Resolve(context.Background(), pres.Target)
	if want := "reg.example/runs:" + r.ref.Run + ".g1"; pres.Target != want || err != nil || tagged.Digest != pres.Artifact.Digest {
		t.Fatalf("a push without a tag went to %s (%v), want %s", pres.Target, err, want)
	}
	// Generations 3 and 2 (the same artifact under other tags) and noise.
	for _, tag := range []string{".g3", ".g2", ".g03", ".gx", "0.g9"} {
		reg.Tag("reg.example/runs:"+r.ref.Run+tag, tagged)
	}
	dst := memhost.New(snapshot.Host{})
	reg.Local = dst
	res, err := migrate.Pull(context.Background(), dst, reg, repo, r.trust, migrate.WithRun(r.ref.Run))
	if err != nil {
		t.Fatal(err)
	}
	if want := "reg.example/runs:" + r.ref.Run + ".g3"; res.Source != want {
		t.Errorf("pulled %s, want %s", res.Source, want)
	}
	if _, err := migrate.Pull(context.Background(), memhost.New(snapshot.Host{}), reg, repo, r.trust); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a bare pull without a run: %v, want invalid-argument", err)
	}
	_, err = migrate.Pull(context.Background(), memhost.New(snapshot.Host{}), reg, repo, r.trust, migrate.WithRun("other"))
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "reg.example/runs") || !strings.Contains(err.Error(), "other") {
		t.Errorf("a run with no tag: %v, want not-found naming the repository and the run", err)
	}
	d := "reg.example/runs@" + digest.FromString("x").String()
	dref, err := migrate.ParseRemoteRef(d, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Push(context.Background(), r.store, reg, r.file, dref); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a push to a digest: %v", err)
	}
}

func TestLatestGenerationTag(t *testing.T) {
	for _, tc := range []struct {
		tags []string
		run  string
		tag  string
		gen  int
		ok   bool
	}{
		{nil, "run", "", 0, false},
		{[]string{"run.g1", "run.g2", "run.g3"}, "run", "run.g3", 3, true},
		{[]string{"run.g3", "run.g1", "run.g2"}, "run", "run.g3", 3, true},
		{[]string{"run.g9", "run.g10"}, "run", "run.g10", 10, true}, // numeric, not lexical
		{[]string{"run.g2", "run2.g7", "other.g9", "run"}, "run", "run.g2", 2, true},
		{[]string{"run.g0", "run.g01", "run.g", "run.gx", "run.g-1", "run.g1x", "run.g+2"}, "run", "", 0, false},
		{[]string{"a.g1.g2", "a.g5"}, "a", "a.g5", 5, true},       // a.g1.g2 is run a.g1's
		{[]string{"a.g1.g2", "a.g5"}, "a.g1", "a.g1.g2", 2, true}, //
		{[]string{"run.g99999999999999999999999"}, "run", "", 0, false},
	} {
		tag, gen, ok := migrate.LatestGenerationTag(tc.tags, tc.run)
		if tag != tc.tag || gen != tc.gen || ok != tc.ok {
			t.Errorf("migrate.LatestGenerationTag(%q, %q) = %q %d %v; want %q %d %v", tc.tags, tc.run, tag, gen, ok, tc.tag, tc.gen, tc.ok)
		}
	}
	if g := migrate.GenerationTag("run-7", 3); g != "run-7.g3" {
		t.Errorf("GenerationTag: %s", g)
	}
}

// newIndexedRun is newRun whose base name resolved through an image index
// (stored, recorded as base.indexDigest; the ref re-signed): the index
// lists the platform manifest and, with absent, a second manifest the
// store does not hold (so export ships the platform manifest alone).
func newIndexedRun(t *testing.T, absent bool) *run {
	t.Helper()
	r := newRun(t, nil)
	ms := []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, Digest: r.base.Digest, Size: r.base.Size,
		Platform: &ocispec.Platform{OS: "linux", Architecture: "amd64"}}}
	if absent {
		ms = append(ms, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("arm64 manifest"), Size: 3,
			Platform: &ocispec.Platform{OS: "linux", Architecture: "arm64"}})
	}
	ib, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: ms})
	r.ref.Base.IndexDigest = r.store.Put(ib).Digest
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if r.file, err = snapshot.SignRef(r.ref, priv); err != nil {
		t.Fatal(err)
	}
	r.trust = envelope.NewKeyRing(pub)
	return r
}

// TestImportNamesBase: after an import the ref's base.name points at the
// recorded index (or manifest) digest when no image had that name; an
// existing name is never re-pointed; nothing is named without the base.
func TestImportNamesBase(t *testing.T) {
	ctx := context.Background()
	t.Run("manifest", func(t *testing.T) {
		r := newRun(t, nil)
		dst := memhost.New(snapshot.Host{})
		res, err := migrate.Import(ctx, dst, bytes.NewReader(r.exported(t, true)), r.trust)
		if err != nil {
			t.Fatal(err)
		}
		bn := res.BaseName
		if bn == nil || !bn.Created || bn.Name != r.ref.Base.Name || bn.Target != r.base.Digest || dst.Images()[r.ref.Base.Name].Digest != r.base.Digest {
			t.Fatalf("BaseName %+v, images %v", bn, dst.Images())
		}
		if got := dst.Images()[r.ref.Base.Name].MediaType; got != ocispec.MediaTypeImageManifest {
			t.Errorf("name's media type %q", got)
		}
		if len(dst.Children(r.base.Digest)) != 2 {
			t.Errorf("manifest children %v, want its config and layer", dst.Children(r.base.Digest))
		}
	})
	t.Run("index", func(t *testing.T) {
		r := newIndexedRun(t, false)
		dst := memhost.New(snapshot.Host{})
		res, err := migrate.Import(ctx, dst, bytes.NewReader(r.exported(t, true)), r.trust)
		if err != nil {
			t.Fatal(err)
		}
		if bn := res.BaseName; !bn.Created || bn.Target != r.ref.Base.IndexDigest || dst.Images()[r.ref.Base.Name].Digest != r.ref.Base.IndexDigest {
			t.Fatalf("BaseName %+v", bn)
		}
		if got := dst.Children(r.ref.Base.IndexDigest); len(got) != 1 || got[0] != r.base.Digest {
			t.Errorf("index children %v, want the platform manifest", got)
		}
	})
	t.Run("index incomplete", func(t *testing.T) {
		r := newIndexedRun(t, true) // export ships the platform manifest alone
		dst := memhost.New(snapshot.Host{})
		res, err := migrate.Import(ctx, dst, bytes.NewReader(r.exported(t, true)), r.trust)
		if err != nil {
			t.Fatal(err)
		}
		if bn := res.BaseName; bn.Created || len(dst.Images()) != 0 || !strings.Contains(bn.Note, "recorded index") {
			t.Fatalf("BaseName %+v, images %v", bn, dst.Images())
		}
	})
	t.Run("existing name", func(t *testing.T) {
		r := newRun(t, nil)
		dst := memhost.New(snapshot.Host{})
		other := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("other"), Size: 5}
		if err := dst.CreateImage(ctx, r.ref.Base.Name, other); err != nil {
			t.Fatal(err)
		}
		res, err := migrate.Import(ctx, dst, bytes.NewReader(r.exported(t, true)), r.trust)
		if err != nil {
			t.Fatal(err)
		}
		bn := res.BaseName
		if bn.Created || bn.Existing != other.Digest || !strings.Contains(bn.Note, "not re-pointed") || dst.Images()[r.ref.Base.Name].Digest != other.Digest {
			t.Fatalf("BaseName %+v, images %v", bn, dst.Images())
		}
	})
	t.Run("no base", func(t *testing.T) {
		r := newRun(t, nil)
		dst := memhost.New(snapshot.Host{})
		res, err := migrate.Import(ctx, dst, bytes.NewReader(r.exported(t, false)), r.trust)
		if err != nil {
			t.Fatal(err)
		}
		if bn := res.BaseName; bn.Created || len(dst.Images()) != 0 || !strings.Contains(bn.Note, "not complete") {
			t.Fatalf("BaseName %+v", bn)
		}
	})
}

// TestPullNamesBaseIndex: push sends the complete index beside the
// platform manifest; pull fetches the index alone and names it.
func TestPullNamesBaseIndex(t *testing.T) {
	r := newIndexedRun(t, false)
	reg := memhost.NewRegistry(r.store)
	target, err := migrate.ParseRemoteRef("reg.example/runs:"+r.ref.Run, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Push(context.Background(), r.store, reg, r.file, target); err != nil {
		t.Fatal(err)
	}
	dst := memhost.New(snapshot.Host{})
	reg.Local = dst
	res, err := migrate.Pull(context.Background(), dst, reg, target, r.trust)
	if err != nil {
		t.Fatal(err)
	}
	if bn := res.BaseName; !bn.Created || bn.Target != r.ref.Base.IndexDigest || dst.Images()[r.ref.Base.Name].Digest != r.ref.Base.IndexDigest {
		t.Fatalf("BaseName %+v, images %v", bn, dst.Images())
	}
	if !dst.Holds(res.Lease, r.ref.Base.IndexDigest) {
		t.Errorf("the run lease does not hold the index")
	}
}

// TestArtifactSpecAndGeneration: a /2 ref's artifact carries its spec
// blob and its generation annotation; import verifies the spec blob and
// refuses an annotation that disagrees with the ref.
func TestArtifactSpecAndGeneration(t *testing.T) {
	spec := []byte(`{"ociVersion":"1.2.1","process":{"args":["/bin/sh"]}}`)
	r := newRun(t, func(ref *snapshot.Ref) {
		ref.Schema, ref.Generation = snapshot.RefSchemaV2, 1
		ref.Spec = &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: digest.FromBytes(spec), Size: int64(len(spec))}
		ref.Runtime = &snapshot.Runtime{Name: "io.containerd.runc.v2"}
	})
	r.store.Put(spec)
	body, _, err := migrate.ArtifactManifest(r.file, r.ref, r.base)
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if m.Annotations[migrate.AnnotationGeneration] != "1" || len(m.Layers) != 2 || m.Layers[1].Digest != r.ref.Spec.Digest {
		t.Fatalf("artifact manifest %s", body)
	}
	archive := r.exported(t, true)
	res, err := migrate.Import(context.Background(), memhost.New(snapshot.Host{}), bytes.NewReader(archive), r.trust)
	if err != nil || !bytes.Equal(res.RefFile, r.file) {
		t.Fatalf("Import: %v", err)
	}

	m.Annotations[migrate.AnnotationGeneration] = "2"
	bad, _ := json.Marshal(m)
	src := blobSource{sizes: map[digest.Digest]int64{}, small: map[digest.Digest][]byte{}}
	src.sizes[digest.FromBytes(r.file)], src.small[digest.FromBytes(r.file)] = int64(len(r.file)), r.file
	for _, l := range m.Layers {
		src.sizes[l.Digest] = l.Size
	}
	_, err = migrate.CheckArtifactManifest(src, ocispec.Descriptor{Digest: digest.FromBytes(bad), Size: int64(len(bad))}, bad, r.trust)
	if !errors.Is(err, migrate.ErrArtifactRefused) || !strings.Contains(err.Error(), migrate.AnnotationGeneration) {
		t.Errorf("a wrong generation annotation: %v", err)
	}
}

// blobSource is a migrate.BlobSource over maps.
type blobSource struct {
	sizes map[digest.Digest]int64
	small map[digest.Digest][]byte
}

func (b blobSource) Blob(d digest.Digest) ([]byte, bool) { v, ok := b.small[d]; return v, ok }
func (b blobSource) Size(d digest.Digest) (int64, bool)  { v, ok := b.sizes[d]; return v, ok }
