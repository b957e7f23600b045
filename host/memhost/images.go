package memhost

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Image is an image AddImage records, with no image bytes: Base as
// ResolveImage returns it, the digests of its layer blobs (Layers), which
// HoldBase leases, and its config's labels (Labels), which ImageLabels
// returns for Base.ConfigDigest.
type Image struct {
	Base   snapshot.Base
	Layers []digest.Digest
	Labels map[string]string
}

// AddImage records an image under its Base.Name, and its index, manifest,
// config and layer blobs as placeholder content where the store has none
// (held while the record exists).
func (h *Machine) AddImage(img Image) {
	h.mu.Lock()
	defer h.mu.Unlock()
	img.Labels = maps.Clone(img.Labels)
	img.Layers = slices.Clone(img.Layers)
	h.records[img.Base.Name] = img
	for _, d := range recordBlobs(img) {
		if _, ok := h.blobs[d]; !ok {
			h.blobs[d] = []byte("placeholder for " + d.String())
		}
	}
}

func recordBlobs(img Image) []digest.Digest {
	var out []digest.Digest
	for _, d := range append([]digest.Digest{img.Base.IndexDigest, img.Base.ManifestDigest, img.Base.ConfigDigest}, img.Layers...) {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// SetImage points the image name at target (creating or re-pointing it).
// name is normalized with reference.ParseDockerRef first, as the stores of
// ctr and nerdctl name images; errdefs.ErrInvalidArgument if it does not
// parse.
func (h *Machine) SetImage(name string, target ocispec.Descriptor) error {
	n, err := reference.ParseDockerRef(name)
	if err != nil {
		return fmt.Errorf("memhost: image name %q: %w: %w", name, errdefs.ErrInvalidArgument, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.images[n.String()] = target
	return nil
}

// Images returns the image store: name → target (SetImage, CreateImage).
func (h *Machine) Images() map[string]ocispec.Descriptor {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.images)
}

// DeleteImage removes an image (an AddImage record or a name of the image
// store; its content stays until nothing holds it) and runs the GC.
func (h *Machine) DeleteImage(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.records, name)
	delete(h.images, name)
	h.gc()
}

// ImageTarget implements host.Images.
func (h *Machine) ImageTarget(ctx context.Context, name string) (ocispec.Descriptor, error) {
	if err := h.enter(ctx, OpImageTarget); err != nil {
		return ocispec.Descriptor{}, err
	}
	defer h.mu.Unlock()
	d, ok := h.images[name]
	if !ok {
		return ocispec.Descriptor{}, notFound("image %s", name)
	}
	return d, nil
}

// CreateImage implements host.Images.
func (h *Machine) CreateImage(ctx context.Context, name string, target ocispec.Descriptor) error {
	if err := h.enter(ctx, OpCreateImage); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if _, ok := h.images[name]; ok {
		return fmt.Errorf("image %s: %w", name, errdefs.ErrAlreadyExists)
	}
	h.images[name] = target
	return nil
}

// ResolveImage implements host.Images: an AddImage record by normalized
// name or by the index or manifest digest a reference carries; otherwise
// as runtime/containerd does, a tag through the image store, a digest as a
// content key, an index through platforms.OnlyStrict of the host
// platform.
func (h *Machine) ResolveImage(ctx context.Context, ref string) (snapshot.Base, error) {
	if err := h.enter(ctx, OpResolveImage); err != nil {
		return snapshot.Base{}, err
	}
	defer h.mu.Unlock()
	return h.resolve(ref)
}

func (h *Machine) resolve(ref string) (snapshot.Base, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return snapshot.Base{}, fmt.Errorf("image reference %q: %w: %w", ref, errdefs.ErrInvalidArgument, err)
	}
	name := named.String()
	var target digest.Digest
	if dg, ok := named.(reference.Digested); ok {
		for _, img := range h.records {
			if img.Base.IndexDigest == dg.Digest() || img.Base.ManifestDigest == dg.Digest() {
				b := img.Base
				b.Name = name
				return b, nil
			}
		}
		target = dg.Digest()
	} else {
		if img, ok := h.records[name]; ok {
			return img.Base, nil
		}
		desc, ok := h.images[name]
		if !ok {
			return snapshot.Base{}, notFound("image %q", name)
		}
		target = desc.Digest
	}
	b, err := h.blob(target)
	if err != nil {
		return snapshot.Base{}, fmt.Errorf("image %q: %w", name, err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return snapshot.Base{}, fmt.Errorf("image %q: blob %s: %w: %w", name, target, errdefs.ErrInvalidArgument, err)
	}
	if h.matcher == nil {
		return snapshot.Base{}, fmt.Errorf("image %q: the host platform %q does not parse: %w", name, h.host.Platform, errdefs.ErrNotFound)
	}
	base := snapshot.Base{Name: name, ManifestDigest: target}
	var chosen *ocispec.Platform
	if idx.MediaType == ocispec.MediaTypeImageIndex || (idx.MediaType == "" && len(idx.Manifests) > 0) {
		base.IndexDigest = target
		type cand struct {
			d digest.Digest
			p ocispec.Platform
		}
		var found []cand
		for _, d := range idx.Manifests {
			if d.MediaType != ocispec.MediaTypeImageManifest {
				continue
			}
			var p ocispec.Platform
			if d.Platform != nil {
				p = platforms.Normalize(*d.Platform)
			} else {
				_, cfg, err := h.manifestAndConfig(d.Digest)
				if err != nil {
					return snapshot.Base{}, fmt.Errorf("image %q: index %s: %w", name, target, err)
				}
				p = cfgPlatform(cfg)
			}
			if h.matcher.Match(p) {
				found = append(found, cand{d.Digest, p})
			}
		}
		if len(found) == 0 {
			return snapshot.Base{}, fmt.Errorf("image %q: index %s has no manifest for platform %s: %w", name, target, h.host.Platform, errdefs.ErrNotFound)
		}
		sort.SliceStable(found, func(i, j int) bool { return h.matcher.Less(found[i].p, found[j].p) })
		base.ManifestDigest, chosen = found[0].d, &found[0].p
	}
	m, cfg, err := h.manifestAndConfig(base.ManifestDigest)
	if err != nil {
		return snapshot.Base{}, fmt.Errorf("image %q: %w", name, err)
	}
	p := cfgPlatform(cfg)
	if chosen != nil {
		p = *chosen
	} else if !h.matcher.Match(p) {
		return snapshot.Base{}, fmt.Errorf("image %q: manifest %s is for platform %q, not the host platform %s: %w",
			name, base.ManifestDigest, platforms.Format(p), h.host.Platform, errdefs.ErrNotFound)
	}
	base.ConfigDigest = m.Config.Digest
	base.Platform = platforms.Format(p)
	base.DiffIDs = append([]digest.Digest{}, cfg.RootFS.DiffIDs...)
	return base, nil
}

// ImageLabels implements host.Images: the Labels of an AddImage record
// whose Base.ConfigDigest is config, else config.Labels of the stored
// JSON image config.
func (h *Machine) ImageLabels(ctx context.Context, config digest.Digest) (map[string]string, error) {
	if err := h.enter(ctx, OpImageLabels); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	b, err := h.blob(config)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	for _, img := range h.records {
		if img.Base.ConfigDigest == config {
			return maps.Clone(img.Labels), nil
		}
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("image config %s: not a JSON image config: %w: %w", config, errdefs.ErrInvalidArgument, err)
	}
	return cfg.Config.Labels, nil
}

// manifestAndConfig reads manifest d and its config. h.mu is held.
func (h *Machine) manifestAndConfig(d digest.Digest) (ocispec.Manifest, ocispec.Image, error) {
	b, err := h.blob(d)
	if err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, err
	}
	m, err := parseManifest(d, b)
	if err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, err
	}
	cb, err := h.blob(m.Config.Digest)
	if err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, fmt.Errorf("manifest %s: config: %w", d, err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(cb, &cfg); err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, fmt.Errorf("manifest %s: config %s: %w: %w", d, m.Config.Digest, errdefs.ErrInvalidArgument, err)
	}
	return m, cfg, nil
}

func cfgPlatform(cfg ocispec.Image) ocispec.Platform {
	return platforms.Normalize(ocispec.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant})
}

// baseLayers returns the layer blob digests of base: an AddImage record's
// Layers, else those of its stored manifest (nil when it cannot be read).
func (h *Machine) baseLayers(base snapshot.Base) []digest.Digest {
	for _, img := range h.records {
		if img.Base.ManifestDigest == base.ManifestDigest {
			return img.Layers
		}
	}
	b, ok := h.blobs[base.ManifestDigest]
	if !ok {
		return nil
	}
	m, err := parseManifest(base.ManifestDigest, b)
	if err != nil {
		return nil
	}
	var out []digest.Digest
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out
}

// chainKnown reports whether diffIDs are the diffIDs of an image of the
// host (an AddImage record, or a name of the image store that resolves):
// the only chain snapshots an in-memory host has.
func (h *Machine) chainKnown(diffIDs []digest.Digest) bool {
	if len(diffIDs) == 0 {
		return false
	}
	for _, img := range h.records {
		if slices.Equal(img.Base.DiffIDs, diffIDs) {
			return true
		}
	}
	for name := range h.images {
		if b, err := h.resolve(name); err == nil && slices.Equal(b.DiffIDs, diffIDs) {
			return true
		}
	}
	return false
}

// imageDiffIDs returns the diffIDs of image name (an AddImage record, or a
// name of the image store that resolves), or nil.
func (h *Machine) imageDiffIDs(name string) []digest.Digest {
	if img, ok := h.records[name]; ok {
		return slices.Clone(img.Base.DiffIDs)
	}
	if _, ok := h.images[name]; !ok {
		return nil
	}
	if b, err := h.resolve(name); err == nil {
		return b.DiffIDs
	}
	return nil
}
