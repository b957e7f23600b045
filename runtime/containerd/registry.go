package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// RemoteRef is a parsed registry reference for push and pull
// (distribution/reference): REG/REPO:TAG, or REG/REPO@sha256:… for pull.
type RemoteRef struct {
	Named reference.Named
	// Repo is the repository without tag or digest ("127.0.0.1:5000/runs").
	Repo string
	// Loopback reports whether the registry host is a loopback address or
	// localhost (docker.MatchLocalhost): only those may use plain HTTP.
	Loopback bool
}

// ParseRemoteRef parses a registry reference with
// reference.ParseNormalizedNamed ("runs:1" is docker.io/library/runs:1). It
// must carry a tag, or, when allowDigest, a digest. Errors wrap
// errdefs.ErrInvalidArgument and quote the reference.
func ParseRemoteRef(s string, allowDigest bool) (*RemoteRef, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return nil, fmt.Errorf("registry reference %q: %w: %w", s, errdefs.ErrInvalidArgument, err)
	}
	_, tagged := named.(reference.Tagged)
	_, digested := named.(reference.Digested)
	if !tagged && !(allowDigest && digested) {
		return nil, fmt.Errorf("registry reference %q needs a tag (REG/REPO:TAG): %w", s, errdefs.ErrInvalidArgument)
	}
	loop, err := docker.MatchLocalhost(reference.Domain(named))
	if err != nil {
		loop = false
	}
	return &RemoteRef{Named: named, Repo: named.Name(), Loopback: loop}, nil
}

// newResolver returns a new docker resolver (with its own push status
// tracker: a reused resolver silently skips a second push of a digest it
// pushed before, to any repository — measured, notes/derisk.md step 4).
// plainHTTP makes loopback hosts, and only those, use http.
func newResolver(plainHTTP bool) remotes.Resolver {
	var ropts []docker.RegistryOpt
	if plainHTTP {
		ropts = append(ropts, docker.WithPlainHTTP(docker.MatchLocalhost))
	}
	return docker.NewResolver(docker.ResolverOptions{
		Hosts:   docker.ConfigureDefaultRegistries(ropts...),
		Tracker: docker.NewInMemoryTracker(),
	})
}

// PushResult is what Push sent.
type PushResult struct {
	Target   string             `json:"target"` // REG/REPO:TAG
	Run      string             `json:"run"`
	Artifact ocispec.Descriptor `json:"artifact"`
	// Base lists the base digests pushed by digest to the same
	// repository: the platform manifest, then the index when complete.
	Base []string `json:"base"`
}

// Push pushes the run recorded in refFile to a registry (DESIGN "Moving
// runs"): StoreArtifact; then, each with a new resolver
// (remotes.PushContent), the base image's platform manifest with its config
// and layers by digest to the same repository (REPO@<manifestDigest>), its
// index by digest too when the index and every child are complete in the
// content store, and the artifact manifest with its config and layer under
// target's tag. target must be REG/REPO:TAG (ParseRemoteRef); plainHTTP is
// for loopback registries only (the CLI refuses it otherwise).
//
// Errors: those of StoreArtifact (2, 5, 6, 7), snapshot.ErrImageUnresolved
// when the base's config or a layer is absent, registry errors (exit 1)
// naming the reference.
//
// With WithProgress the blob bytes read for sending are reported in the
// phases "push base" (total: the base blobs' sizes) and "push" (the
// artifact's); blobs the registry already has are not read.
func (r *Runtime) Push(ctx context.Context, refFile []byte, target *RemoteRef, plainHTTP bool, opts ...MoveOption) (*PushResult, error) {
	o := collectMoveOptions(opts)
	art, err := r.StoreArtifact(ctx, refFile)
	if err != nil {
		return nil, err
	}
	res := &PushResult{Target: target.Named.String(), Run: art.Ref.Run, Artifact: art.Manifest, Base: []string{}}
	base, err := r.completeBase(ctx, art.Ref, art.Base)
	if err != nil {
		return nil, err
	}
	descs := []ocispec.Descriptor{art.Base}
	if base.Digest != art.Base.Digest {
		descs = append(descs, base) // the index, after its platform manifest
	}
	o.progress.Phase("push base", r.treeSize(ctx, base))
	for _, d := range descs {
		ref := target.Repo + "@" + d.Digest.String()
		if err := pushContent(ctx, r, ref, d, plainHTTP, o.progress); err != nil {
			return nil, err
		}
		res.Base = append(res.Base, d.Digest.String())
	}
	tagged := target.Named.(reference.Tagged)
	ref := target.Repo + ":" + tagged.Tag() + "@" + art.Manifest.Digest.String()
	o.progress.Phase("push", art.Manifest.Size+int64(len(refFile))+art.Ref.Layers[0].Size)
	if err := pushContent(ctx, r, ref, art.Manifest, plainHTTP, o.progress); err != nil {
		return nil, err
	}
	return res, nil
}

func pushContent(ctx context.Context, r *Runtime, ref string, desc ocispec.Descriptor, plainHTTP bool, p Progress) error {
	pusher, err := newResolver(plainHTTP).Pusher(ctx, ref)
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	var store content.Provider = readAheadProvider{r.client.ContentStore()}
	if _, quiet := p.(noProgress); !quiet {
		store = progressProvider{Provider: store, p: p}
	}
	if err := remotes.PushContent(ctx, pusher, desc, store, nil, platforms.All, nil); err != nil {
		return fmt.Errorf("push %s: %w", ref, native(err))
	}
	return nil
}

// PullResult is what Pull fetched.
type PullResult struct {
	Source   string             `json:"source"`
	Run      string             `json:"run"`
	Manifest string             `json:"manifest"` // the ref's manifest address
	Pinned   bool               `json:"pinned"`
	Artifact ocispec.Descriptor `json:"artifact"`
	Lease    string             `json:"lease"`
	// BaseFrom is REG/REPO@<base.manifestDigest> when the base was missing
	// and pulled from there, else empty.
	BaseFrom string `json:"baseFrom,omitempty"`
	// Ref and RefFile are the verified ref and its file's exact bytes.
	Ref     *snapshot.Ref `json:"-"`
	RefFile []byte        `json:"-"`
}

// fetchSmall fetches a blob of at most snapshot.MaxArtifactMetadata bytes
// and checks its size and digest.
func fetchSmall(ctx context.Context, f remotes.Fetcher, desc ocispec.Descriptor, what string) ([]byte, error) {
	if desc.Size < 0 || desc.Size > snapshot.MaxArtifactMetadata {
		return nil, fmt.Errorf("%s %s: %d bytes, more than %d: %w", what, desc.Digest, desc.Size, snapshot.MaxArtifactMetadata, snapshot.ErrArtifactRefused)
	}
	rc, err := f.Fetch(ctx, desc)
	if err != nil {
		return nil, fmt.Errorf("fetch %s %s: %w", what, desc.Digest, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, desc.Size+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s %s: %w", what, desc.Digest, err)
	}
	if int64(len(b)) != desc.Size || digest.FromBytes(b) != desc.Digest {
		return nil, fmt.Errorf("%s %s: the registry sent %d bytes with digest %s: %w", what, desc.Digest, len(b), digest.FromBytes(b), snapshot.ErrArtifactRefused)
	}
	return b, nil
}

// remoteBlobs is a snapshot.BlobSource over an artifact manifest's
// descriptors: sizes as the manifest states them, and the config fetched.
type remoteBlobs struct {
	sizes map[digest.Digest]int64
	small map[digest.Digest][]byte
}

func (b *remoteBlobs) Blob(d digest.Digest) ([]byte, bool) { v, ok := b.small[d]; return v, ok }
func (b *remoteBlobs) Size(d digest.Digest) (int64, bool)  { v, ok := b.sizes[d]; return v, ok }

// Pull fetches a migration artifact from a registry (DESIGN "Moving runs"):
// it resolves source (REG/REPO:TAG or REG/REPO@sha256:…), fetches the
// artifact manifest and its config into memory (digest and size checked),
// checks the artifact's shape and verifies its ref against trust with
// snapshot.CheckArtifactManifest before using any field of it, then fetches
// the manifest, config and layer into the content store under a temporary
// lease (remotes.Fetch checks digest and size), checks the layer with
// VerifyDiff, and, when the base platform manifest or any of its blobs is
// missing here, fetches it from REG/REPO@<base.manifestDigest> — never by
// tag, never from the recorded image name — with images.Dispatch over
// remotes.FetchHandler. Everything is then held by the run lease; no image
// record is created.
//
// Errors: refusals wrap snapshot.ErrArtifactRefused (2); the ref's own are
// OpenRef's (2, 6); registry errors (exit 1) name the reference.
//
// With WithProgress the bytes fetched are reported in the phases "pull"
// (total: the layer's size), "verify diff" (-1), and "pull base" (-1) when
// the base is fetched.
func (r *Runtime) Pull(ctx context.Context, source *RemoteRef, trust *envelope.KeyRing, plainHTTP bool, opts ...MoveOption) (*PullResult, error) {
	o := collectMoveOptions(opts)
	src := source.Named.String()
	resolver := newResolver(plainHTTP)
	_, desc, err := resolver.Resolve(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", src, native(err))
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest {
		return nil, fmt.Errorf("%s is a %q, not an OCI image manifest: %w", src, desc.MediaType, snapshot.ErrArtifactRefused)
	}
	fetcher, err := resolver.Fetcher(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", src, err)
	}
	body, err := fetchSmall(ctx, fetcher, desc, "artifact manifest")
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("artifact manifest %s: %v: %w", desc.Digest, err, snapshot.ErrArtifactRefused)
	}
	blobs := &remoteBlobs{sizes: map[digest.Digest]int64{}, small: map[digest.Digest][]byte{}}
	for _, l := range m.Layers {
		blobs.sizes[l.Digest] = l.Size
	}
	if m.Config.MediaType == snapshot.MediaTypeRef {
		cfg, err := fetchSmall(ctx, fetcher, m.Config, "artifact config")
		if err != nil {
			return nil, err
		}
		blobs.sizes[m.Config.Digest], blobs.small[m.Config.Digest] = m.Config.Size, cfg
	}
	mdesc := ocispec.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}
	art, err := snapshot.CheckArtifactManifest(blobs, mdesc, body, trust)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}

	tmp, done, err := r.tempLease(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	lctx := leases.WithLease(ctx, tmp)
	cfgDesc := ocispec.Descriptor{MediaType: snapshot.MediaTypeRef, Digest: digest.FromBytes(art.RefFile), Size: int64(len(art.RefFile))}
	if err := r.writeSmall(lctx, "pull-"+cfgDesc.Digest.Encoded(), cfgDesc, art.RefFile); err != nil {
		return nil, err
	}
	if err := r.writeSmall(lctx, "pull-"+mdesc.Digest.Encoded(), mdesc, body); err != nil {
		return nil, err
	}
	o.progress.Phase("pull", art.Layer.Size)
	if err := remotes.Fetch(lctx, r.client.ContentStore(), progressFetcher{Fetcher: fetcher, p: o.progress}, art.Layer); err != nil && !errdefs.IsAlreadyExists(native(err)) {
		return nil, fmt.Errorf("fetch %s layer %s: %w", src, art.Layer.Digest, native(err))
	}
	o.progress.Phase("verify diff", -1)
	if err := r.VerifyDiff(ctx, art.Ref.Layers[0]); err != nil {
		return nil, err
	}
	held := []digest.Digest{mdesc.Digest, cfgDesc.Digest, art.Layer.Digest}

	res := &PullResult{
		Source: src, Run: art.Ref.Run, Manifest: art.Ref.Manifest, Pinned: art.Ref.Pinned,
		Artifact: mdesc, Ref: art.Ref, RefFile: art.RefFile,
	}
	baseDigests, from, err := r.pullBase(lctx, source, art.Ref, plainHTTP, o.progress)
	if err != nil {
		return nil, err
	}
	res.BaseFrom = from
	held = append(held, baseDigests...)
	if res.Lease, err = r.holdRun(ctx, art.Ref, held...); err != nil {
		return nil, err
	}
	return res, nil
}

// pullBase makes the ref's base platform manifest, config and layers
// present: when any is missing they are fetched from
// REPO@<base.manifestDigest> into the lease in ctx. It returns the base
// digests to hold and the reference it fetched from ("" when nothing was
// missing).
func (r *Runtime) pullBase(ctx context.Context, source *RemoteRef, ref *snapshot.Ref, plainHTTP bool, p Progress) ([]digest.Digest, string, error) {
	md := ref.Base.ManifestDigest
	missing, err := r.MissingContent(ctx, md)
	if err != nil {
		return nil, "", err
	}
	from := ""
	if len(missing) > 0 {
		from = source.Repo + "@" + md.String()
		resolver := newResolver(plainHTTP)
		_, desc, err := resolver.Resolve(ctx, from)
		if err != nil {
			return nil, "", fmt.Errorf("resolve base %s: %w", from, native(err))
		}
		if desc.Digest != md || !images.IsManifestType(desc.MediaType) {
			return nil, "", fmt.Errorf("base %s resolved to a %q %s: %w", from, desc.MediaType, desc.Digest, snapshot.ErrArtifactRefused)
		}
		fetcher, err := resolver.Fetcher(ctx, from)
		if err != nil {
			return nil, "", fmt.Errorf("fetch base %s: %w", from, err)
		}
		cs := r.client.ContentStore()
		p.Phase("pull base", -1)
		h := images.Handlers(remotes.FetchHandler(cs, progressFetcher{Fetcher: fetcher, p: p}), images.ChildrenHandler(cs))
		if err := images.Dispatch(ctx, h, nil, desc); err != nil {
			return nil, "", fmt.Errorf("fetch base %s: %w", from, native(err))
		}
		if missing, err = r.MissingContent(ctx, md); err != nil {
			return nil, "", err
		}
		if len(missing) > 0 {
			return nil, "", fmt.Errorf("base %s: still missing %s after the fetch: %w", from, missing[0], snapshot.ErrImageUnresolved)
		}
	}
	data, err := readBlob(ctx, r.client.ContentStore(), ocispec.Descriptor{Digest: md})
	if err != nil {
		return nil, "", fmt.Errorf("base manifest: %w", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, "", fmt.Errorf("base manifest %s: %v: %w", md, err, snapshot.ErrArtifactRefused)
	}
	out := []digest.Digest{md, m.Config.Digest}
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out, from, nil
}
