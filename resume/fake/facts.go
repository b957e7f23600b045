// Package fake holds in-memory implementations of the resume seams (docs/design.md
// "Layout"), for unit tests of the decision without a daemon. The
// conformance suite in resume/facttest runs against them and against
// runtime/containerd, so both behave alike.
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Facts is an in-memory resume.Facts: a content store (blobs by digest), an
// image store (normalized name → target descriptor), fixed host facts, the
// containers of one namespace (those its Materializer creates and those a
// test puts), `/1` claim leases, and a rule for resumer processes.
// The zero value is not usable; call NewFacts. It is safe for concurrent use.
type Facts struct {
	mu       sync.Mutex
	host     snapshot.Host
	platform ocispec.Platform
	matcher  platforms.MatchComparer
	blobs    map[digest.Digest][]byte
	images   map[string]ocispec.Descriptor

	// state holds containers, `/1` claim leases and stored refs, shared
	// with the Materializer made over these facts.
	state *hostState
}

// NewFacts returns an empty store for host. host.Platform ("os/arch[/variant]")
// must parse with platforms.Parse; it chooses manifests under
// platforms.OnlyStrict, as runtime/containerd does.
func NewFacts(host snapshot.Host) (*Facts, error) {
	p, err := platforms.Parse(host.Platform)
	if err != nil {
		return nil, fmt.Errorf("fake: host platform %q: %w: %w", host.Platform, errdefs.ErrInvalidArgument, err)
	}
	p = platforms.Normalize(p)
	host.Platform = platforms.Format(p)
	return &Facts{
		host:     host,
		platform: p,
		matcher:  platforms.OnlyStrict(p),
		blobs:    map[digest.Digest][]byte{},
		images:   map[string]ocispec.Descriptor{},
		state:    newHostState(),
	}, nil
}

// PutBlob stores b under its sha256 digest and returns the digest.
func (f *Facts) PutBlob(b []byte) digest.Digest {
	d := digest.FromBytes(b)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blobs[d] = append([]byte(nil), b...)
	return d
}

// DeleteBlob removes the blob d; absent blobs are ignored.
func (f *Facts) DeleteBlob(d digest.Digest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.blobs, d)
}

// SetImage points the image name at target (creating or re-pointing it).
// name is normalized with reference.ParseDockerRef first, as the stores of
// ctr and nerdctl name images; errdefs.ErrInvalidArgument if it does not parse.
func (f *Facts) SetImage(name string, target ocispec.Descriptor) error {
	n, err := reference.ParseDockerRef(name)
	if err != nil {
		return fmt.Errorf("fake: image name %q: %w: %w", name, errdefs.ErrInvalidArgument, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[n.String()] = target
	return nil
}

// SetHost replaces the host facts (the platform stays as NewFacts set it).
func (f *Facts) SetHost(h snapshot.Host) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h.Platform = f.host.Platform
	f.host = h
}

// Host returns the host facts given to NewFacts or SetHost.
func (f *Facts) Host(ctx context.Context) (snapshot.Host, error) {
	if err := ctx.Err(); err != nil {
		return snapshot.Host{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.host, nil
}

// PlatformMatches reports whether platform matches the host platform under
// platforms.OnlyStrict; an unparsable platform does not match.
func (f *Facts) PlatformMatches(platform string) bool {
	p, err := platforms.Parse(platform)
	return err == nil && f.matcher.Match(p)
}

func (f *Facts) blob(d digest.Digest) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("digest %q: %w: %w", d, errdefs.ErrInvalidArgument, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blobs[d]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", d, errdefs.ErrNotFound)
	}
	return b, nil
}

// BlobSize returns the length of blob dgst, or errdefs.ErrNotFound.
func (f *Facts) BlobSize(ctx context.Context, dgst digest.Digest) (int64, error) {
	b, err := f.blob(dgst)
	if err != nil {
		return 0, err
	}
	return int64(len(b)), nil
}

// MissingContent returns the absent digests among manifest, its config and
// layers (config first, then layers in order); an absent manifest is
// returned alone. errdefs.ErrInvalidArgument when the blob is not a manifest.
func (f *Facts) MissingContent(ctx context.Context, manifest digest.Digest) ([]digest.Digest, error) {
	b, err := f.blob(manifest)
	if errdefs.IsNotFound(err) {
		return []digest.Digest{manifest}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: presence check: %w", manifest, err)
	}
	m, err := parseManifest(manifest, b)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: presence check: %w", manifest, err)
	}
	var missing []digest.Digest
	for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if _, err := f.blob(d.Digest); err != nil {
			missing = append(missing, d.Digest)
		}
	}
	return missing, nil
}

// ResolveImage resolves ref as runtime/containerd's ResolveImage does: a
// tag through the image store, a digest as a content key, an index through
// platforms.OnlyStrict of the host platform.
func (f *Facts) ResolveImage(ctx context.Context, ref string) (snapshot.Base, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return snapshot.Base{}, fmt.Errorf("image reference %q: %w: %w", ref, errdefs.ErrInvalidArgument, err)
	}
	name := named.String()
	var target digest.Digest
	if dg, ok := named.(reference.Digested); ok {
		target = dg.Digest()
	} else {
		f.mu.Lock()
		desc, ok := f.images[name]
		f.mu.Unlock()
		if !ok {
			return snapshot.Base{}, fmt.Errorf("image %q: %w", name, errdefs.ErrNotFound)
		}
		target = desc.Digest
	}
	b, err := f.blob(target)
	if err != nil {
		return snapshot.Base{}, fmt.Errorf("image %q: %w", name, err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return snapshot.Base{}, fmt.Errorf("image %q: blob %s: %w: %w", name, target, errdefs.ErrInvalidArgument, err)
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
				_, cfg, err := f.manifestAndConfig(d.Digest)
				if err != nil {
					return snapshot.Base{}, fmt.Errorf("image %q: index %s: %w", name, target, err)
				}
				p = cfgPlatform(cfg)
			}
			if f.matcher.Match(p) {
				found = append(found, cand{d.Digest, p})
			}
		}
		if len(found) == 0 {
			return snapshot.Base{}, fmt.Errorf("image %q: index %s has no manifest for platform %s: %w", name, target, f.host.Platform, errdefs.ErrNotFound)
		}
		sort.SliceStable(found, func(i, j int) bool { return f.matcher.Less(found[i].p, found[j].p) })
		base.ManifestDigest, chosen = found[0].d, &found[0].p
	}
	m, cfg, err := f.manifestAndConfig(base.ManifestDigest)
	if err != nil {
		return snapshot.Base{}, fmt.Errorf("image %q: %w", name, err)
	}
	p := cfgPlatform(cfg)
	if chosen != nil {
		p = *chosen
	} else if !f.matcher.Match(p) {
		return snapshot.Base{}, fmt.Errorf("image %q: manifest %s is for platform %q, not the host platform %s: %w",
			name, base.ManifestDigest, platforms.Format(p), f.host.Platform, errdefs.ErrNotFound)
	}
	base.ConfigDigest = m.Config.Digest
	base.Platform = platforms.Format(p)
	base.DiffIDs = append([]digest.Digest{}, cfg.RootFS.DiffIDs...)
	return base, nil
}

// ImageLabels returns the config.Labels of the image config blob config
// (snapshot.ImageConfigReader): errdefs.ErrNotFound when the blob is
// absent, errdefs.ErrInvalidArgument for an invalid digest or a blob that
// is not a JSON image config, as runtime/containerd does.
func (f *Facts) ImageLabels(ctx context.Context, config digest.Digest) (map[string]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := f.blob(config)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("image config %s: not a JSON image config: %w: %w", config, errdefs.ErrInvalidArgument, err)
	}
	return cfg.Config.Labels, nil
}

func (f *Facts) manifestAndConfig(d digest.Digest) (ocispec.Manifest, ocispec.Image, error) {
	b, err := f.blob(d)
	if err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, err
	}
	m, err := parseManifest(d, b)
	if err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, err
	}
	cb, err := f.blob(m.Config.Digest)
	if err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, fmt.Errorf("manifest %s: config: %w", d, err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(cb, &cfg); err != nil {
		return ocispec.Manifest{}, ocispec.Image{}, fmt.Errorf("manifest %s: config %s: %w: %w", d, m.Config.Digest, errdefs.ErrInvalidArgument, err)
	}
	return m, cfg, nil
}

func parseManifest(d digest.Digest, b []byte) (ocispec.Manifest, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("manifest %s: %w: %w", d, errdefs.ErrInvalidArgument, err)
	}
	if m.MediaType == ocispec.MediaTypeImageIndex || m.Config.Digest == "" {
		return m, fmt.Errorf("manifest %s: not an image manifest: %w", d, errdefs.ErrInvalidArgument)
	}
	return m, nil
}

func cfgPlatform(cfg ocispec.Image) ocispec.Platform {
	return platforms.Normalize(ocispec.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant})
}
