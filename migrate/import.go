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
	// Received is the handoff this host received (the artifact carried a
	// statement naming it), else nil.
	Received *HandoffResult `json:"received,omitempty"`
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
//  6. with a handoff statement (the artifact's last layer, verified in
//     step 2 against trust and against the ref; one naming another host
//     than WithReceiver's is refused before step 3, superseded with reason
//     handed-off), the Received transition on this host's ledger
//     (docs/design.md "Exactly once across hosts");
//  7. the artifact, the layers, the spec and the base blobs that came with
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
//	import-received   step 6 done (an artifact with a statement)
//	import-hold       step 7's run lease holds them, the temporary lease
//	                  is not deleted yet
//	import-release    (ImportFile) the temporary lease is deleted
//
// and, in ImportFile with out, between steps 5 and 6:
//
//	import-write      out is written (renamed into place), the run lease
//	                  does not hold the content yet
//
// With WithProgress the archive bytes read are reported in the phases
// "scan" (step 1) and "import" (step 3), each with the archive's size as
// total, then "verify diff" (total -1) for step 4.
func Import(ctx context.Context, s Store, f io.ReadSeeker, trust *envelope.KeyRing, opts ...Option) (*ImportResult, error) {
	o := collectOptions(opts)
	st, err := importStaged(ctx, s, f, trust, o)
	if err != nil {
		return nil, err
	}
	defer st.done()
	return st.finish(ctx, s, o)
}

// once makes f callable any number of times, running it the first time.
func once(f func()) func() {
	done := false
	return func() {
		if !done {
			done = true
			f()
		}
	}
}

// stagedImport is an import whose content is verified and stored under
// the temporary lease, its base named, and not yet held by the run lease.
type stagedImport struct {
	art  *Artifact
	held []digest.Digest
	name *BaseName
	base []string
	done func() // deletes the temporary lease
}

// importStaged runs Import's steps 1–5 (see Import).
func importStaged(ctx context.Context, s Store, f io.ReadSeeker, trust *envelope.KeyRing, o options) (*stagedImport, error) {
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
	// A statement naming another host: refused before anything is stored.
	if err := checkReceiver(ctx, o.receiver, art); err != nil {
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
	ok := false
	defer func() {
		if !ok {
			done()
		}
	}()
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
	base := make([]string, len(art.Base))
	for i, d := range art.Base {
		base[i] = d.String()
	}
	ok = true
	return &stagedImport{art: art, held: held, name: name, base: base, done: once(done)}, nil
}

// finish runs Received for a statement naming this host (WithReceiver),
// then step 6: the run lease takes the content.
func (st *stagedImport) finish(ctx context.Context, s Store, o options) (*ImportResult, error) {
	art := st.art
	var recv *HandoffResult
	if art.Statement != nil {
		var err error
		if recv, err = receive(ctx, o.receiver, art); err != nil {
			return nil, err
		}
		faultpoint.Reach("import-received")
	}
	lease, err := holdRun(ctx, s, art.Ref, st.held...)
	if err != nil {
		return nil, err
	}
	faultpoint.Reach("import-hold")
	return &ImportResult{
		Run: art.Ref.Run, Manifest: art.Ref.Manifest, Pinned: art.Ref.Pinned,
		Artifact: art.Manifest, Lease: lease, Base: st.base, Blobs: len(st.held), BaseName: st.name,
		Ref: art.Ref, RefFile: art.RefFile, Received: recv,
	}, nil
}

// ImportFile is Import (with its options) of the archive at path; with out
// non-empty the verified ref file's exact bytes are written to out
// atomically (internal/atomicfile) after the base is named and before the
// run lease takes the content (docs/design.md "Hardening"), and removed
// again when that fails. An archive with a handoff statement follows
// docs/design.md "Exactly once across hosts": verify → temporary lease →
// out → Received → run lease, so a kill anywhere is finished by a rerun
// (fault points import-write, and import-out with a statement: out
// written, Received not run, the run lease not holding the content;
// import-received: Received ran; import-hold: the run lease holds it, the
// temporary lease not yet deleted; import-release: it is deleted); when
// Received refuses, out is removed.
func ImportFile(ctx context.Context, s Store, path string, trust *envelope.KeyRing, out string, opts ...Option) (*ImportResult, error) {
	o := collectOptions(opts)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	defer f.Close()
	st, err := importStaged(ctx, s, f, trust, o)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	defer st.done() // idempotent after the explicit call below
	// --out before the run lease takes the content, with or without a
	// statement (docs/design.md "Hardening": nothing half-stored); removed
	// again when the run lease does not take it.
	if out != "" {
		if err := atomicfile.WriteFile(out, st.art.RefFile, 0o644); err != nil {
			return nil, err
		}
		faultpoint.Reach("import-write")
		if st.art.Statement != nil {
			faultpoint.Reach("import-out")
		}
	}
	res, err := st.finish(ctx, s, o)
	if err != nil {
		if out != "" {
			_ = os.Remove(out)
		}
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	st.done()
	faultpoint.Reach("import-release")
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
