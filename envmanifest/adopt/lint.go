package adopt

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
)

// maxFixRounds bounds the rounds of lint --fix (see Lint).
const maxFixRounds = 4

// LintRefusal is one refusal with lint's advice (docs/design.md
// "Adoption"): the refusal (pointer, class, message), the property of
// the advice table it falls under, what to do about it, and what
// `lint --fix` does about it (FixNone: a hand edit).
type LintRefusal struct {
	envmanifest.Refusal
	Property string    `json:"property"`
	Advice   string    `json:"advice"`
	Fix      FixAction `json:"fix,omitempty"`
}

// Unpinned names one thing that keeps an accepted manifest unpinned
// (docs/design.md "Pinned"): the image by tag, or a feature that is not
// digest-addressed. Pointer is "/image" or "/features/<key>"; Reference
// is the normalized image or feature id; Advice says how to pin it.
type Unpinned struct {
	Pointer   string `json:"pointer"`
	Reference string `json:"reference"`
	Advice    string `json:"advice"`
}

// Removal is one member `lint --fix` removed: Pointer in the document as
// read (a mount removed whole is /mounts/N), Count occurrences of it (more
// than one when its name was repeated), because of the refusal at Because
// (Pointer itself, or a member inside it) of class Class.
type Removal struct {
	Pointer string            `json:"pointer"`
	Count   int               `json:"count"`
	Fix     FixAction         `json:"fix"`
	Because string            `json:"because"`
	Class   envmanifest.Class `json:"class"`
}

// ImageReport is what an ImageInspector found: the normalized Reference it
// resolved, the Digest it resolves to in the content store (the index
// digest when the name points at an index, else the manifest digest),
// whether the devcontainer.metadata label was checked, and the label's
// refusals (pointers under /config/Labels/devcontainer.metadata;
// docs/design.md "Image metadata").
type ImageReport struct {
	Reference       string                `json:"reference"`
	Digest          digest.Digest         `json:"digest"`
	MetadataChecked bool                  `json:"metadataChecked"`
	Metadata        []envmanifest.Refusal `json:"-"`
}

// ImageInspector resolves ref (the manifest core's normalized image) through
// a containerd content store and checks its devcontainer.metadata label. It
// is lint's seam to the daemon: the CLI supplies one when a daemon is named.
// A reference that does not resolve returns an error wrapping
// errdefs.ErrNotFound.
type ImageInspector func(ctx context.Context, ref string) (*ImageReport, error)

// LintOptions control Lint (docs/design.md "Adoption").
type LintOptions struct {
	// Options are the ingestion options (lockfile, reserved names); Path
	// names the file, which Fix rewrites.
	envmanifest.Options
	// Fix removes the refused members that FixAction allows and, when that
	// changed anything, rewrites Path atomically (temp file, fsync,
	// rename), keeping comments and layout of the rest.
	Fix bool
	// Image, when not nil, resolves the image and checks its
	// devcontainer.metadata label.
	Image ImageInspector
}

// LintResult is what Lint found and did.
type LintResult struct {
	// Source names the input (its path, "-" for stdin).
	Source string
	// Refusals of the document as read, with advice, sorted by pointer.
	Refusals []LintRefusal
	// Image is the image check's report (nil when not checked: no
	// inspector, or no valid image); ImageRefusals are its label's
	// refusals with advice.
	Image         *ImageReport
	ImageRefusals []LintRefusal
	// Fixed says Fix was asked; Removed lists what it removed, Document is
	// the fixed document, Written says Path was rewritten (only when
	// something was removed), Remaining are the fixed document's refusals.
	Fixed     bool
	Removed   []Removal
	Document  []byte
	Written   bool
	Remaining []LintRefusal
	// Manifest is the manifest of the document (fixed, with Fix) when it
	// ingests and binds no runtime socket (lint flags those among the
	// refusals, though ingestion accepts them); Unpinned lists what keeps
	// it unpinned.
	Manifest *envmanifest.Manifest
	Unpinned []Unpinned
	// Excluded lists the cosmetic and networking members present (of the
	// fixed document, with Fix).
	Excluded []string
}

// OK reports whether the outcome is clean: the document (fixed, with Fix)
// ingests and the image label, when checked, has no refusal. The CLI exits
// 0 when it is, else 2.
func (r *LintResult) OK() bool { return r.Manifest != nil && len(r.ImageRefusals) == 0 }

// LintFile reads the devcontainer.json at path and lints it with
// opts.Path set to path. A file that cannot be read is an error wrapping
// the fs error (the CLI maps a missing one to exit 2).
func LintFile(ctx context.Context, path string, opts LintOptions) (*LintResult, error) {
	data, err := inputfile.Read(path, inputfile.MaxJSON)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	opts.Path = path
	return Lint(ctx, data, opts)
}

// Lint ingests data like Ingest and tells, for each refusal, its pointer,
// class and what to do about it, from one table keyed by property and class
// (AdviceRules; docs/design.md "Adoption"). It reports what
// keeps an accepted manifest unpinned and the excluded members; with
// opts.Image it resolves the image and checks its devcontainer.metadata
// label; with opts.Fix it removes the refused members the table allows
// (a mount with a refused option whole) with a JSONC patch that keeps the
// comments and layout of the rest, and rewrites opts.Path.
//
// Refusals are results, not errors. Errors: one wrapping
// errdef.ErrImageUnresolved when the image does not resolve (nothing is written);
// the inspector's other errors; a lockfile that cannot be read; with Fix, a
// document the JSONC patcher cannot parse, Fix without a path, or the
// write's failure (each names the file).
func Lint(ctx context.Context, data []byte, opts LintOptions) (*LintResult, error) {
	src := opts.Path
	if src == "" {
		src = "-"
	}
	res := &LintResult{Source: src, Fixed: opts.Fix}
	parts, err := envmanifest.Analyze(data, opts.Options)
	if err != nil {
		return nil, err
	}
	res.Refusals = lintRefusals(parts)

	if opts.Image != nil && parts.Manifest != nil && parts.Manifest.Core.Image != "" {
		rep, err := opts.Image(ctx, parts.Manifest.Core.Image)
		if err != nil {
			if errdefs.IsNotFound(err) {
				return nil, fmt.Errorf("%s: image %s: %w: %w", src, parts.Manifest.Core.Image, errdef.ErrImageUnresolved, err)
			}
			return nil, fmt.Errorf("%s: image %s: %w", src, parts.Manifest.Core.Image, err)
		}
		res.Image = rep
		for _, r := range rep.Metadata {
			res.ImageRefusals = append(res.ImageRefusals, advise(r, nil))
		}
	}

	final, finalParts := data, parts
	if opts.Fix {
		res.Document, res.Remaining = data, res.Refusals
	}
	if opts.Fix && parts.Decoded {
		// Keeping the last of a repeated name can reveal a member that is
		// refused on its own (a repeated feature key with a refused id):
		// a further round removes it. Every round only removes, so this
		// ends; maxFixRounds bounds it anyway.
		refusals := res.Refusals
		for round := 0; round < maxFixRounds; round++ {
			fixed, removed, err := fixDocument(final, refusals)
			if err != nil {
				return nil, fmt.Errorf("%s: fix: %w", src, err)
			}
			if len(removed) == 0 {
				break
			}
			res.Removed = append(res.Removed, removed...)
			final = fixed
			if finalParts, err = envmanifest.Analyze(final, opts.Options); err != nil {
				return nil, err
			}
			refusals = append(refusals[:0:0], lintRefusals(finalParts)...)
		}
		res.Document = final
		res.Remaining = refusals
	}
	if finalParts.Manifest != nil {
		res.Excluded = finalParts.Manifest.Excluded
	}
	if len(finalParts.Refusals) == 0 && len(runtimeSockets(finalParts)) == 0 {
		m, err := envmanifest.Ingest(final, opts.Options)
		if err != nil {
			return nil, err // not reached: the same ingestion had no refusal
		}
		res.Manifest = m
		res.Unpinned = unpinned(finalParts, res.Image)
	}

	if opts.Fix && len(res.Removed) > 0 {
		if opts.Path == "" {
			return nil, fmt.Errorf("%s: fix: no file to write (stdin)", src)
		}
		if err := writeKeepingMode(opts.Path, final); err != nil {
			return nil, err
		}
		res.Written = true
	}
	return res, nil
}

// writeKeepingMode rewrites path atomically with data, keeping its
// permission bits (0644 when it cannot be read).
func writeKeepingMode(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	return atomicfile.WriteFile(path, data, mode)
}

// lintRefusals are the refusals of an analysis with advice, and the
// runtime-socket mounts lint flags beside them (runtimeSockets), sorted
// by pointer.
func lintRefusals(p *envmanifest.Analysis) []LintRefusal {
	rs := append(append([]envmanifest.Refusal(nil), p.Refusals...), runtimeSockets(p)...)
	envmanifest.SortRefusals(rs)
	var out []LintRefusal
	for _, r := range rs {
		out = append(out, advise(r, p))
	}
	return out
}

// runtimeSockets flags each bind mount whose source is a runtime socket
// (docs/design.md "Hardening": /var/run/docker.sock,
// /run/containerd/containerd.sock, any *.sock) as executes-or-widens at
// the mount: manifest ingestion accepts the mount (its source is data),
// lint says what it grants.
func runtimeSockets(p *envmanifest.Analysis) []envmanifest.Refusal {
	var out []envmanifest.Refusal
	for _, m := range p.Mounts {
		if m.Mount.Kind != envmanifest.MountBind || !strings.HasSuffix(m.Mount.Source, ".sock") {
			continue
		}
		out = append(out, envmanifest.Refusal{Pointer: m.Pointer, Class: envmanifest.ClassExecutesOrWidens,
			Message: fmt.Sprintf("mount source %s is a runtime socket: the container would control that daemon", m.Mount.Source)})
	}
	return out
}

// unpinned lists what keeps the accepted document of p unpinned.
func unpinned(p *envmanifest.Analysis, img *ImageReport) []Unpinned {
	var out []Unpinned
	if !p.Manifest.Core.ImagePinned() {
		adv := "run `sandbox-resume pin`: it resolves the name in the containerd content store and writes name:tag@sha256:… (the index digest when the name is an index)"
		if img != nil && img.Digest != "" {
			adv = fmt.Sprintf("run `sandbox-resume pin`: the name resolves to %s here, so the image becomes …@%s", img.Digest, img.Digest)
		}
		out = append(out, Unpinned{Pointer: "/image", Reference: p.Manifest.Core.Image, Advice: adv})
	}
	for _, s := range p.Features {
		if !s.OK || (envmanifest.Feature{ID: s.Final}).IsPinned() {
			continue
		}
		var adv string
		switch {
		case s.Kind == envmanifest.FeatureTarball:
			adv = "a tarball feature cannot be pinned: publish it to an OCI registry (devcontainer features publish) and declare it by digest"
		case s.Kind == envmanifest.FeatureLocal:
			adv = "a local feature cannot be pinned: publish it to an OCI registry (devcontainer features publish) and declare it by digest, or install it into a pre-built image and pin that"
		case p.Lockfile == "":
			adv = "no devcontainer-lock.json: let the reference CLI write one (devcontainer upgrade --workspace-folder ., or devcontainer build), then run `sandbox-resume pin`, which rewrites the key to the entry's resolved digest reference"
		default:
			adv = fmt.Sprintf("%s has no entry for this key: regenerate it with the reference CLI (devcontainer upgrade --workspace-folder .), then run `sandbox-resume pin`", p.Lockfile)
		}
		out = append(out, Unpinned{Pointer: s.Pointer, Reference: s.Final, Advice: adv})
	}
	return out
}
