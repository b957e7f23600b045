package migrate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ArtifactImageName is the image name the artifact manifest carries in an
// exported archive's index.json ("io.containerd.image.name"; its tag, the
// run id, is "org.opencontainers.image.ref.name"), so `skopeo inspect --raw
// oci-archive:run.tar:<run>` and `ctr images import --no-unpack` name it.
// Import never creates image records from archive names.
func ArtifactImageName(run string) string { return "sandbox-resume.local/runs:" + run }

// storedArtifact is the migration artifact of a run as storeArtifact wrote
// it into the content store: the ref (opened without its signature: the
// receiving host verifies it), the descriptors of the artifact manifest,
// its config and its layers (Payload of the ref), the base image's
// platform manifest (the subject), and the run lease that holds them.
type storedArtifact struct {
	Ref      *snapshot.Ref
	Manifest ocispec.Descriptor
	Config   ocispec.Descriptor
	Layers   []ocispec.Descriptor
	Base     ocispec.Descriptor
	Lease    string
}

// storeArtifact writes the migration artifact of the run recorded in
// refFile into the store (docs/design.md "Moving runs"): the config blob
// (media type snapshot.MediaTypeRef, refFile's exact bytes) and the
// artifact manifest (ArtifactManifest), both held by the run lease
// snapshot.RunLease(run) (created when absent, labelled with the run and
// the ref's creation time). The same ref always gives the same manifest.
//
// refFile goes through snapshot.OpenRefUnsafe (parse, schema, integrity:
// the receiving host checks the signature). Errors: the ref's
// (*snapshot.OpenError); errdef.ErrSnapshotMissing when a layer or the spec blob
// is absent or has another size; errdef.ErrImageUnresolved when the base platform
// manifest is absent; the store's. Each names the digest.
func storeArtifact(ctx context.Context, s Store, refFile []byte, statement []byte) (*storedArtifact, error) {
	ref, err := snapshot.OpenRefUnsafe(refFile)
	if err != nil {
		return nil, err
	}
	payload := Payload(ref)
	digests := make([]digest.Digest, len(payload))
	for i, d := range payload {
		digests[i] = d.Digest
	}
	base, err := payloadPresent(ctx, s, ref)
	if err != nil {
		return nil, err
	}
	var stDesc *ocispec.Descriptor
	if statement != nil {
		stDesc = &ocispec.Descriptor{MediaType: MediaTypeHandoff, Digest: digest.FromBytes(statement), Size: int64(len(statement))}
	}
	body, mdesc, err := artifactManifest(refFile, ref, base, stDesc)
	if err != nil {
		return nil, err
	}
	lease, err := ensureRunLease(ctx, s, ref)
	if err != nil {
		return nil, err
	}
	if stDesc != nil {
		if _, err := s.WriteBlob(ctx, lease, lease+"/handoff-"+stDesc.Digest.Encoded(), MediaTypeHandoff, statement); err != nil {
			return nil, err
		}
		digests = append(digests, stDesc.Digest)
		payload = append(payload, *stDesc)
	}
	cfg, err := s.WriteBlob(ctx, lease, lease+"/ref", snapshot.MediaTypeRef, refFile)
	if err != nil {
		return nil, err
	}
	if _, err := s.WriteBlob(ctx, lease, lease+"/artifact", ocispec.MediaTypeImageManifest, body); err != nil {
		return nil, err
	}
	// The artifact manifest keeps its config and layer alive for whoever
	// names it, as pulled images do.
	if err := s.SetChildren(ctx, mdesc.Digest, append([]digest.Digest{cfg.Digest}, digests...)...); err != nil {
		return nil, fmt.Errorf("artifact manifest %s: %w", mdesc.Digest, err)
	}
	if err := s.AddToLease(ctx, lease, append(digests, base.Digest)...); err != nil {
		return nil, err
	}
	return &storedArtifact{Ref: ref, Manifest: mdesc, Config: cfg, Base: base, Lease: lease, Layers: payload}, nil
}

// payloadPresent checks that every blob of Payload(ref) is in the store
// with its recorded size (else errdef.ErrSnapshotMissing) and returns the base
// manifest's descriptor (baseManifest). Export and Push run it before a
// handoff too, so a run whose content is not here is not handed off.
func payloadPresent(ctx context.Context, s host.Content, ref *snapshot.Ref) (ocispec.Descriptor, error) {
	for _, d := range Payload(ref) {
		size, err := s.BlobSize(ctx, d.Digest)
		switch {
		case errdefs.IsNotFound(err):
			return ocispec.Descriptor{}, fmt.Errorf("run %s: blob %s (%s) is not in the content store: %w", ref.Run, d.Digest, d.MediaType, errdef.ErrSnapshotMissing)
		case err != nil:
			return ocispec.Descriptor{}, fmt.Errorf("run %s: blob %s: %w", ref.Run, d.Digest, err)
		case size != d.Size:
			return ocispec.Descriptor{}, fmt.Errorf("run %s: blob %s (%s) is %d bytes in the content store, the ref records %d: %w", ref.Run, d.Digest, d.MediaType, size, d.Size, errdef.ErrSnapshotMissing)
		}
	}
	return baseManifest(ctx, s, ref)
}

// baseManifest returns the descriptor of the ref's base platform manifest
// from the store, or an error wrapping errdef.ErrImageUnresolved.
func baseManifest(ctx context.Context, s host.Content, ref *snapshot.Ref) (ocispec.Descriptor, error) {
	dg := ref.Base.ManifestDigest
	data, err := s.ReadBlob(ctx, dg)
	if errdefs.IsNotFound(err) {
		return ocispec.Descriptor{}, fmt.Errorf("run %s: base manifest %s (%s) is not in the content store: %w",
			ref.Run, dg, ref.Base.Name, errdef.ErrImageUnresolved)
	}
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("run %s: base manifest: %w", ref.Run, err)
	}
	mt, err := imageMediaType(data)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("run %s: base manifest %s: %w", ref.Run, dg, err)
	}
	return ocispec.Descriptor{MediaType: mt, Digest: dg, Size: int64(len(data))}, nil
}

// ensureRunLease creates the run lease of ref when it does not exist and
// returns its id.
func ensureRunLease(ctx context.Context, s host.Leases, ref *snapshot.Ref) (string, error) {
	id := snapshot.RunLease(ref.Run)
	err := s.CreateLease(ctx, id, map[string]string{snapshot.LabelRun: ref.Run, snapshot.LabelCreated: ref.Created})
	if err != nil && !errdefs.IsAlreadyExists(err) {
		return "", err
	}
	return id, nil
}

// holdRun adds the digests to the run lease of ref (created when absent)
// and returns the lease id.
func holdRun(ctx context.Context, s host.Leases, ref *snapshot.Ref, dgsts ...digest.Digest) (string, error) {
	lease, err := ensureRunLease(ctx, s, ref)
	if err != nil {
		return "", err
	}
	return lease, s.AddToLease(ctx, lease, dgsts...)
}

// ExportResult is what Export wrote.
type ExportResult struct {
	Run      string             `json:"run"`
	Artifact ocispec.Descriptor `json:"artifact"` // the artifact manifest
	Base     []string           `json:"base"`     // digests of the base index/manifest included (withBase), else empty
	Path     string             `json:"path"`     // the archive file
	Size     int64              `json:"size"`     // bytes written
	// Handoff is the handoff the archive carries (WithHandoff), else nil.
	Handoff *HandoffResult `json:"handoff,omitempty"`
}

// Export writes the migration artifact of the run recorded in refFile as an
// OCI image layout archive to w (docs/design.md "Moving runs"): the
// artifact is stored first (the run lease holds it, see Store), then the
// store's archive writer writes it, the artifact manifest named
// ArtifactImageName(run). With withBase the base image goes in as well:
// its index (ref.base.indexDigest) when the index and every child it lists
// are complete in the store, else its platform manifest; both are listed
// unnamed in index.json.
//
// With WithHandoff the run is handed over first (docs/design.md "Exactly
// once across hosts"): the payload is checked, HandedOff runs on the
// Handoff's ledger (a retried handoff to the same host is no change; its
// refusals are the ledger's), and the signed statement is the artifact's
// last layer, its bytes fixed by the record (a retried export writes the
// same archive). Fault point export-handedoff: HandedOff ran, nothing
// else is stored.
//
// With WithProgress the archive bytes written are reported in one phase,
// "export", whose total is the sum of the blob sizes (the tar headers come
// on top).
//
// Errors: the ref's (*snapshot.OpenError); errdef.ErrSnapshotMissing when the
// rootfs diff is absent or has another size; errdef.ErrImageUnresolved
// when the base manifest is absent, or, with withBase, its config or a
// layer; write errors.
func Export(ctx context.Context, s Store, refFile []byte, w io.Writer, withBase bool, opts ...Option) (*ExportResult, error) {
	o := collectOptions(opts)
	statement, rec, err := handOff(ctx, s, o.handoff, refFile)
	if err != nil {
		return nil, err
	}
	faultpoint.Reach("export-handedoff")
	art, err := storeArtifact(ctx, s, refFile, statement)
	if err != nil {
		return nil, err
	}
	res := &ExportResult{Run: art.Ref.Run, Artifact: art.Manifest, Base: []string{}, Handoff: handoffResult(rec, statement, o.handoff)}
	entries := []host.ArchiveEntry{{Desc: art.Manifest, Name: ArtifactImageName(art.Ref.Run)}}
	total := art.Manifest.Size + int64(len(refFile)) + payloadSize(art.Ref) + int64(len(statement))
	if withBase {
		base, err := completeBase(ctx, s, art.Ref, art.Base)
		if err != nil {
			return nil, err
		}
		entries = append(entries, host.ArchiveEntry{Desc: base})
		res.Base = append(res.Base, base.Digest.String())
		total += treeSize(ctx, s, base)
	}
	o.progress.Phase("export", total)
	cw := &countingWriter{w: progressWriter{w: w, p: o.progress}}
	if err := s.WriteArchive(ctx, cw, entries...); err != nil {
		return nil, fmt.Errorf("export run %s (artifact %s): %w", art.Ref.Run, art.Manifest.Digest, err)
	}
	res.Size = cw.n
	return res, nil
}

// exportBufferSize is how many archive bytes ExportFile gathers per write
// to the file (the archive writer's are 32 KiB copies and 512-byte
// headers).
const exportBufferSize = 1 << 20

// handoffResult describes the handoff HandedOff recorded (nil without one).
func handoffResult(rec *ledger.Record, statement []byte, h *Handoff) *HandoffResult {
	if rec == nil || rec.HandedOff == nil {
		return nil
	}
	return &HandoffResult{
		Statement: ocispec.Descriptor{MediaType: MediaTypeHandoff, Digest: digest.FromBytes(statement), Size: int64(len(statement))},
		From:      h.Host, To: rec.HandedOff.To, At: rec.HandedOff.At.UTC().Format(time.RFC3339Nano), State: rec.State, Fence: rec.Fence,
	}
}

// ExportFile is Export (with its options) into the file path, written
// atomically (internal/atomicfile: a temporary file in the same directory,
// written exportBufferSize bytes at a time, one fsync at the end, rename,
// fsync of the directory). A failure leaves no file at path (an existing
// one is kept unchanged).
func ExportFile(ctx context.Context, s Store, refFile []byte, path string, withBase bool, opts ...Option) (*ExportResult, error) {
	var res *ExportResult
	err := atomicfile.Create(path, 0o644, atomicfile.Options{}, func(w io.Writer) (err error) {
		bw := bufio.NewWriterSize(w, exportBufferSize)
		if res, err = Export(ctx, s, refFile, bw, withBase, opts...); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return nil, err
	}
	res.Path = path
	return res, nil
}

// completeBase returns the descriptor of the base to ship: the index when
// it and all its children are complete in the store, else the platform
// manifest, which must be complete (else errdef.ErrImageUnresolved).
func completeBase(ctx context.Context, s host.Content, ref *snapshot.Ref, manifest ocispec.Descriptor) (ocispec.Descriptor, error) {
	missing, err := s.MissingContent(ctx, manifest.Digest)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if len(missing) > 0 {
		return ocispec.Descriptor{}, fmt.Errorf("run %s: base manifest %s: %d blobs missing (%s): %w", ref.Run, manifest.Digest, len(missing), missing[0], errdef.ErrImageUnresolved)
	}
	if ref.Base.IndexDigest == "" {
		return manifest, nil
	}
	data, err := s.ReadBlob(ctx, ref.Base.IndexDigest)
	if err != nil {
		return manifest, nil // the index is not here: the platform manifest alone
	}
	mt, err := imageMediaType(data)
	if err != nil || !isIndexType(mt) {
		return manifest, nil
	}
	if !indexComplete(ctx, s, data, 0) {
		return manifest, nil
	}
	return ocispec.Descriptor{MediaType: mt, Digest: ref.Base.IndexDigest, Size: int64(len(data))}, nil
}

// indexComplete reports whether every manifest an index lists (and every
// index it lists, two levels at most) is in the store with its config and
// layers, and every other descriptor it lists is present.
func indexComplete(ctx context.Context, s host.Content, data []byte, depth int) bool {
	var idx ocispec.Index
	if json.Unmarshal(data, &idx) != nil || depth > 2 {
		return false
	}
	for _, c := range idx.Manifests {
		switch {
		case isIndexType(c.MediaType):
			b, err := s.ReadBlob(ctx, c.Digest)
			if err != nil || !indexComplete(ctx, s, b, depth+1) {
				return false
			}
		case isManifestType(c.MediaType):
			if missing, err := s.MissingContent(ctx, c.Digest); err != nil || len(missing) > 0 {
				return false
			}
		default:
			if _, err := s.BlobSize(ctx, c.Digest); err != nil {
				return false
			}
		}
	}
	return true
}

// treeSize returns the bytes of desc and every blob it references, each
// counted once; it is only a progress total, so an unreadable child ends
// the walk early.
func treeSize(ctx context.Context, s host.Content, desc ocispec.Descriptor) int64 {
	seen := map[digest.Digest]bool{}
	var total int64
	var walk func(d ocispec.Descriptor, depth int)
	walk = func(d ocispec.Descriptor, depth int) {
		if seen[d.Digest] || depth > 3 {
			return
		}
		seen[d.Digest] = true
		total += d.Size
		if !isIndexType(d.MediaType) && !isManifestType(d.MediaType) {
			return
		}
		b, err := s.ReadBlob(ctx, d.Digest)
		if err != nil {
			return
		}
		var probe struct {
			Manifests []ocispec.Descriptor `json:"manifests"`
			Config    *ocispec.Descriptor  `json:"config"`
			Layers    []ocispec.Descriptor `json:"layers"`
		}
		if json.Unmarshal(b, &probe) != nil {
			return
		}
		for _, c := range probe.Manifests {
			walk(c, depth+1)
		}
		if probe.Config != nil {
			walk(*probe.Config, depth+1)
		}
		for _, l := range probe.Layers {
			walk(l, depth+1)
		}
	}
	walk(desc, 0)
	return total
}
