package adopt

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"github.com/tailscale/hujson"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
)

// PinEdit is one change pin makes to a devcontainer.json (docs/design.md
// "Adoption"): at Pointer, the string Old becomes New —
// the member's value when Key is false ("/image"), the member's name when
// Key is true ("/features/<key>": a feature id is the key).
type PinEdit struct {
	Pointer string `json:"pointer"`
	Key     bool   `json:"key,omitempty"`
	Old     string `json:"old"`
	New     string `json:"new"`
}

// ImageResolver returns the digest an image reference (the manifest core's
// normalized image) resolves to in a containerd content store: the index
// digest when the name points at an index, else the manifest digest. It is
// pin's seam to the daemon. A name that does not resolve returns an error
// wrapping errdefs.ErrNotFound.
type ImageResolver func(ctx context.Context, ref string) (digest.Digest, error)

// PinOptions control Pin.
type PinOptions struct {
	// Options are the ingestion options (lockfile, reserved names); Path
	// names the file, which Write rewrites.
	envmanifest.Options
	// Write rewrites Path in place, atomically (temp file, fsync, rename),
	// when anything changed.
	Write bool
	// Resolve resolves the image's name; it is called only when the image
	// does not already carry a sha256 digest, and must then not be nil.
	Resolve ImageResolver
}

// PinResult is what Pin did: the Edits planned (image first, then features
// in document order), the patched Document (the input when nothing
// changed), whether it Changed, whether Path was Written, and the Manifest
// of the patched document (pinned).
type PinResult struct {
	Source   string
	Edits    []PinEdit
	Document []byte
	Changed  bool
	Written  bool
	Manifest *envmanifest.Manifest
}

// PinFile reads the devcontainer.json at path and pins it with opts.Path
// set to path. A file that cannot be read is an error wrapping the fs error.
func PinFile(ctx context.Context, path string, opts PinOptions) (*PinResult, error) {
	data, err := inputfile.Read(path, inputfile.MaxJSON)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	opts.Path = path
	return Pin(ctx, data, opts)
}

// Pin makes the manifest of data pinned (docs/design.md "Adoption"): the image
// gets the digest its name resolves to through
// opts.Resolve (name:tag@sha256:…; a name without a tag gets ":latest"
// written out), and each OCI feature by tag becomes its lockfile entry's
// "resolved" reference exactly, so with the lockfile present the features'
// part of the core does not change. The document is edited as JSONC, byte
// for byte the same outside the changed strings; with opts.Write, Path is
// rewritten atomically.
//
// Errors: a *RefusedError when data does not ingest, or when a feature
// cannot be pinned (class "lockfile": no lockfile entry; "invalid-value":
// a tarball or local feature), naming each at its pointer; one wrapping
// errdef.ErrImageUnresolved when the name does not resolve; the resolver's other
// errors; the write's failure (naming the file).
func Pin(ctx context.Context, data []byte, opts PinOptions) (*PinResult, error) {
	src := opts.Path
	if src == "" {
		src = "-"
	}
	m, err := envmanifest.Ingest(data, opts.Options)
	if err != nil {
		return nil, err
	}
	var dg digest.Digest
	if !m.ImagePinned() && !imageDigested(m.Core.Image) {
		if opts.Resolve == nil {
			return nil, fmt.Errorf("%s: image %s: no resolver to pin it with", src, m.Core.Image)
		}
		dg, err = opts.Resolve(ctx, m.Core.Image)
		if err != nil {
			if errdefs.IsNotFound(err) {
				return nil, fmt.Errorf("%s: image %s: %w: %w", src, m.Core.Image, errdef.ErrImageUnresolved, err)
			}
			return nil, fmt.Errorf("%s: image %s: %w", src, m.Core.Image, err)
		}
	}
	edits, err := PlanPin(data, opts.Options, dg)
	if err != nil {
		return nil, err
	}
	res := &PinResult{Source: src, Edits: edits, Document: data, Manifest: m}
	if len(edits) == 0 {
		return res, nil
	}
	out, err := ApplyPin(data, edits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	pinned, err := envmanifest.Ingest(out, opts.Options)
	if err != nil {
		return nil, fmt.Errorf("%s: the pinned document does not ingest: %w", src, err)
	}
	if !pinned.IsPinned() {
		return nil, fmt.Errorf("%s: the pinned document is still unpinned (image %s)", src, pinned.Core.Image)
	}
	res.Document, res.Changed, res.Manifest = out, true, pinned
	if opts.Write {
		if opts.Path == "" {
			return nil, fmt.Errorf("%s: pin: no file to write (stdin)", src)
		}
		if err := writeKeepingMode(opts.Path, out); err != nil {
			return nil, err
		}
		res.Written = true
	}
	return res, nil
}

// imageDigested reports whether a normalized image reference carries a
// digest of any algorithm.
func imageDigested(image string) bool {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return false
	}
	_, ok := named.(reference.Digested)
	return ok
}

// PlanPin plans the edits that pin data (docs/design.md "Adoption"). It is
// pure: no daemon; it reads the lockfile as Ingest does.
//
// imageDigest is the digest the image's name resolved to (the index digest
// when the name is an index); it is used only when the image carries no
// digest, and must then be a valid sha256 digest. The image edit keeps the
// reference as written and appends "@<digest>" (":latest@<digest>" when it
// has no tag). Each OCI feature whose key carries no digest is renamed
// to its lockfile entry's "resolved" string exactly.
//
// Errors: a *RefusedError when data does not ingest; when the image
// carries a digest that is not sha256 ("invalid-value" at /image); and for
// each feature that cannot be pinned, at its pointer: no lockfile entry (or
// no lockfile) is "lockfile", a tarball or local feature is
// "invalid-value". An invalid imageDigest is an error.
func PlanPin(data []byte, opts envmanifest.Options, imageDigest digest.Digest) ([]PinEdit, error) {
	src := opts.Path
	if src == "" {
		src = "-"
	}
	p, err := envmanifest.Analyze(data, opts)
	if err != nil {
		return nil, err
	}
	if len(p.Refusals) > 0 {
		return nil, &envmanifest.RefusedError{Source: src, Refusals: p.Refusals}
	}
	var edits []PinEdit
	var refusals []envmanifest.Refusal
	if img := p.Image; !p.Manifest.Core.ImagePinned() {
		named, err := reference.ParseNormalizedNamed(img)
		if err != nil {
			return nil, fmt.Errorf("%s: /image: %w", src, err) // not reached: ingested
		}
		if d, ok := named.(reference.Digested); ok {
			refusals = append(refusals, envmanifest.Refusal{Pointer: "/image", Class: envmanifest.ClassInvalidValue,
				Message: fmt.Sprintf("image %q carries a %s digest, and pinned means sha256: write it as name:tag and pin again", img, d.Digest().Algorithm())})
		} else {
			if err := imageDigest.Validate(); err != nil || imageDigest.Algorithm() != digest.SHA256 {
				return nil, fmt.Errorf("%s: image %s resolved to %q, not a sha256 digest", src, p.Manifest.Core.Image, imageDigest)
			}
			written := img
			if _, tagged := named.(reference.Tagged); !tagged {
				written += ":latest"
			}
			edits = append(edits, PinEdit{Pointer: "/image", Old: img, New: written + "@" + imageDigest.String()})
		}
	}
	for _, s := range p.Features {
		if (envmanifest.Feature{ID: s.ID}).IsPinned() {
			continue // the key itself carries the digest
		}
		switch {
		case s.Kind == envmanifest.FeatureTarball:
			refusals = append(refusals, envmanifest.Refusal{Pointer: s.Pointer, Class: envmanifest.ClassInvalidValue,
				Message: fmt.Sprintf("feature %q is a tarball, which cannot be digest-addressed: publish it to an OCI registry and declare it by digest", s.Key)})
		case s.Kind == envmanifest.FeatureLocal:
			refusals = append(refusals, envmanifest.Refusal{Pointer: s.Pointer, Class: envmanifest.ClassInvalidValue,
				Message: fmt.Sprintf("feature %q is a local folder, which cannot be digest-addressed: publish it to an OCI registry and declare it by digest", s.Key)})
		case p.Lockfile == "":
			refusals = append(refusals, envmanifest.Refusal{Pointer: s.Pointer, Class: envmanifest.ClassLockfile,
				Message: fmt.Sprintf("feature %q is by tag and there is no lockfile (%s): write one with the reference CLI (devcontainer upgrade --workspace-folder .) or name it with --lockfile", s.Key, lockfileWhere(opts))})
		case s.Resolved == "":
			refusals = append(refusals, envmanifest.Refusal{Pointer: s.Pointer, Class: envmanifest.ClassLockfile,
				Message: fmt.Sprintf("feature %q has no entry in lockfile %s: regenerate it with the reference CLI (devcontainer upgrade --workspace-folder .)", s.Key, p.Lockfile)})
		default:
			edits = append(edits, PinEdit{Pointer: s.Pointer, Key: true, Old: s.Key, New: s.Resolved})
		}
	}
	if len(refusals) > 0 {
		envmanifest.SortRefusals(refusals)
		return nil, &envmanifest.RefusedError{Source: src, Refusals: refusals}
	}
	return edits, nil
}

// lockfileWhere names where a lockfile was looked for.
func lockfileWhere(opts envmanifest.Options) string {
	switch {
	case opts.Lockfile != "":
		return opts.Lockfile
	case opts.Path == "":
		return "stdin: discovery is off"
	}
	return envmanifest.LockfilePathFor(opts.Path) + " does not exist"
}

// errPinEdit says an edit does not match the document.
var errPinEdit = errors.New("pin edit does not match the document")

// ApplyPin returns data with edits applied as a JSONC patch (tailscale/
// hujson): every byte outside the changed strings is kept, comments and
// layout included. An edit whose Old is not at its Pointer is an error
// wrapping errPinEdit.
func ApplyPin(data []byte, edits []PinEdit) ([]byte, error) {
	doc, err := parseJSONC(data)
	if err != nil {
		return nil, err
	}
	for _, e := range edits {
		if !e.Key {
			v := doc.v.Find(e.Pointer)
			lit, ok := literalOf(v)
			if !ok || lit.String() != e.Old {
				return nil, fmt.Errorf("%s: value is not %q: %w", e.Pointer, e.Old, errPinEdit)
			}
			v.Value = hujson.String(e.New)
			continue
		}
		i := strings.LastIndexByte(e.Pointer, '/')
		parent := doc.v.Find(e.Pointer[:max(i, 0)])
		var obj *hujson.Object
		if parent != nil {
			obj, _ = parent.Value.(*hujson.Object)
		}
		found := false
		for j := 0; obj != nil && j < len(obj.Members); j++ {
			if lit, ok := obj.Members[j].Name.Value.(hujson.Literal); ok && lit.String() == e.Old {
				obj.Members[j].Name.Value = hujson.String(e.New)
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%s: no member named %q: %w", e.Pointer, e.Old, errPinEdit)
		}
	}
	return doc.pack(), nil
}

// literalOf returns v's string literal.
func literalOf(v *hujson.Value) (hujson.Literal, bool) {
	if v == nil {
		return nil, false
	}
	lit, ok := v.Value.(hujson.Literal)
	return lit, ok && lit.Kind() == '"'
}
