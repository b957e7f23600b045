package suspend

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// This file holds what docs/design.md "Suspend" step 3 checks, and what a
// later generation reads of the generations before it: its parent, the
// generation it was resumed from, and (for retention) the chain.

// readRef reads the ref blob d from the content store (its bytes re-hashed
// by ReadBlob) and opens it without trusting its signatures: suspend wrote
// it, or resume stored it after verifying it. what names it in messages;
// gen, when not 0, is the generation it must be. An absent blob, one with
// other bytes, one that does not open or that is another run's or
// generation's wraps errdef.ErrSnapshotMissing.
func (s *suspension) readRef(ctx context.Context, d digest.Digest, what string, gen uint64) (*snapshot.Ref, []byte, error) {
	file, err := s.c.ReadBlob(ctx, d)
	switch {
	case errdefs.IsNotFound(err), errdefs.IsDataLoss(err):
		return nil, nil, fmt.Errorf("suspend: run %q: %s, ref blob %s: %v: %w", s.run, what, d, err, errdef.ErrSnapshotMissing)
	case err != nil:
		return nil, nil, fmt.Errorf("suspend: run %q: read %s, ref blob %s: %w", s.run, what, d, err)
	}
	ref, err := snapshot.OpenRefUnsafe(file)
	if err != nil {
		return nil, nil, fmt.Errorf("suspend: run %q: %s, ref blob %s: %v: %w", s.run, what, d, err, errdef.ErrSnapshotMissing)
	}
	if ref.Run != s.run || (gen != 0 && ref.Generation != gen) {
		want := fmt.Sprintf("run %q", s.run)
		if gen != 0 {
			want += fmt.Sprintf(" generation %d", gen)
		}
		return nil, nil, fmt.Errorf("suspend: %s, ref blob %s, is run %q generation %d, not %s: %w", what, d, ref.Run, ref.Generation, want, errdef.ErrSnapshotMissing)
	}
	return ref, file, nil
}

// ancestors reads, for a later generation, the parent (the record's ref:
// the run's latest generation) and, for an incarnation, the generation it
// was resumed from (its ref label; its generation label, when there is
// one, is checked against it).
func (s *suspension) ancestors(ctx context.Context, rec ledger.Record) error {
	var err error
	s.parentRef = rec.Ref
	if s.parent, _, err = s.readRef(ctx, rec.Ref, fmt.Sprintf("generation %d (the parent)", rec.Generation), rec.Generation); err != nil {
		return err
	}
	label := s.ctr.Labels[snapshot.LabelRef]
	if label == "" {
		return nil // a runtime container kept running: resumed from nothing
	}
	d, err := digest.Parse(label)
	if err != nil {
		return fmt.Errorf("suspend: container %q: label %s=%q is not a digest: %v: %w", s.ctr.ID, snapshot.LabelRef, label, err, errdef.ErrSnapshotMissing)
	}
	var gen uint64
	if g, err := strconv.ParseUint(s.ctr.Labels[snapshot.LabelGeneration], 10, 64); err == nil {
		gen = g
	}
	if d == rec.Ref && (gen == 0 || gen == s.parent.Generation) {
		s.from = s.parent
		return nil
	}
	s.from, _, err = s.readRef(ctx, d, fmt.Sprintf("the generation container %q was resumed from (label %s)", s.ctr.ID, snapshot.LabelRef), gen)
	return err
}

// describes checks docs/design.md "Suspend" step 3 at generation 1 for a
// resolved image: the container's snapshot was made from it, and a digest
// in the reference is its own.
func describes(image string, base snapshot.Base, ctr snapshot.Container) error {
	want := ""
	if len(base.DiffIDs) > 0 {
		want = identity.ChainID(base.DiffIDs).String()
	}
	if ctr.ParentChainID != want {
		return fmt.Errorf("suspend: container %q: snapshot %s/%s has parent %q, but %s (manifest %s) has chain ID %q: %w",
			ctr.ID, ctr.Snapshotter, ctr.SnapshotKey, ctr.ParentChainID, image, base.ManifestDigest, want, ErrMismatch)
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return fmt.Errorf("suspend: image %q: %w", image, err)
	}
	if d, ok := named.(reference.Digested); ok {
		if d.Digest() != base.ManifestDigest && d.Digest() != base.IndexDigest {
			return fmt.Errorf("suspend: image %s: its digest is neither the resolved index %q nor manifest %q: %w",
				image, base.IndexDigest, base.ManifestDigest, ErrMismatch)
		}
	}
	return nil
}

// describesSpec checks the rest of step 3 at generation 1 against the
// container's runtime spec: every containerEnv entry whose value holds no
// "${" is in process.env as NAME=value, with no other NAME= entry beside
// it (as resume's check 10 requires of an offered spec), and every
// declared mount target is the destination of one of the spec's mounts
// (paths compared cleaned). The spec is read with the strict decoder's
// structure rules (its numbers are not looked at). Every difference is
// named in the one ErrMismatch.
func describesSpec(ctr snapshot.Container, core *envmanifest.Core) error {
	var names []string
	for k, v := range core.ContainerEnv {
		if !strings.Contains(v, "${") {
			names = append(names, k)
		}
	}
	if len(names) == 0 && len(core.Mounts) == 0 {
		return nil
	}
	sort.Strings(names)
	root, errs := strictjson.Decode(ctr.Spec, false)
	for _, e := range errs {
		if e.Kind != strictjson.Number {
			return fmt.Errorf("suspend: container %q: its runtime spec does not decode (%s at %q: %s), so it cannot be checked against the declaration: %w",
				ctr.ID, e.Kind, e.Pointer, e.Message, ErrMismatch)
		}
	}
	if root == nil || root.Kind != strictjson.KindObject {
		return fmt.Errorf("suspend: container %q: its runtime spec is not a JSON object, so it cannot be checked against the declaration: %w", ctr.ID, ErrMismatch)
	}
	var diffs []string
	var env []string
	if n := root.Get("process").Get("env"); n != nil {
		for _, e := range n.Elems {
			if e.Kind == strictjson.KindString {
				env = append(env, e.Str)
			}
		}
	}
	for _, name := range names {
		want := name + "=" + core.ContainerEnv[name]
		found, wrong := false, ""
		for _, e := range env {
			switch {
			case e == want:
				found = true
			case strings.HasPrefix(e, name+"=") && wrong == "":
				wrong = e
			}
		}
		switch {
		case wrong != "":
			diffs = append(diffs, fmt.Sprintf("containerEnv %s: process.env has %q, the declaration %q", name, wrong, want))
		case !found:
			diffs = append(diffs, fmt.Sprintf("containerEnv %s: process.env has no %s= entry, the declaration %q", name, name, want))
		}
	}
	dests := map[string]bool{}
	if n := root.Get("mounts"); n != nil {
		for _, m := range n.Elems {
			if d := m.Get("destination"); d != nil && d.Kind == strictjson.KindString {
				dests[path.Clean(d.Str)] = true
			}
		}
	}
	for _, m := range core.Mounts {
		if !dests[path.Clean(m.Target)] {
			diffs = append(diffs, fmt.Sprintf("mount target %s: no mount of the runtime spec has it as destination", m.Target))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("suspend: container %q: its runtime spec does not carry the declaration: %s: %w", ctr.ID, strings.Join(diffs, "; "), ErrMismatch)
	}
	return nil
}

// describesLater checks step 3 at a later generation: the offered
// manifest is the parent's (a run's toolchain never changes mid-life: a
// changed one is a new run), and the container's snapshot was built from
// the base and the layers of the generation it was resumed from (none for
// a runtime container kept running: the base chain).
func (s *suspension) describesLater() error {
	if s.m.Address != s.parent.Manifest {
		return fmt.Errorf("suspend: run %q: the offered declaration has manifest %s, but generation %d records %s (a run's declaration never changes; a changed one is a new run): %w",
			s.run, s.m.Address, s.parent.Generation, s.parent.Manifest, ErrMismatch)
	}
	chain := slices.Clone(s.parent.Base.DiffIDs)
	what := fmt.Sprintf("the base %s (manifest %s)", s.parent.Base.Name, s.parent.Base.ManifestDigest)
	if s.from != nil {
		for _, l := range s.from.Layers {
			chain = append(chain, l.DiffID)
		}
		what += fmt.Sprintf(" and the %d layers of generation %d it was resumed from", len(s.from.Layers), s.from.Generation)
	}
	want := ""
	if len(chain) > 0 {
		want = identity.ChainID(chain).String()
	}
	if s.ctr.ParentChainID != want {
		return fmt.Errorf("suspend: container %q: snapshot %s/%s has parent %q, but %s have chain ID %q: %w",
			s.ctr.ID, s.ctr.Snapshotter, s.ctr.SnapshotKey, s.ctr.ParentChainID, what, want, ErrMismatch)
	}
	return nil
}

// samePolicy reports whether two reserved-environment lists are the same
// set of names.
func samePolicy(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// release is the retention of docs/design.md "SnapshotRef": walking the
// new generation's Parent chain through the ref blobs on this host, it
// keeps the layers named by the latest s.keep generations and releases
// from the run lease every other layer of older generations (never a ref
// or spec blob, nor a blob whose diffID is one of the base's). The walk
// ends at generation 1, or at the first ref blob this host cannot read (a
// run that came from another host brought only its latest generation):
// what it did not reach stays held, the safe direction, and the next
// suspend walks the chain again. Only a failing release is an error; a
// run lease that is gone (the run was discarded) ends the walk.
func (s *suspension) release(ctx context.Context) ([]digest.Digest, error) {
	ref := s.res.Ref
	if ref.Generation <= 1 {
		return nil, nil
	}
	base := map[digest.Digest]bool{}
	for _, d := range ref.Base.DiffIDs {
		base[d] = true
	}
	keep := map[digest.Digest]bool{}
	var released []digest.Digest
	for n := 1; ; n++ {
		if n > s.keep {
			// The generation's chain snapshot goes with its layers
			// (chain.go); a child snapshot keeps it while it needs it.
			err := s.c.ReleaseChain(ctx, s.res.Lease, chainOf(ref))
			switch {
			case errdefs.IsNotFound(err):
				return released, nil
			case err != nil:
				return released, fmt.Errorf("chain snapshot of generation %d: %w", ref.Generation, err)
			}
		}
		for _, l := range ref.Layers {
			switch {
			case n <= s.keep:
				keep[l.Digest] = true
			case keep[l.Digest] || base[l.DiffID] || slices.Contains(released, l.Digest):
			default:
				err := s.c.ReleaseBlob(ctx, s.res.Lease, l.Digest)
				switch {
				case errdefs.IsNotFound(err):
					return released, nil
				case err != nil:
					return released, fmt.Errorf("layer %s of generation %d: %w", l.Digest, ref.Generation, err)
				}
				released = append(released, l.Digest)
			}
		}
		if ref.Generation <= 1 || ref.Parent == "" {
			return released, nil
		}
		file, err := s.c.ReadBlob(ctx, ref.Parent)
		if err != nil {
			return released, nil
		}
		if ref, err = snapshot.OpenRefUnsafe(file); err != nil || ref.Run != s.run {
			return released, nil
		}
	}
}
