package migrate_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Move a suspended run from one content store to another through an
// archive, as `sandbox-resume export` and `sandbox-resume import` do
// between two hosts. The stores are in-memory (host/memhost)
// (runtime/containerd's Runtime is the Store of a real daemon). The
// receiving side verifies the ref against its trusted keys before it
// stores anything, and checks every blob and the diff; the run lease then
// holds the artifact manifest, the ref and the diff.
func ExampleExport() {
	ctx := context.Background()
	src := memhost.New(snapshot.Host{})

	// On the first host: the run's base image and its rootfs diff.
	layer := src.Put([]byte("base layer"))
	cfgBytes, _ := json.Marshal(ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: "amd64"},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layer.Digest}}})
	cfg := src.Put(cfgBytes)
	mb, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: cfg.Digest, Size: cfg.Size},
		Layers: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: layer.Digest, Size: layer.Size}}})
	base := src.Put(mb)
	tarBytes := bytes.Repeat([]byte("changed file "), 100) // stands for the diff's tar
	var zb bytes.Buffer
	zw, _ := zstd.NewWriter(&zb)
	zw.Write(tarBytes)
	zw.Close()
	diff := src.Put(zb.Bytes())

	// Its SnapshotRef (a committed fixture, re-pointed at these blobs),
	// signed by the suspending host's key.
	fixture, err := os.ReadFile(filepath.Join("..", "snapshot", "testdata", "pinned.ref.json"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ref, err := snapshot.OpenRefUnsafe(fixture)
	if err != nil {
		fmt.Println(err)
		return
	}
	ref.Base.ManifestDigest, ref.Base.ConfigDigest, ref.Base.IndexDigest = base.Digest, cfg.Digest, ""
	ref.Base.DiffIDs = []digest.Digest{layer.Digest}
	ref.Layers = []snapshot.Layer{{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: diff.Digest, Size: diff.Size,
		DiffID: digest.FromBytes(tarBytes), UncompressedSize: int64(len(tarBytes))}}
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	refFile, err := snapshot.SignRef(ref, key)
	if err != nil {
		fmt.Println(err)
		return
	}

	var archive bytes.Buffer
	exp, err := migrate.Export(ctx, src, refFile, &archive, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("exported run", exp.Run, "as", exp.Artifact.ArtifactType, "without its base:", len(exp.Base) == 0)

	// On the second host, which trusts the first host's key.
	dst := memhost.New(snapshot.Host{})
	trust := envelope.NewKeyRing(key.Public().(ed25519.PublicKey))
	imp, err := migrate.Import(ctx, dst, bytes.NewReader(archive.Bytes()), trust)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("imported run", imp.Run, "into lease", imp.Lease, "holding", imp.Blobs, "blobs; the same ref file:", bytes.Equal(imp.RefFile, refFile))

	// A host that does not trust the key stores nothing.
	other := memhost.New(snapshot.Host{})
	_, err = migrate.Import(ctx, other, bytes.NewReader(archive.Bytes()), envelope.NewKeyRing())
	fmt.Println("untrusted:", errors.Is(err, envelope.ErrSignature), "blobs stored:", other.Len())
	// Output:
	// exported run demo-1 as application/vnd.sandbox-resume.snapshot.v1 without its base: true
	// imported run demo-1 into lease sandbox-resume.run/demo-1 holding 3 blobs; the same ref file: true
	// untrusted: true blobs stored: 0
}
