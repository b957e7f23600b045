package migrate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// BaseName is what a move did about the base image's name on the
// receiving host (docs/design.md "Moving runs"): Name is the ref's
// base.name; Target the recorded digest it should name (base.indexDigest,
// else base.manifestDigest); Created whether the move created the name;
// Existing the digest an image of that name already pointed at (never
// re-pointed: resume's check 8 judges it); Note says what was done, or why
// nothing was, for people.
type BaseName struct {
	Name     string        `json:"name"`
	Target   digest.Digest `json:"target"`
	Created  bool          `json:"created"`
	Existing digest.Digest `json:"existing,omitempty"`
	Note     string        `json:"note"`
}

// nameBase creates the ref's base.name on the store pointing at the
// recorded index (or, with no index recorded, manifest) digest when no
// image of that name exists and that digest's content is complete here:
// the platform manifest with its config and layers, and the index blob
// when one is recorded. The manifest, and the index's present children,
// are labelled as their parents' children first, so the name keeps its
// content once the run lease is gone. An existing name is never
// re-pointed.
func nameBase(ctx context.Context, s Store, ref *snapshot.Ref) (*BaseName, error) {
	b := ref.Base
	out := &BaseName{Name: b.Name, Target: b.Target()}
	if have, err := s.ImageTarget(ctx, b.Name); err == nil {
		return existing(out, have), nil
	} else if !errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("base name %s: %w", b.Name, err)
	}
	missing, err := s.MissingContent(ctx, b.ManifestDigest)
	if err != nil {
		return nil, fmt.Errorf("base name %s: %w", b.Name, err)
	}
	if len(missing) > 0 {
		out.Note = fmt.Sprintf("not created: the base manifest %s is not complete here (%s missing)", b.ManifestDigest, missing[0])
		return out, nil
	}
	mdata, err := s.ReadBlob(ctx, b.ManifestDigest)
	if err != nil {
		return nil, fmt.Errorf("base manifest %s: %w", b.ManifestDigest, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mdata, &m); err != nil {
		return nil, fmt.Errorf("base manifest %s: %v: %w", b.ManifestDigest, err, ErrArtifactRefused)
	}
	children := []digest.Digest{m.Config.Digest}
	for _, l := range m.Layers {
		children = append(children, l.Digest)
	}
	if err := s.SetChildren(ctx, b.ManifestDigest, children...); err != nil {
		return nil, err
	}
	mt, err := imageMediaType(mdata)
	if err != nil {
		return nil, fmt.Errorf("base manifest %s: %w", b.ManifestDigest, err)
	}
	target := ocispec.Descriptor{MediaType: mt, Digest: b.ManifestDigest, Size: int64(len(mdata))}
	if b.IndexDigest != "" {
		idata, err := s.ReadBlob(ctx, b.IndexDigest)
		if errdefs.IsNotFound(err) {
			out.Note = fmt.Sprintf("not created: the recorded index %s is not here (only the platform manifest %s came; a name pointing at it would not resolve to the recorded digests)", b.IndexDigest, b.ManifestDigest)
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("base index %s: %w", b.IndexDigest, err)
		}
		var idx ocispec.Index
		mt, err := imageMediaType(idata)
		if err != nil || !isIndexType(mt) || json.Unmarshal(idata, &idx) != nil {
			return nil, fmt.Errorf("base index %s is not an image index: %w", b.IndexDigest, ErrArtifactRefused)
		}
		var present []digest.Digest
		for _, c := range idx.Manifests {
			if _, err := s.BlobSize(ctx, c.Digest); err == nil {
				present = append(present, c.Digest)
			}
		}
		if len(present) > 0 {
			if err := s.SetChildren(ctx, b.IndexDigest, present...); err != nil {
				return nil, err
			}
		}
		target = ocispec.Descriptor{MediaType: mt, Digest: b.IndexDigest, Size: int64(len(idata))}
	}
	err = s.CreateImage(ctx, b.Name, target)
	if errdefs.IsAlreadyExists(err) { // created meanwhile
		have, gerr := s.ImageTarget(ctx, b.Name)
		if gerr != nil {
			return nil, fmt.Errorf("base name %s: %w", b.Name, gerr)
		}
		return existing(out, have), nil
	}
	if err != nil {
		return nil, fmt.Errorf("base name %s: %w", b.Name, err)
	}
	out.Created = true
	out.Note = "created, pointing at " + target.Digest.String()
	return out, nil
}

// existing reports a name that exists: never re-pointed.
func existing(out *BaseName, have ocispec.Descriptor) *BaseName {
	out.Existing = have.Digest
	if have.Digest == out.Target {
		out.Note = "exists, pointing at the recorded " + have.Digest.String()
	} else {
		out.Note = fmt.Sprintf("exists, pointing at %s, not the recorded %s: not re-pointed (resume's image check judges it)", have.Digest, out.Target)
	}
	return out
}
