package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// RemoteRef is a parsed registry reference for push and pull
// (distribution/reference): REG/REPO:TAG, REG/REPO@sha256:… (pull), or
// REG/REPO alone (push tags the run's generation, GenerationTag; pull picks
// a run's latest generation, WithRun).
type RemoteRef struct {
	// Named is the normalized reference.
	Named reference.Named
	// Repo is the repository without tag or digest ("127.0.0.1:5000/runs").
	Repo string
	// Loopback reports whether the registry host is a loopback address or
	// localhost: only those may be reached over plain HTTP.
	Loopback bool
}

// Tag is the reference's tag, or "" when it has none.
func (r *RemoteRef) Tag() string {
	if t, ok := r.Named.(reference.Tagged); ok {
		return t.Tag()
	}
	return ""
}

// Bare reports whether the reference names only a repository: no tag, no
// digest.
func (r *RemoteRef) Bare() bool {
	_, digested := r.Named.(reference.Digested)
	return r.Tag() == "" && !digested
}

// ParseRemoteRef parses a registry reference with
// reference.ParseNormalizedNamed ("runs:1" is docker.io/library/runs:1). It
// may carry a tag, or neither tag nor digest (REG/REPO), or, when
// allowDigest, a digest. Errors wrap errdefs.ErrInvalidArgument and quote
// the reference.
func ParseRemoteRef(s string, allowDigest bool) (*RemoteRef, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return nil, fmt.Errorf("registry reference %q: %w: %w", s, errdefs.ErrInvalidArgument, err)
	}
	if _, digested := named.(reference.Digested); digested && !allowDigest {
		return nil, fmt.Errorf("registry reference %q: a digest is not accepted here (REG/REPO[:TAG]): %w", s, errdefs.ErrInvalidArgument)
	}
	return &RemoteRef{Named: named, Repo: named.Name(), Loopback: isLoopback(reference.Domain(named))}, nil
}

// isLoopback reports whether a registry host[:port] is "localhost" or a
// loopback IP address (127.0.0.0/8, ::1), with or without a port.
func isLoopback(hostport string) bool {
	host := hostport
	if strings.HasPrefix(host, "[") || strings.Count(host, ":") == 1 {
		h, _, err := net.SplitHostPort(host)
		if err != nil {
			return false
		}
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// PushResult is what Push sent.
type PushResult struct {
	Target   string             `json:"target"` // REG/REPO:TAG
	Run      string             `json:"run"`
	Artifact ocispec.Descriptor `json:"artifact"`
	// Base lists the base digests pushed by digest to the same
	// repository: the platform manifest, then the index when complete.
	Base []string `json:"base"`
	// Handoff is the handoff the artifact carries (WithHandoff), else nil.
	Handoff *HandoffResult `json:"handoff,omitempty"`
}

// Push pushes the run recorded in refFile to a registry (docs/design.md
// "Moving runs"): the artifact is stored first (as Export stores it);
// then, through reg, the base image's platform manifest with its config
// and layers by digest to the same repository (REPO@<manifestDigest>), its
// index by digest too when the index and every child are complete in the
// store, and the artifact manifest with its config and layer under
// target's tag, or, when target is a bare REG/REPO, under
// GenerationTag(run, generation) (runs by generation). target carries no
// digest (ParseRemoteRef(s, false)).
//
// Errors: the ref's (*snapshot.OpenError); errdef.ErrSnapshotMissing;
// errdef.ErrImageUnresolved when the base manifest, its config or a
// layer is absent; the registry's, naming the reference.
//
// With WithHandoff the run is handed over first, as Export does (fault
// point push-handedoff).
//
// With WithProgress the blob bytes read for sending are reported in the
// phases "push base" (total: the base blobs' sizes) and "push" (the
// artifact's); blobs the registry already has are not read.
func Push(ctx context.Context, s Store, reg Registry, refFile []byte, target *RemoteRef, opts ...Option) (*PushResult, error) {
	o := collectOptions(opts)
	if _, digested := target.Named.(reference.Digested); digested {
		return nil, fmt.Errorf("push to %s: a digest reference cannot be pushed to (REG/REPO[:TAG]): %w", target.Named, errdefs.ErrInvalidArgument)
	}
	statement, rec, err := handOff(ctx, s, o.handoff, refFile)
	if err != nil {
		return nil, err
	}
	faultpoint.Reach("push-handedoff")
	art, err := storeArtifact(ctx, s, refFile, statement)
	if err != nil {
		return nil, err
	}
	tag := target.Tag()
	if tag == "" {
		tag = GenerationTag(art.Ref.Run, generationOf(art.Ref))
	}
	res := &PushResult{Target: target.Repo + ":" + tag, Run: art.Ref.Run, Artifact: art.Manifest, Base: []string{}, Handoff: handoffResult(rec, statement, o.handoff)}
	base, err := completeBase(ctx, s, art.Ref, art.Base)
	if err != nil {
		return nil, err
	}
	descs := []ocispec.Descriptor{art.Base}
	if base.Digest != art.Base.Digest {
		descs = append(descs, base) // the index, after its platform manifest
	}
	o.progress.Phase("push base", treeSize(ctx, s, base))
	for _, d := range descs {
		if err := reg.Push(ctx, target.Repo+"@"+d.Digest.String(), d, o.progress); err != nil {
			return nil, err
		}
		res.Base = append(res.Base, d.Digest.String())
	}
	ref := target.Repo + ":" + tag + "@" + art.Manifest.Digest.String()
	o.progress.Phase("push", art.Manifest.Size+int64(len(refFile))+payloadSize(art.Ref)+int64(len(statement)))
	if err := reg.Push(ctx, ref, art.Manifest, o.progress); err != nil {
		return nil, err
	}
	return res, nil
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
	// BaseName is what the pull did about the ref's base.name: created
	// pointing at the recorded digest, or why not.
	BaseName *BaseName `json:"baseName"`
	// Ref and RefFile are the verified ref and its file's exact bytes.
	Ref     *snapshot.Ref `json:"-"`
	RefFile []byte        `json:"-"`
	// Received is the handoff this host received (the artifact carried a
	// statement naming it), else nil.
	Received *HandoffResult `json:"received,omitempty"`
}

// fetchSmall fetches a blob of at most MaxArtifactMetadata bytes and checks
// its size and digest.
func fetchSmall(ctx context.Context, reg Registry, ref string, desc ocispec.Descriptor, what string) ([]byte, error) {
	if desc.Size < 0 || desc.Size > MaxArtifactMetadata {
		return nil, fmt.Errorf("%s %s: %d bytes, more than %d: %w", what, desc.Digest, desc.Size, MaxArtifactMetadata, ErrArtifactRefused)
	}
	rc, err := reg.Fetch(ctx, ref, desc)
	if err != nil {
		return nil, fmt.Errorf("fetch %s %s: %w", what, desc.Digest, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, desc.Size+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s %s: %w", what, desc.Digest, err)
	}
	if int64(len(b)) != desc.Size || digest.FromBytes(b) != desc.Digest {
		return nil, fmt.Errorf("%s %s: the registry sent %d bytes with digest %s: %w", what, desc.Digest, len(b), digest.FromBytes(b), ErrArtifactRefused)
	}
	return b, nil
}

// remoteBlobs is a BlobSource over an artifact manifest's descriptors:
// sizes as the manifest states them, and the config fetched.
type remoteBlobs struct {
	sizes map[digest.Digest]int64
	small map[digest.Digest][]byte
}

func (b *remoteBlobs) Blob(d digest.Digest) ([]byte, bool) { v, ok := b.small[d]; return v, ok }
func (b *remoteBlobs) Size(d digest.Digest) (int64, bool)  { v, ok := b.sizes[d]; return v, ok }

// Pull fetches a migration artifact from a registry into the store
// (docs/design.md "Moving runs"): it resolves source (REG/REPO:TAG,
// REG/REPO@sha256:…, or a bare REG/REPO with WithRun: the tag
// LatestGenerationTag picks among reg.Tags), fetches the artifact manifest and its config into
// memory (digest and size checked), checks the artifact's shape and
// verifies its ref against trust with CheckArtifactManifest before using
// any field of it, then stores the manifest, config and layer under a
// temporary lease (the transport checks digest and size), checks the layer
// with snapshot.VerifyDiff and the spec blob with snapshot.ReadBlob, and,
// when the base platform manifest or any of its blobs is missing here,
// fetches it from REG/REPO@<base.manifestDigest> — never by tag, never
// from the recorded image name — and then the recorded index
// REG/REPO@<base.indexDigest> alone, when the registry has it. Everything
// is then held by the run lease, and the ref's base.name is created
// pointing at the recorded index (or manifest) digest when no image of
// that name exists (never re-pointed; PullResult.BaseName says which).
//
// An artifact with a handoff statement is taken as Import takes it
// (WithReceiver): verified with the ref, refused before anything is stored
// when it names another host, then, through PullFile, out written,
// Received, and the run lease (fault points pull-out, pull-received). Any
// artifact's out is written before the run lease takes its content
// (docs/design.md "Hardening").
//
// Errors: refusals wrap ErrArtifactRefused; the ref's own are
// *snapshot.OpenError; a bare source without WithRun wraps
// errdefs.ErrInvalidArgument; no tag of the run wraps errdefs.ErrNotFound
// naming the repository and the run; the registry's name the reference.
//
// With WithProgress the bytes fetched are reported in the phases "pull"
// (total: the layer's size), "verify diff" (-1), and "pull base" (-1) when
// the base is fetched.
func Pull(ctx context.Context, s Store, reg Registry, source *RemoteRef, trust *envelope.KeyRing, opts ...Option) (*PullResult, error) {
	o := collectOptions(opts)
	if source.Bare() {
		if o.run == "" {
			return nil, fmt.Errorf("pull %s: a tag, a digest or a run is needed: %w", source.Repo, errdefs.ErrInvalidArgument)
		}
		latest, err := latestRunRef(ctx, reg, source, o.run)
		if err != nil {
			return nil, err
		}
		source = latest
	}
	src := source.Named.String()
	desc, err := reg.Resolve(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", src, err)
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest {
		return nil, fmt.Errorf("%s is a %q, not an OCI image manifest: %w", src, desc.MediaType, ErrArtifactRefused)
	}
	body, err := fetchSmall(ctx, reg, src, desc, "artifact manifest")
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("artifact manifest %s: %v: %w", desc.Digest, err, ErrArtifactRefused)
	}
	blobs := &remoteBlobs{sizes: map[digest.Digest]int64{}, small: map[digest.Digest][]byte{}}
	for _, l := range m.Layers {
		blobs.sizes[l.Digest] = l.Size
	}
	if m.Config.MediaType == snapshot.MediaTypeRef {
		cfg, err := fetchSmall(ctx, reg, src, m.Config, "artifact config")
		if err != nil {
			return nil, err
		}
		blobs.sizes[m.Config.Digest], blobs.small[m.Config.Digest] = m.Config.Size, cfg
	}
	if d, ok := artifactStatement(m.Layers); ok {
		b, err := fetchSmall(ctx, reg, src, d, "handoff statement")
		if err != nil {
			return nil, err
		}
		blobs.small[d.Digest] = b
	}
	mdesc := ocispec.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}
	art, err := CheckArtifactManifest(blobs, mdesc, body, trust)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	// A statement naming another host: refused before anything is stored.
	if err := checkReceiver(ctx, o.receiver, art); err != nil {
		return nil, err
	}

	tmp, done, err := s.TempLease(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	cfgDesc, err := s.WriteBlob(ctx, tmp, "pull-"+digest.FromBytes(art.RefFile).Encoded(), snapshot.MediaTypeRef, art.RefFile)
	if err != nil {
		return nil, err
	}
	if _, err := s.WriteBlob(ctx, tmp, "pull-"+mdesc.Digest.Encoded(), mdesc.MediaType, body); err != nil {
		return nil, err
	}
	o.progress.Phase("pull", payloadSize(art.Ref))
	held := []digest.Digest{mdesc.Digest, cfgDesc.Digest}
	for _, l := range art.Layers {
		if err := reg.FetchToStore(ctx, src, tmp, l, false, o.progress); err != nil {
			return nil, fmt.Errorf("fetch %s layer %s: %w", src, l.Digest, err)
		}
		held = append(held, l.Digest)
	}
	o.progress.Phase("verify diff", -1)
	if err := verifyLayers(ctx, s, art.Ref); err != nil {
		return nil, err
	}
	if err := verifySpec(ctx, s, art.Ref); err != nil {
		return nil, err
	}

	res := &PullResult{
		Source: src, Run: art.Ref.Run, Manifest: art.Ref.Manifest, Pinned: art.Ref.Pinned,
		Artifact: mdesc, Ref: art.Ref, RefFile: art.RefFile,
	}
	baseDigests, from, err := pullBase(ctx, s, reg, tmp, source, art.Ref, o.progress)
	if err != nil {
		return nil, err
	}
	res.BaseFrom = from
	held = append(held, baseDigests...)
	// Named before the run lease takes the content: a failure naming the
	// base leaves nothing in the run lease.
	if res.BaseName, err = nameBase(ctx, s, art.Ref); err != nil {
		return nil, err
	}
	// --out, then (with a statement) Received, then the run lease
	// (docs/design.md "Exactly once across hosts", "Hardening"); out is
	// removed again when Received or the run lease fails.
	if o.out != "" {
		if err := atomicfile.WriteFile(o.out, art.RefFile, 0o644); err != nil {
			return nil, err
		}
		faultpoint.Reach("pull-out")
	}
	if art.Statement != nil {
		if res.Received, err = receive(ctx, o.receiver, art); err != nil {
			if o.out != "" {
				_ = os.Remove(o.out)
			}
			return nil, err
		}
		faultpoint.Reach("pull-received")
	}
	if res.Lease, err = holdRun(ctx, s, art.Ref, held...); err != nil {
		if o.out != "" {
			_ = os.Remove(o.out)
		}
		return nil, err
	}
	return res, nil
}

// PullFile is Pull (with its options) and the verified ref file's exact
// bytes written to out atomically after the base is named and before
// Received (for an artifact with a handoff statement) and the run lease
// take the content (docs/design.md "Exactly once across hosts",
// "Hardening"); a refused Received or a failed run lease removes out
// again.
func PullFile(ctx context.Context, s Store, reg Registry, source *RemoteRef, trust *envelope.KeyRing, out string, opts ...Option) (*PullResult, error) {
	return Pull(ctx, s, reg, source, trust, append(opts, func(o *options) { o.out = out })...)
}

// pullBase makes the ref's base platform manifest, config and layers
// present: when any is missing they are fetched from
// REPO@<base.manifestDigest> into the lease. It returns the base digests
// to hold and the reference it fetched from ("" when nothing was missing).
func pullBase(ctx context.Context, s Store, reg Registry, lease string, source *RemoteRef, ref *snapshot.Ref, p Progress) ([]digest.Digest, string, error) {
	md := ref.Base.ManifestDigest
	missing, err := s.MissingContent(ctx, md)
	if err != nil {
		return nil, "", err
	}
	from := ""
	if len(missing) > 0 {
		from = source.Repo + "@" + md.String()
		desc, err := reg.Resolve(ctx, from)
		if err != nil {
			return nil, "", fmt.Errorf("resolve base %s: %w", from, err)
		}
		if desc.Digest != md || !isManifestType(desc.MediaType) {
			return nil, "", fmt.Errorf("base %s resolved to a %q %s: %w", from, desc.MediaType, desc.Digest, ErrArtifactRefused)
		}
		p.Phase("pull base", -1)
		if err := reg.FetchToStore(ctx, from, lease, desc, true, p); err != nil {
			return nil, "", fmt.Errorf("fetch base %s: %w", from, err)
		}
		if missing, err = s.MissingContent(ctx, md); err != nil {
			return nil, "", err
		}
		if len(missing) > 0 {
			return nil, "", fmt.Errorf("base %s: still missing %s after the fetch: %w", from, missing[0], errdef.ErrImageUnresolved)
		}
	}
	data, err := s.ReadBlob(ctx, md)
	if err != nil {
		return nil, "", fmt.Errorf("base manifest: %w", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, "", fmt.Errorf("base manifest %s: %v: %w", md, err, ErrArtifactRefused)
	}
	out := []digest.Digest{md, m.Config.Digest}
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	// The recorded index alone (push sends it when it had all its
	// children), so that the base's name can point at it.
	if id := ref.Base.IndexDigest; id != "" {
		if _, err := s.BlobSize(ctx, id); errdefs.IsNotFound(err) {
			ifrom := source.Repo + "@" + id.String()
			desc, err := reg.Resolve(ctx, ifrom)
			switch {
			case errdefs.IsNotFound(err):
				return out, from, nil // not pushed: the name is not created
			case err != nil:
				return nil, "", fmt.Errorf("resolve base index %s: %w", ifrom, err)
			case desc.Digest != id || !isIndexType(desc.MediaType):
				return nil, "", fmt.Errorf("base index %s resolved to a %q %s: %w", ifrom, desc.MediaType, desc.Digest, ErrArtifactRefused)
			}
			if err := reg.FetchToStore(ctx, ifrom, lease, desc, false, p); err != nil {
				return nil, "", fmt.Errorf("fetch base index %s: %w", ifrom, err)
			}
		} else if err != nil {
			return nil, "", fmt.Errorf("base index %s: %w", id, err)
		}
		if _, err := s.BlobSize(ctx, id); err == nil {
			out = append(out, id)
		}
	}
	return out, from, nil
}
