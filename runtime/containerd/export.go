package containerd

import (
	"context"
	"fmt"
	"io"

	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ArtifactImageName is the image name the artifact manifest carries in an
// exported archive's index.json ("io.containerd.image.name"; its tag, the
// run id, is "org.opencontainers.image.ref.name"), so `skopeo inspect --raw
// oci-archive:run.tar:<run>` and `ctr images import --no-unpack` name it.
// Import never creates image records from archive names.
func ArtifactImageName(run string) string { return "sandbox-resume.local/runs:" + run }

// ExportResult is what Export wrote.
type ExportResult struct {
	Run      string             `json:"run"`
	Artifact ocispec.Descriptor `json:"artifact"` // the artifact manifest
	Base     []string           `json:"base"`     // digests of the base index/manifest included (--with-base), else empty
	Path     string             `json:"path"`     // the archive file
	Size     int64              `json:"size"`     // bytes written
}

// Export writes the migration artifact of the run recorded in refFile as an
// OCI image layout archive to w (DESIGN "Moving runs"): StoreArtifact, then
// containerd's archive exporter (core/images/archive.Export over the
// client's content store, its blobs read ahead readBufferSize bytes at a
// time) with archive.WithSkipDockerManifest (no Docker manifest.json that
// would present the ref as an image config), the artifact manifest named
// ArtifactImageName(run). With withBase the base image goes in as well: its
// index (ref.base.indexDigest) when the index and every child it lists are
// complete in the content store, else its platform manifest; both are
// listed unnamed in index.json.
//
// With WithProgress the archive bytes written are reported in one phase,
// "export", whose total is the sum of the blob sizes (the tar headers come
// on top).
//
// Errors: those of StoreArtifact (2, 5, 6, 7); snapshot.ErrImageUnresolved
// when withBase and the base's config or a layer is absent; write errors.
func (r *Runtime) Export(ctx context.Context, refFile []byte, w io.Writer, withBase bool, opts ...MoveOption) (*ExportResult, error) {
	o := collectMoveOptions(opts)
	art, err := r.StoreArtifact(ctx, refFile)
	if err != nil {
		return nil, err
	}
	res := &ExportResult{Run: art.Ref.Run, Artifact: art.Manifest, Base: []string{}}
	eopts := []archive.ExportOpt{
		archive.WithManifest(art.Manifest, ArtifactImageName(art.Ref.Run)),
		archive.WithSkipDockerManifest(),
	}
	total := art.Manifest.Size + int64(len(refFile)) + art.Ref.Layers[0].Size
	if withBase {
		base, err := r.completeBase(ctx, art.Ref, art.Base)
		if err != nil {
			return nil, err
		}
		eopts = append(eopts, archive.WithManifest(base))
		res.Base = append(res.Base, base.Digest.String())
		total += r.treeSize(ctx, base)
	}
	o.progress.Phase("export", total)
	cw := &countingWriter{w: progressWriter{w: w, p: o.progress}}
	if err := archive.Export(ctx, readAheadProvider{r.client.ContentStore()}, cw, eopts...); err != nil {
		return nil, fmt.Errorf("export run %s (artifact %s): %w", art.Ref.Run, art.Manifest.Digest, native(err))
	}
	res.Size = cw.n
	return res, nil
}

// completeBase returns the descriptor of the base to ship: the index when
// it and all its children are complete, else the platform manifest, which
// must be complete (else snapshot.ErrImageUnresolved).
func (r *Runtime) completeBase(ctx context.Context, ref *snapshot.Ref, manifest ocispec.Descriptor) (ocispec.Descriptor, error) {
	missing, err := r.MissingContent(ctx, manifest.Digest)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if len(missing) > 0 {
		return ocispec.Descriptor{}, fmt.Errorf("run %s: base manifest %s: %d blobs missing (%s): %w", ref.Run, manifest.Digest, len(missing), missing[0], snapshot.ErrImageUnresolved)
	}
	if ref.Base.IndexDigest == "" {
		return manifest, nil
	}
	cs := r.client.ContentStore()
	data, err := readBlob(ctx, cs, ocispec.Descriptor{Digest: ref.Base.IndexDigest})
	if err != nil {
		return manifest, nil // the index is not here: the platform manifest alone
	}
	mt, err := detectMediaType(data)
	if err != nil || !images.IsIndexType(mt) {
		return manifest, nil
	}
	idx := ocispec.Descriptor{MediaType: mt, Digest: ref.Base.IndexDigest, Size: int64(len(data))}
	_, _, _, absent, err := images.Check(ctx, cs, idx, platforms.All)
	if err != nil || len(absent) > 0 {
		return manifest, nil
	}
	return idx, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ExportFile is Export (with its options) into the file path, written atomically: a temporary
// file in the same directory, fsync, rename, fsync of the directory. A
// failure leaves no file at path (an existing one is kept unchanged).
func (r *Runtime) ExportFile(ctx context.Context, refFile []byte, path string, withBase bool, opts ...MoveOption) (*ExportResult, error) {
	var res *ExportResult
	err := atomicfile.Create(path, 0o644, atomicfile.Options{}, func(w io.Writer) (err error) {
		res, err = r.Export(ctx, refFile, w, withBase, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	res.Path = path
	return res, nil
}
