package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ImportResult is what Import stored.
type ImportResult struct {
	Run      string             `json:"run"`
	Manifest string             `json:"manifest"` // the ref's manifest address
	Pinned   bool               `json:"pinned"`
	Artifact ocispec.Descriptor `json:"artifact"`
	Lease    string             `json:"lease"` // the run lease now holding the artifact
	Base     []string           `json:"base"`  // digests of base blobs that came with the archive
	Blobs    int                `json:"blobs"` // blobs held by the run lease
	// BaseName is what the import did about the ref's base.name: created
	// pointing at the recorded digest, or why not.
	BaseName *BaseName `json:"baseName"`
	// Ref and RefFile are the verified ref and its file's exact bytes.
	Ref     *snapshot.Ref `json:"-"`
	RefFile []byte        `json:"-"`
}

// Import imports a migration archive (an OCI image layout tar written by
// Export) from the seekable file f into the store (docs/design.md "Moving
// runs"), in this order:
//
//  1. the pre-scan (ScanArchive): entry names and types, no links, no
//     duplicates, every blob's sha256 is its name;
//  2. CheckArchive: index.json names only blobs of the archive with their
//     sizes, one migration artifact, and its ref verified against trust
//     (snapshot.OpenRef) before any of its fields is used; anything else
//     listed must be the ref's base image, complete;
//  3. the store's archive importer (no image records: a name in an
//     archive must never re-point an image of this host) under a temporary
//     lease;
//  4. every blob checked in the store (digest and size: containerd's
//     importer stores a blob under the digest of its bytes whatever its
//     name, and reports success with a corrupt layer — measured), the
//     imported index.json equal to the scanned one, every layer checked
//     with snapshot.VerifyDiff (digest, size, diffID, decompression
//     bounded by uncompressedSize) and the spec blob with
//     snapshot.ReadBlob (digest and size);
//  5. the ref's base.name (checked against core.image in step 2) created
//     pointing at the recorded index (or manifest) digest when no image of
//     that name exists and the base is complete here (an archive made with
//     --with-base, or a base already present); an existing name is never
//     re-pointed (ImportResult.BaseName says which);
//  6. the artifact, the layers, the spec and the base blobs that came with
//     it added to the run lease snapshot.RunLease(run); the temporary
//     lease deleted. Nothing fallible of Import comes after this step, so
//     a failed Import adds nothing to the run lease.
//
// Nothing is written outside the store, and on any failure the temporary
// lease is deleted synchronously so what it held is collected. Errors:
// refusals wrap ErrArtifactRefused (and snapshot.ErrDiffCorrupt for a diff
// that does not verify); the ref's own are *snapshot.OpenError; the
// store's carry errdefs classes.
//
// A test can hold the process between steps with the environment variable
// SANDBOX_RESUME_TEST_PAUSE_AT (internal/faultpoint: only in a binary built
// with -tags faultpoint; no effect when unset),
// to SIGKILL it in a known state (test/integration/fault_test.go):
//
//	import-scan       steps 1-2 done, nothing written to the store
//	import-templease  the temporary lease exists, nothing imported
//	import-ingest     step 3 done: the blobs are under the temporary lease
//	import-hold       step 6's run lease holds them, the temporary lease
//	                  is not deleted yet
//	import-release    (ImportFile) the temporary lease is deleted, out
//	                  not written
//	import-write      (ImportFile) out is written (renamed into place)
//
// With WithProgress the archive bytes read are reported in the phases
// "scan" (step 1) and "import" (step 3), each with the archive's size as
// total, then "verify diff" (total -1) for step 4.
func Import(ctx context.Context, s Store, f io.ReadSeeker, trust *envelope.KeyRing, opts ...Option) (*ImportResult, error) {
	o := collectOptions(opts)
	if _, quiet := o.progress.(NoProgress); !quiet {
		size, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, fmt.Errorf("archive: size: %w", err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("archive: rewind: %w", err)
		}
		o.progress.Phase("scan", size)
		f = &progressReader{r: f, p: o.progress, next: "import", size: size}
	}
	a, err := ScanArchive(f)
	if err != nil {
		return nil, err
	}
	art, err := CheckArchive(a, trust)
	if err != nil {
		return nil, err
	}
	faultpoint.Reach("import-scan")
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("archive: rewind: %w", err)
	}

	tmp, done, err := s.TempLease(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	faultpoint.Reach("import-templease")
	idx, err := s.ImportArchive(ctx, tmp, f)
	if err != nil {
		return nil, fmt.Errorf("archive: import: %v: %w", err, ErrArtifactRefused)
	}
	faultpoint.Reach("import-ingest")
	if idx != a.IndexDigest {
		return nil, fmt.Errorf("archive: index.json imported as %s, but scanned as %s (the file changed?): %w", idx, a.IndexDigest, ErrArtifactRefused)
	}
	want := map[digest.Digest]int64{
		art.Manifest.Digest:           art.Manifest.Size,
		digest.FromBytes(art.RefFile): int64(len(art.RefFile)),
	}
	for _, l := range art.Layers {
		want[l.Digest] = l.Size
	}
	for _, d := range art.Base {
		want[d] = a.Blobs[d]
	}
	if err := checkStored(ctx, s, want); err != nil {
		return nil, err
	}
	o.progress.Phase("verify diff", -1)
	if err := verifyLayers(ctx, s, art.Ref); err != nil {
		return nil, err
	}
	if err := verifySpec(ctx, s, art.Ref); err != nil {
		return nil, err
	}
	held := []digest.Digest{art.Manifest.Digest, digest.FromBytes(art.RefFile)}
	for _, l := range art.Layers {
		held = append(held, l.Digest)
	}
	held = append(held, art.Base...)
	// The base is named before the run lease takes the content: a failure
	// naming it leaves nothing in the run lease (docs/design.md
	// "Hardening", "Nothing half-stored").
	name, err := nameBase(ctx, s, art.Ref)
	if err != nil {
		return nil, err
	}
	lease, err := holdRun(ctx, s, art.Ref, held...)
	if err != nil {
		return nil, err
	}
	faultpoint.Reach("import-hold")
	base := make([]string, len(art.Base))
	for i, d := range art.Base {
		base[i] = d.String()
	}
	return &ImportResult{
		Run: art.Ref.Run, Manifest: art.Ref.Manifest, Pinned: art.Ref.Pinned,
		Artifact: art.Manifest, Lease: lease, Base: base, Blobs: len(held), BaseName: name,
		Ref: art.Ref, RefFile: art.RefFile,
	}, nil
}

// ImportFile is Import (with its options) of the archive at path; with out
// non-empty the verified ref file's exact bytes are then written to out
// atomically (internal/atomicfile). Its fault points are listed at Import.
func ImportFile(ctx context.Context, s Store, path string, trust *envelope.KeyRing, out string, opts ...Option) (*ImportResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	defer f.Close()
	res, err := Import(ctx, s, f, trust, opts...)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	faultpoint.Reach("import-release")
	if out != "" {
		if err := atomicfile.WriteFile(out, res.RefFile, 0o644); err != nil {
			return nil, err
		}
		faultpoint.Reach("import-write")
	}
	return res, nil
}

// checkStored checks that every digest is in the store with the given
// size; a difference wraps ErrArtifactRefused.
func checkStored(ctx context.Context, s host.Content, sizes map[digest.Digest]int64) error {
	for d, n := range sizes {
		size, err := s.BlobSize(ctx, d)
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("blob %s is not in the content store after the import: %w", d, ErrArtifactRefused)
		}
		if err != nil {
			return fmt.Errorf("blob %s: %w", d, err)
		}
		if size != n {
			return fmt.Errorf("blob %s is %d bytes in the content store, %d expected: %w", d, size, n, ErrArtifactRefused)
		}
	}
	return nil
}

// verifyLayers checks every layer of the ref with verifyDiff, in order.
func verifyLayers(ctx context.Context, s host.Content, ref *snapshot.Ref) error {
	for i, l := range ref.Layers {
		if err := verifyDiff(ctx, s, l); err != nil {
			return fmt.Errorf("layers/%d: %w", i, err)
		}
	}
	return nil
}

// verifySpec reads the ref's spec blob (a /2 ref) with snapshot.ReadBlob:
// another size or digest wraps snapshot.ErrBlobCorrupt and
// ErrArtifactRefused (the artifact is refused); an absent blob wraps
// errdefs.ErrNotFound.
func verifySpec(ctx context.Context, s host.Content, ref *snapshot.Ref) error {
	d := ref.Spec
	if d == nil {
		return nil
	}
	blob, err := s.OpenBlob(ctx, ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size})
	if err != nil {
		return fmt.Errorf("spec %s: %w", d.Digest, err)
	}
	defer blob.Close()
	if _, err := snapshot.ReadBlob(blob, *d); err != nil {
		if errors.Is(err, snapshot.ErrBlobCorrupt) {
			return fmt.Errorf("spec: %w: %w", err, ErrArtifactRefused)
		}
		return fmt.Errorf("spec: %w", err)
	}
	return nil
}

// verifyDiff checks a layer blob that came with an archive or from
// a registry with snapshot.VerifyDiff: a mismatch wraps both
// snapshot.ErrDiffCorrupt and ErrArtifactRefused (the artifact is
// refused); an absent blob wraps errdefs.ErrNotFound.
func verifyDiff(ctx context.Context, s host.Content, d snapshot.Layer) error {
	blob, err := s.OpenBlob(ctx, ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size})
	if err != nil {
		return fmt.Errorf("layer %s: %w", d.Digest, err)
	}
	defer blob.Close()
	err = snapshot.VerifyDiff(blob, d)
	if errors.Is(err, snapshot.ErrDiffCorrupt) {
		return fmt.Errorf("%w: %w", err, ErrArtifactRefused)
	}
	return err
}
