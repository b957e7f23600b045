package migrate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ArtifactType is the artifactType of the migration artifact's OCI image
// manifest (docs/design.md "Moving runs"; OCI image-spec v1.1 "Guidelines
// for Artifact Usage", the "JSON config + blobs" case). Its config has
// media type snapshot.MediaTypeRef and holds the SnapshotRef file's exact
// bytes.
const ArtifactType = "application/vnd.sandbox-resume.snapshot.v1"

// Annotations of the artifact manifest (docs/design.md "Moving runs"),
// beside ocispec.AnnotationCreated (the ref's "created").
const (
	AnnotationManifest   = snapshot.LabelManifest   // io.sandbox-resume.manifest: Ref.Manifest
	AnnotationRun        = snapshot.LabelRun        // io.sandbox-resume.run: Ref.Run
	AnnotationGeneration = snapshot.LabelGeneration // io.sandbox-resume.generation: Ref.Generation, decimal (a /2 ref's artifact)
)

// Limits of the import pre-scan, in bytes.
const (
	// MaxArtifactMetadata bounds index.json and every blob read as JSON
	// (manifests, indexes, configs, the ref file).
	MaxArtifactMetadata = 4 << 20
	// maxKept bounds the total of small blobs the pre-scan keeps in memory.
	maxKept = 64 << 20
)

// ErrArtifactRefused is wrapped by every refusal of an archive or a
// registry artifact: a name, type or link the pre-scan does not allow, a
// blob whose bytes do not have the digest or size it is named or described
// with, an index naming absent blobs, an artifact of the wrong shape, a
// layer that does not decompress to the recorded diffID within
// uncompressedSize (then snapshot.ErrDiffCorrupt is wrapped too). Class
// "bad-input" (internal/exitcode), which wins over the classes of the
// errors it wraps.
var ErrArtifactRefused = errdef.New(errdef.ErrBadInput, "migration artifact refused")

func refused(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrArtifactRefused)
}

// Payload lists the blobs a migration artifact carries as its layers, in
// order (docs/design.md "Moving runs"): every layer of the ref with its OCI
// layer media type, digest and size, then the recorded runtime spec blob
// (media type snapshot.MediaTypeSpec) when the ref has one (a /1 ref: its
// one diff alone).
func Payload(r *snapshot.Ref) []ocispec.Descriptor {
	out := make([]ocispec.Descriptor, 0, len(r.Layers)+1)
	for _, l := range r.Layers {
		out = append(out, ocispec.Descriptor{MediaType: l.MediaType, Digest: l.Digest, Size: l.Size})
	}
	if r.Spec != nil {
		out = append(out, ocispec.Descriptor{MediaType: r.Spec.MediaType, Digest: r.Spec.Digest, Size: r.Spec.Size})
	}
	return out
}

// layersWith appends the statement's descriptor, when there is one.
func layersWith(payload []ocispec.Descriptor, statement *ocispec.Descriptor) []ocispec.Descriptor {
	if statement != nil {
		payload = append(payload, *statement)
	}
	return payload
}

// payloadSize is the total size in bytes of Payload(r).
func payloadSize(r *snapshot.Ref) int64 {
	var n int64
	for _, d := range Payload(r) {
		n += d.Size
	}
	return n
}

// ArtifactManifest builds the migration artifact's OCI image manifest for a
// verified ref (docs/design.md "Moving runs"): artifactType ArtifactType;
// config {snapshot.MediaTypeRef, sha256 of refFile, len(refFile)}; layers
// Payload(r): every layer of the ref, then the spec blob; subject = base, the
// descriptor of the base image's platform manifest (its digest must be
// r.Base.ManifestDigest); annotations AnnotationManifest, AnnotationRun,
// AnnotationGeneration (a /2 ref; a /1 ref's artifact is the previous
// release's, without it) and ocispec.AnnotationCreated (r.Created, so the
// same ref always gives the same manifest bytes). It returns the manifest's JSON bytes and their
// descriptor (media type ocispec.MediaTypeImageManifest, artifactType set).
func ArtifactManifest(refFile []byte, r *snapshot.Ref, base ocispec.Descriptor) ([]byte, ocispec.Descriptor, error) {
	return artifactManifest(refFile, r, base, nil)
}

// artifactManifest is ArtifactManifest with a handoff statement's
// descriptor as the last layer when statement is not nil (docs/design.md
// "Exactly once across hosts": the ref's layers, the spec, then at most one
// statement).
func artifactManifest(refFile []byte, r *snapshot.Ref, base ocispec.Descriptor, statement *ocispec.Descriptor) ([]byte, ocispec.Descriptor, error) {
	if base.Digest != r.Base.ManifestDigest {
		return nil, ocispec.Descriptor{}, fmt.Errorf("artifact subject %s is not the ref's base manifest %s", base.Digest, r.Base.ManifestDigest)
	}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactType,
		Config: ocispec.Descriptor{
			MediaType: snapshot.MediaTypeRef,
			Digest:    digest.FromBytes(refFile),
			Size:      int64(len(refFile)),
		},
		Layers:  layersWith(Payload(r), statement),
		Subject: &ocispec.Descriptor{MediaType: base.MediaType, Digest: base.Digest, Size: base.Size},
		Annotations: map[string]string{
			AnnotationManifest:        r.Manifest,
			AnnotationRun:             r.Run,
			ocispec.AnnotationCreated: r.Created,
		},
	}
	if !r.IsV1() {
		m.Annotations[AnnotationGeneration] = strconv.FormatUint(r.Generation, 10)
	}
	b, err := json.Marshal(&m)
	if err != nil {
		return nil, ocispec.Descriptor{}, fmt.Errorf("marshal artifact manifest: %w", err)
	}
	return b, ocispec.Descriptor{
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactType,
		Digest:       digest.FromBytes(b),
		Size:         int64(len(b)),
	}, nil
}

// Artifact is a migration artifact whose ref verified: the ref and its
// file's exact bytes, the artifact manifest's descriptor and bytes, the
// descriptors of its layers (Payload of the ref: the ref's layers, then
// its spec blob), and Base, every blob of the base image that came with it
// (an archive made with --with-base), in walk order.
type Artifact struct {
	Ref       *snapshot.Ref
	RefFile   []byte
	Manifest  ocispec.Descriptor
	Body      []byte
	Layers    []ocispec.Descriptor
	Base      []digest.Digest
	BaseIndex bool // Base holds the base image's index (ref.Base.IndexDigest)
	// Statement is the verified handoff statement of the artifact's last
	// layer (nil when there is none), StatementFile its bytes and
	// StatementDesc its descriptor (one of Layers).
	Statement     *Statement
	StatementFile []byte
	StatementDesc ocispec.Descriptor
}

// BlobSource gives the bytes of small blobs by digest and the sizes of all
// blobs; *Archive implements it over a scanned archive.
type BlobSource interface {
	Blob(d digest.Digest) ([]byte, bool)
	Size(d digest.Digest) (int64, bool)
}

// Size returns the size in bytes of a blob of the archive.
func (a *Archive) Size(d digest.Digest) (int64, bool) {
	n, ok := a.Blobs[d]
	return n, ok
}

// present checks that desc names a blob of src with desc's size.
func present(src BlobSource, desc ocispec.Descriptor, what string) error {
	if err := desc.Digest.Validate(); err != nil || desc.Digest.Algorithm() != digest.SHA256 {
		return refused("%s: digest %q is not a sha256 digest", what, desc.Digest)
	}
	n, ok := src.Size(desc.Digest)
	if !ok {
		return refused("%s: blob %s is absent", what, desc.Digest)
	}
	if n != desc.Size {
		return refused("%s: blob %s is %d bytes, the descriptor says %d", what, desc.Digest, n, desc.Size)
	}
	return nil
}

func small(src BlobSource, desc ocispec.Descriptor, what string) ([]byte, error) {
	if err := present(src, desc, what); err != nil {
		return nil, err
	}
	b, ok := src.Blob(desc.Digest)
	if !ok {
		return nil, refused("%s: blob %s is too large to be read as JSON (over %d bytes)", what, desc.Digest, MaxArtifactMetadata)
	}
	return b, nil
}

// CheckArtifactManifest checks the shape of a migration artifact manifest
// (body, described by desc) and opens its ref, in this order: the
// manifest's media type is ocispec.MediaTypeImageManifest with schema
// version 2 and artifactType ArtifactType; its config has media type
// snapshot.MediaTypeRef and is present in src with its size; it has 1 to
// snapshot.MaxLayers+1 layers, each present with its size; there is a
// subject. Then the config bytes go through snapshot.OpenRef(trust) — no
// field of the ref is used before its signature verifies — and the manifest
// must agree with the verified ref: its layers are Payload(ref) (media
// types, digests and sizes, in order), the subject is
// ref.base.manifestDigest, and the run and manifest annotations — and the
// generation annotation when present — are the ref's, and the ref's
// base.name is a form of its core.image (checkBaseName). Shape and agreement failures wrap ErrArtifactRefused; the ref's
// own failures are snapshot.OpenRef's (*snapshot.OpenError).
func CheckArtifactManifest(src BlobSource, desc ocispec.Descriptor, body []byte, trust *envelope.KeyRing) (*Artifact, error) {
	what := "artifact manifest " + desc.Digest.String()
	if got := digest.FromBytes(body); got != desc.Digest || int64(len(body)) != desc.Size {
		return nil, refused("%s: %d bytes with digest %s", what, len(body), got)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, refused("%s: not an OCI image manifest: %v", what, err)
	}
	if m.MediaType != ocispec.MediaTypeImageManifest || m.SchemaVersion != 2 {
		return nil, refused("%s: mediaType %q schemaVersion %d, want %q and 2", what, m.MediaType, m.SchemaVersion, ocispec.MediaTypeImageManifest)
	}
	if m.ArtifactType != ArtifactType {
		return nil, refused("%s: artifactType %q, want %q", what, m.ArtifactType, ArtifactType)
	}
	if m.Config.MediaType != snapshot.MediaTypeRef {
		return nil, refused("%s: config media type %q, want %q", what, m.Config.MediaType, snapshot.MediaTypeRef)
	}
	refFile, err := small(src, m.Config, what+" config")
	if err != nil {
		return nil, err
	}
	if len(m.Layers) == 0 || len(m.Layers) > snapshot.MaxLayers+2 {
		return nil, refused("%s: %d layers, want the ref's 1 to %d layers and its spec blob", what, len(m.Layers), snapshot.MaxLayers)
	}
	for i, l := range m.Layers {
		if err := present(src, l, fmt.Sprintf("%s layer %d", what, i)); err != nil {
			return nil, err
		}
	}
	if m.Subject == nil {
		return nil, refused("%s: no subject (the base image's platform manifest)", what)
	}

	ref, err := snapshot.OpenRef(refFile, trust)
	if err != nil {
		return nil, fmt.Errorf("%s config %s: %w", what, m.Config.Digest, err)
	}
	if err := checkBaseName(ref); err != nil {
		return nil, fmt.Errorf("%s config %s: %w", what, m.Config.Digest, err)
	}

	want := Payload(ref)
	stDesc, hasStatement := artifactStatement(m.Layers)
	if hasStatement {
		want = append(want, stDesc)
	}
	if len(m.Layers) != len(want) {
		return nil, refused("%s: %d layers, but the ref records %d layers and %d spec blob", what, len(m.Layers), len(ref.Layers), len(want)-len(ref.Layers))
	}
	for i, l := range m.Layers {
		if d := want[i]; l.MediaType != d.MediaType || l.Digest != d.Digest || l.Size != d.Size {
			return nil, refused("%s: layer %d {%s %s %d} is not the ref's {%s %s %d}", what, i,
				l.MediaType, l.Digest, l.Size, d.MediaType, d.Digest, d.Size)
		}
	}
	if m.Subject.Digest != ref.Base.ManifestDigest {
		return nil, refused("%s: subject %s is not the ref's base manifest %s", what, m.Subject.Digest, ref.Base.ManifestDigest)
	}
	if m.Annotations[AnnotationRun] != ref.Run || m.Annotations[AnnotationManifest] != ref.Manifest {
		return nil, refused("%s: annotations %s=%q %s=%q disagree with the ref (run %q, manifest %s)", what,
			AnnotationRun, m.Annotations[AnnotationRun], AnnotationManifest, m.Annotations[AnnotationManifest], ref.Run, ref.Manifest)
	}
	if g, ok := m.Annotations[AnnotationGeneration]; ok && g != strconv.FormatUint(ref.Generation, 10) {
		return nil, refused("%s: annotation %s=%q disagrees with the ref's generation %d", what, AnnotationGeneration, g, ref.Generation)
	}
	out := &Artifact{Ref: ref, RefFile: refFile, Manifest: desc, Body: body, Layers: m.Layers}
	if hasStatement {
		// The statement is verified against the same keys as the ref, and
		// must be about this ref (docs/design.md "Exactly once across hosts").
		b, err := small(src, stDesc, what+" handoff statement")
		if err != nil {
			return nil, err
		}
		st, err := OpenStatement(b, trust)
		if err != nil {
			return nil, fmt.Errorf("%s layer %s: %w", what, stDesc.Digest, err)
		}
		if err := checkStatement(st, ref, refFile); err != nil {
			return nil, fmt.Errorf("%s layer %s: %w", what, stDesc.Digest, err)
		}
		out.Statement, out.StatementFile, out.StatementDesc = st, b, stDesc
	}
	return out, nil
}

// CheckArchive checks a scanned archive's index.json and artifact, then
// opens the ref (docs/design.md "Moving runs", import): index.json is an OCI image
// index whose every manifest descriptor names a blob of the archive with its
// size; exactly one of them is a migration artifact
// (CheckArtifactManifest, which verifies the ref against trust); any other
// is the ref's base manifest or base index, walked through the archive
// (every child, config and layer present with its size). A descriptor that
// is none of these, or is not a manifest or index, is refused, and so is a
// blob of the archive that none of them reaches (docs/design.md
// "Hardening", "Archives": only reachable blobs reach the content store). Errors wrap
// ErrArtifactRefused unless they are the ref's own (snapshot.OpenRef).
func CheckArchive(a *Archive, trust *envelope.KeyRing) (*Artifact, error) {
	var idx ocispec.Index
	if err := json.Unmarshal(a.Index, &idx); err != nil {
		return nil, refused("index.json: not an OCI image index: %v", err)
	}
	if idx.SchemaVersion != 2 {
		return nil, refused("index.json: schemaVersion %d, want 2", idx.SchemaVersion)
	}
	var art *ocispec.Descriptor
	var others []ocispec.Descriptor
	for i, d := range idx.Manifests {
		what := fmt.Sprintf("index.json /manifests/%d", i)
		if err := present(a, d, what); err != nil {
			return nil, err
		}
		if d.MediaType == ocispec.MediaTypeImageManifest {
			b, err := small(a, d, what)
			if err != nil {
				return nil, err
			}
			var probe struct {
				ArtifactType string `json:"artifactType"`
			}
			if json.Unmarshal(b, &probe) == nil && probe.ArtifactType == ArtifactType {
				if art != nil {
					return nil, refused("%s: a second migration artifact (%s beside %s)", what, d.Digest, art.Digest)
				}
				art = &idx.Manifests[i]
				continue
			}
		}
		others = append(others, d)
	}
	if art == nil {
		return nil, refused("index.json: no manifest with artifactType %q", ArtifactType)
	}
	body, _ := a.Blob(art.Digest)
	out, err := CheckArtifactManifest(a, ocispec.Descriptor{MediaType: art.MediaType, Digest: art.Digest, Size: art.Size}, body, trust)
	if err != nil {
		return nil, err
	}
	reach := map[digest.Digest]bool{art.Digest: true, digest.FromBytes(out.RefFile): true}
	for _, l := range out.Layers {
		reach[l.Digest] = true
	}
	for _, d := range others {
		switch d.Digest {
		case out.Ref.Base.ManifestDigest:
		case out.Ref.Base.IndexDigest:
			out.BaseIndex = true
		default:
			return nil, refused("index.json: manifest %s is neither the artifact nor the ref's base image", d.Digest)
		}
		if err := walkBase(a, d, 0, &out.Base); err != nil {
			return nil, err
		}
	}
	for _, d := range out.Base {
		reach[d] = true
	}
	var unreached []digest.Digest
	for d := range a.Blobs {
		if !reach[d] {
			unreached = append(unreached, d)
		}
	}
	if len(unreached) > 0 {
		slices.Sort(unreached)
		return nil, refused("archive blob %s is not reachable from index.json (%d such blobs): only the artifact and its base are imported", unreached[0], len(unreached))
	}
	return out, nil
}

// walkBase checks that an image index or manifest and everything it
// references are in the archive, appending their digests to out.
func walkBase(src BlobSource, d ocispec.Descriptor, depth int, out *[]digest.Digest) error {
	what := "base " + d.Digest.String()
	if depth > 2 {
		return refused("%s: indexes nested too deep", what)
	}
	if slices.Contains(*out, d.Digest) {
		return nil
	}
	b, err := small(src, d, what)
	if err != nil {
		return err
	}
	*out = append(*out, d.Digest)
	var probe struct {
		MediaType string               `json:"mediaType"`
		Manifests []ocispec.Descriptor `json:"manifests"`
		Config    *ocispec.Descriptor  `json:"config"`
		Layers    []ocispec.Descriptor `json:"layers"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return refused("%s: not JSON: %v", what, err)
	}
	switch {
	case probe.Manifests != nil:
		for _, m := range probe.Manifests {
			if err := walkBase(src, m, depth+1, out); err != nil {
				return err
			}
		}
	case probe.Config != nil:
		for _, c := range append([]ocispec.Descriptor{*probe.Config}, probe.Layers...) {
			if err := present(src, c, what); err != nil {
				return err
			}
			if !slices.Contains(*out, c.Digest) {
				*out = append(*out, c.Digest)
			}
		}
	default:
		return refused("%s: neither an image index nor an image manifest", what)
	}
	return nil
}

// checkBaseName checks that the ref's base.name is its core.image with at
// most its tag or its digest dropped (docs/design.md "Hardening", "Base
// names"): the same repository, no other tag, no other digest, and a tag
// or a digest left. Suspend records the name it resolved core.image by, so
// every ref this tool writes passes; a signed ref that names another image
// would otherwise have import and pull create an image record under any
// free name. A difference wraps ErrArtifactRefused, naming both.
func checkBaseName(ref *snapshot.Ref) error {
	image, name := ref.Core.Image, ref.Base.Name
	fail := func(why string) error {
		return refused("ref base.name %q is not the ref's core.image %q: %s", name, image, why)
	}
	in, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return fail(err.Error())
	}
	bn, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return fail(err.Error())
	}
	if bn.Name() != in.Name() {
		return fail("another repository")
	}
	bt, btagged := bn.(reference.Tagged)
	bd, bdigested := bn.(reference.Digested)
	if !btagged && !bdigested {
		return fail("neither a tag nor a digest")
	}
	if it, ok := in.(reference.Tagged); btagged && (!ok || it.Tag() != bt.Tag()) {
		return fail("another tag")
	}
	if id, ok := in.(reference.Digested); bdigested && (!ok || id.Digest() != bd.Digest()) {
		return fail("another digest")
	}
	return nil
}
