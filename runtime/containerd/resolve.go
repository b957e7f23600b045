package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// maxMetadataSize bounds the index, manifest and config blobs ResolveImage
// reads, in bytes.
const maxMetadataSize = 4 << 20

// ResolveImage resolves ref through the image and content stores for the host
// platform (docs/design.md "Resume decision" check 8; host.ResolveImage).
//
// ref is normalized with reference.ParseDockerRef ("busybox:1" →
// "docker.io/library/busybox:1"; images must be stored under normalized
// names, as ctr and nerdctl name pulls). A reference with a tag is looked up
// in the image store under that name. A reference with a digest resolves the
// digest as a content store key (the image store is not consulted; the tag, if
// any, is dropped). When the target is an index, the platform manifest is
// chosen with platforms.OnlyStrict(host platform) (children without a
// platform are matched by their config's platform); a manifest target must
// have a config for the host platform.
//
// Returned: Name (normalized reference), IndexDigest (empty for a manifest
// target), ManifestDigest, ConfigDigest, Platform ("os/arch[/variant]") and
// the config's rootfs DiffIDs, in order (never nil).
//
// Errors: errdefs.ErrInvalidArgument for an unparsable reference or a blob
// that is not an image index, manifest or config; errdefs.ErrNotFound for an
// unknown name, an absent blob, or no manifest for the host platform. Each
// names the reference and the digest concerned.
func (r *Runtime) ResolveImage(ctx context.Context, ref string) (snapshot.Base, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return snapshot.Base{}, fmt.Errorf("image reference %q: %w: %w", ref, errdefs.ErrInvalidArgument, err)
	}
	name := named.String()
	cs := r.client.ContentStore()

	var (
		target ocispec.Descriptor
		data   []byte
	)
	if dg, ok := named.(reference.Digested); ok {
		d := dg.Digest()
		data, err = r.readBlob(ctx, cs, ocispec.Descriptor{Digest: d})
		if err != nil {
			return snapshot.Base{}, fmt.Errorf("image %q: %w", name, err)
		}
		mt, err := detectMediaType(data)
		if err != nil {
			return snapshot.Base{}, fmt.Errorf("image %q: blob %s: %w", name, d, err)
		}
		target = ocispec.Descriptor{MediaType: mt, Digest: d, Size: int64(len(data))}
	} else {
		img, err := r.client.ImageService().Get(ctx, name)
		if err != nil {
			return snapshot.Base{}, fmt.Errorf("namespace %s: %w", r.namespace, native(err))
		}
		target = img.Target
	}

	// Fast path: when the index, manifest and config bytes are all cached,
	// resolve from the cache and confirm their presence with concurrent Info
	// calls. Anything else (a miss, an absent blob, an error) takes the
	// sequential path, which reads and reports.
	dry := &blobReader{r: r, cs: cs, dry: true}
	if base, err := r.resolveTarget(ctx, dry, name, target, data); err == nil && r.present(ctx, cs, dry.touched) {
		return base, nil
	}
	return r.resolveTarget(ctx, &blobReader{r: r, cs: cs}, name, target, data)
}

// resolveTarget resolves target (an index or manifest; data holds its bytes
// when already read) for the host platform, reading blobs through rd.
func (r *Runtime) resolveTarget(ctx context.Context, rd *blobReader, name string, target ocispec.Descriptor, data []byte) (snapshot.Base, error) {
	base := snapshot.Base{Name: name}
	manifestDesc := target
	var (
		manifestPlatform *ocispec.Platform
		err              error
	)
	switch {
	case images.IsIndexType(target.MediaType):
		base.IndexDigest = target.Digest
		manifestDesc, manifestPlatform, err = r.chooseManifest(ctx, rd, target, data)
		if err != nil {
			return snapshot.Base{}, fmt.Errorf("image %q: %w", name, err)
		}
		data = nil
	case images.IsManifestType(target.MediaType):
	default:
		return snapshot.Base{}, fmt.Errorf("image %q: target %s has media type %q, not an index or manifest: %w",
			name, target.Digest, target.MediaType, errdefs.ErrInvalidArgument)
	}

	m, cfg, err := r.readManifest(ctx, rd, manifestDesc, data)
	if err != nil {
		return snapshot.Base{}, fmt.Errorf("image %q: %w", name, err)
	}
	p := configPlatform(cfg)
	if manifestPlatform != nil {
		p = platforms.Normalize(*manifestPlatform)
	} else if !r.matcher.Match(p) {
		return snapshot.Base{}, fmt.Errorf("image %q: manifest %s is for platform %q, not the host platform %s: %w",
			name, manifestDesc.Digest, platforms.Format(p), r.Platform(), errdefs.ErrNotFound)
	}
	base.ManifestDigest = manifestDesc.Digest
	base.ConfigDigest = m.Config.Digest
	base.Platform = platforms.Format(p)
	base.DiffIDs = append([]digest.Digest{}, cfg.RootFS.DiffIDs...)
	return base, nil
}

// errCacheMiss ends a dry resolution at the first blob not in the cache.
var errCacheMiss = errors.New("not cached")

// blobReader reads the blobs of one resolution. A dry reader answers only
// from r's cache, without asking the daemon, and records the digests it
// served in touched; a normal reader is Runtime.readBlob.
type blobReader struct {
	r       *Runtime
	cs      content.Store
	dry     bool
	touched []digest.Digest
}

func (b *blobReader) read(ctx context.Context, desc ocispec.Descriptor) ([]byte, error) {
	if !b.dry {
		return b.r.readBlob(ctx, b.cs, desc)
	}
	data, ok := b.r.cache.get(desc.Digest)
	if !ok {
		return nil, errCacheMiss
	}
	b.touched = append(b.touched, desc.Digest)
	return data, nil
}

// present reports whether every digest is in the content store, asking Info
// for all of them concurrently.
func (r *Runtime) present(ctx context.Context, cs content.Store, dgsts []digest.Digest) bool {
	var (
		wg sync.WaitGroup
		ok atomic.Bool
	)
	ok.Store(true)
	for _, d := range dgsts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cs.Info(ctx, d); err != nil {
				ok.Store(false)
			}
		}()
	}
	wg.Wait()
	return ok.Load()
}

// chooseManifest reads the index idx (data when already read) and returns the
// first child matching the host platform (platforms.OnlyStrict, ordered by
// its Less), with the platform it matched.
func (r *Runtime) chooseManifest(ctx context.Context, rd *blobReader, idx ocispec.Descriptor, data []byte) (ocispec.Descriptor, *ocispec.Platform, error) {
	var err error
	if data == nil {
		if data, err = rd.read(ctx, idx); err != nil {
			return ocispec.Descriptor{}, nil, err
		}
	}
	var index ocispec.Index
	if err := json.Unmarshal(data, &index); err != nil {
		return ocispec.Descriptor{}, nil, fmt.Errorf("index %s: %w: %w", idx.Digest, errdefs.ErrInvalidArgument, err)
	}
	type candidate struct {
		desc ocispec.Descriptor
		p    ocispec.Platform
	}
	var found []candidate
	for _, d := range index.Manifests {
		if !images.IsManifestType(d.MediaType) {
			continue // nested indexes and artifacts are not image manifests for a platform
		}
		var p ocispec.Platform
		if d.Platform != nil {
			p = platforms.Normalize(*d.Platform)
		} else {
			_, cfg, err := r.readManifest(ctx, rd, d, nil)
			if err != nil {
				return ocispec.Descriptor{}, nil, fmt.Errorf("index %s: %w", idx.Digest, err)
			}
			p = configPlatform(cfg)
		}
		if r.matcher.Match(p) {
			found = append(found, candidate{d, p})
		}
	}
	if len(found) == 0 {
		return ocispec.Descriptor{}, nil, fmt.Errorf("index %s has no manifest for platform %s: %w", idx.Digest, r.Platform(), errdefs.ErrNotFound)
	}
	sort.SliceStable(found, func(i, j int) bool { return r.matcher.Less(found[i].p, found[j].p) })
	return found[0].desc, &found[0].p, nil
}

// readManifest reads the manifest desc (data when already read) and its image
// config.
func (r *Runtime) readManifest(ctx context.Context, rd *blobReader, desc ocispec.Descriptor, data []byte) (ocispec.Manifest, ocispec.Image, error) {
	var err error
	if data == nil {
		if data, err = rd.read(ctx, desc); err != nil {
			return ocispec.Manifest{}, ocispec.Image{}, err
		}
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, fmt.Errorf("manifest %s: %w: %w", desc.Digest, errdefs.ErrInvalidArgument, err)
	}
	if !images.IsConfigType(m.Config.MediaType) {
		return ocispec.Manifest{}, ocispec.Image{}, fmt.Errorf("manifest %s: config %s has media type %q, not an image config: %w",
			desc.Digest, m.Config.Digest, m.Config.MediaType, errdefs.ErrInvalidArgument)
	}
	cb, err := rd.read(ctx, m.Config)
	if err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, fmt.Errorf("manifest %s: config: %w", desc.Digest, err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(cb, &cfg); err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, fmt.Errorf("manifest %s: config %s: %w: %w", desc.Digest, m.Config.Digest, errdefs.ErrInvalidArgument, err)
	}
	return m, cfg, nil
}

// configPlatform returns the normalized os/arch/variant of an image config.
func configPlatform(cfg ocispec.Image) ocispec.Platform {
	return platforms.Normalize(ocispec.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant})
}

// detectMediaType tells an index from a manifest by the blob's mediaType
// member, else by its members (manifests → index; config → manifest).
func detectMediaType(data []byte) (string, error) {
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		return "", fmt.Errorf("not JSON: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	if images.IsIndexType(idx.MediaType) || images.IsManifestType(idx.MediaType) {
		return idx.MediaType, nil
	}
	if idx.MediaType == "" {
		if len(idx.Manifests) > 0 {
			return ocispec.MediaTypeImageIndex, nil
		}
		var m ocispec.Manifest
		if err := json.Unmarshal(data, &m); err == nil && m.Config.Digest != "" {
			return ocispec.MediaTypeImageManifest, nil
		}
	}
	return "", fmt.Errorf("media type %q is not an image index or manifest: %w", idx.MediaType, errdefs.ErrInvalidArgument)
}

// readBlob reads a small blob through r's cache: cached bytes are returned
// after Info confirmed the blob is present; read bytes are verified and
// cached.
func (r *Runtime) readBlob(ctx context.Context, cs content.Store, desc ocispec.Descriptor) ([]byte, error) {
	if err := desc.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("digest %q: %w: %w", desc.Digest, errdefs.ErrInvalidArgument, err)
	}
	if b, ok := r.cache.get(desc.Digest); ok {
		if _, err := cs.Info(ctx, desc.Digest); err != nil {
			return nil, fmt.Errorf("blob %s: %w", desc.Digest, native(err))
		}
		return b, nil
	}
	b, err := readBlob(ctx, cs, desc)
	if err == nil {
		r.cache.put(desc.Digest, b)
	}
	return b, err
}

// readBlob reads a small blob (at most maxMetadataSize bytes) from the
// content store and checks its digest. Errors name the digest:
// errdefs.ErrNotFound when absent, errdefs.ErrInvalidArgument when too large
// or the digest is invalid, errdefs.ErrDataLoss when the bytes do not match.
func readBlob(ctx context.Context, cs content.Provider, desc ocispec.Descriptor) ([]byte, error) {
	if err := desc.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("digest %q: %w: %w", desc.Digest, errdefs.ErrInvalidArgument, err)
	}
	ra, err := cs.ReaderAt(ctx, desc)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", desc.Digest, native(err))
	}
	defer ra.Close()
	size := ra.Size()
	if size > maxMetadataSize {
		return nil, fmt.Errorf("blob %s: %d bytes, more than the %d allowed for an index, manifest or config: %w",
			desc.Digest, size, maxMetadataSize, errdefs.ErrInvalidArgument)
	}
	b := make([]byte, size)
	if _, err := ra.ReadAt(b, 0); err != nil && int64(len(b)) != size {
		return nil, fmt.Errorf("blob %s: read: %w", desc.Digest, native(err))
	}
	if got := desc.Digest.Algorithm().FromBytes(b); got != desc.Digest {
		return nil, fmt.Errorf("blob %s: content store returned bytes with digest %s: %w", desc.Digest, got, errdefs.ErrDataLoss)
	}
	return b, nil
}

// MissingContent returns the digests among the manifest, its config and every
// layer that are absent from the content store, in manifest order (config,
// then layers), or nil when all are present (host.MissingContent;
// docs/design.md "Resume decision" check 8). An absent manifest is returned alone. It
// reads images.Check's missing list, never its available flag (which is true
// with layers missing — measured in notes/derisk.md).
//
// Errors: errdefs.ErrInvalidArgument for an invalid digest or a blob that is
// not a manifest; daemon errors classified with errdefs; each names the
// manifest digest.
func (r *Runtime) MissingContent(ctx context.Context, manifest digest.Digest) ([]digest.Digest, error) {
	if err := manifest.Validate(); err != nil {
		return nil, fmt.Errorf("manifest digest %q: %w: %w", manifest, errdefs.ErrInvalidArgument, err)
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: manifest}
	_, _, _, missing, err := images.Check(ctx, cachedProvider{r.client.ContentStore(), &r.cache}, desc, platforms.All)
	if err != nil {
		err = native(err)
		if !errdefs.IsNotFound(err) && !errdefs.IsUnavailable(err) && !errdefs.IsCanceled(err) && !errdefs.IsDeadlineExceeded(err) {
			err = fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
		}
		return nil, fmt.Errorf("manifest %s: presence check: %w", manifest, err)
	}
	if len(missing) == 0 {
		return nil, nil
	}
	out := make([]digest.Digest, len(missing))
	for i, d := range missing {
		out[i] = d.Digest
	}
	return out, nil
}

// BlobSize returns the size in bytes the content store records for dgst
// (host.BlobSize). Errors: errdefs.ErrInvalidArgument for an invalid
// digest, errdefs.ErrNotFound when the blob is absent from this namespace;
// each names the digest.
func (r *Runtime) BlobSize(ctx context.Context, dgst digest.Digest) (int64, error) {
	if err := dgst.Validate(); err != nil {
		return 0, fmt.Errorf("blob digest %q: %w: %w", dgst, errdefs.ErrInvalidArgument, err)
	}
	info, err := r.client.ContentStore().Info(ctx, dgst)
	if err != nil {
		return 0, fmt.Errorf("blob %s: %w", dgst, native(err))
	}
	return info.Size, nil
}
