package resume

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sandbox-resume/sandbox-resume/runspec"
)

// specName names the spec check 10 compares against, for details.
func (s *state) specName() string {
	if s.ref.Spec == nil {
		return "the spec built from image config " + s.ref.Base.ConfigDigest.String() + " (a " + s.ref.Schema + " ref records none)"
	}
	return "the recorded spec " + s.ref.Spec.Digest.String()
}

func (s *state) offeredSpecName() string {
	if s.req.SpecSource != "" {
		return s.req.SpecSource
	}
	return "the offered spec"
}

// 10 spec (docs/design.md "Spec validation"): the recorded
// spec — for a /1 ref, the one built as the previous release built it —
// decodes; an offered spec decodes and does not widen it. What passes is
// what the incarnation is created from (state.createSpec).
func (s *state) specCheck(ctx context.Context) (string, error) {
	if err := s.judgeRecorded(ctx); err != nil {
		return "", err
	}
	if s.ref.Spec == nil && s.req.Spec == nil {
		// The previous release's incarnation, made by the Materializer
		// from the image config and the containerEnv entries on the
		// prepared snapshot (ContainerSpec.Spec nil).
		return fmt.Sprintf("no spec offered: the incarnation of a %s ref is created from image config %s plus the containerEnv entries, as the previous release created it",
			s.ref.Schema, s.ref.Base.ConfigDigest), nil
	}
	recorded := s.spec
	if s.ref.Spec == nil {
		env, _ := ContainerEnv(&s.ref.Core)
		b, err := s.facts.BuildSpec(ctx, s.targetID(), s.ref.Base, s.ref.Layers, env)
		if err != nil {
			return "", internal(CheckSpec, fmt.Errorf("build the spec of a %s ref from image config %s: %w", s.ref.Schema, s.ref.Base.ConfigDigest, err))
		}
		recorded = b
	}
	// A recorded spec that does not decode is the snapshot's fault (it is
	// signed, so it was recorded that way); a built one is ours.
	recordedBad := func(err error) error {
		if s.ref.Spec == nil {
			return internal(CheckSpec, fmt.Errorf("%s: %w", s.specName(), err))
		}
		return refuse(CheckSpec, ClassSnapshotMissing, fmt.Errorf("/ref/spec %s does not decode: %w", s.ref.Spec.Digest, err))
	}
	if s.req.Spec == nil {
		if err := runspec.Validate(runspec.SideRecorded, recorded); err != nil {
			return "", recordedBad(err)
		}
		if err := s.patch(recorded, s.ref.Spec != nil); err != nil {
			return "", recordedBad(err)
		}
		return "no spec offered: the incarnation is created from " + s.specName(), nil
	}

	drift, err := runspec.Compare(recorded, s.req.Spec, runspec.Options{
		ContainerEnv:  s.offered.Core.ContainerEnv,
		Reserved:      s.ref.Policy,
		HostNamespace: s.facts.HostNamespace,
		BindSource:    runspec.CheckBindSource,
	})
	var serr *runspec.Error
	switch {
	case errors.As(err, &serr) && serr.Side == runspec.SideRecorded:
		return "", recordedBad(serr)
	case errors.As(err, &serr):
		return "", refuse(CheckSpec, ClassBadInput, fmt.Errorf("%s: %w", s.offeredSpecName(), serr))
	case err != nil:
		return "", internal(CheckSpec, err)
	}
	s.specDrift = drift
	var widened, allowed []string
	for _, d := range drift {
		p := d.Pointer
		if d.OfferedPointer != "" {
			p += " (offered at " + d.OfferedPointer + ")"
		}
		if d.Allowed {
			allowed = append(allowed, p)
		} else {
			widened = append(widened, p)
		}
	}
	if len(widened) > 0 {
		return "", refusef(CheckSpec, ClassSpecDrift, "%s widens %s at %s (see specDrift)",
			s.offeredSpecName(), s.specName(), strings.Join(widened, ", "))
	}
	if err := s.patch(s.req.Spec, false); err != nil {
		return "", refuse(CheckSpec, ClassBadInput, fmt.Errorf("%s: %w", s.offeredSpecName(), err))
	}
	s.offerSpec = true
	detail := fmt.Sprintf("%s does not widen %s; the incarnation is created from it", s.offeredSpecName(), s.specName())
	if len(allowed) > 0 {
		detail += "; allowed differences: " + strings.Join(allowed, ", ")
	}
	return detail, nil
}

// judgeRecorded refuses (spec-drift) a recorded spec or runtime that
// runspec.JudgeRecorded finds hazards in, unless the request trusts it or
// this ledger recorded the generation from a suspend on this host (its
// suspendedBy names this host at the ref's generation). The ref's own
// host is not taken at its word: its signer is trusted, the host that
// recorded it may not be. A /1 ref's spec is built here and only its
// runtime is judged.
func (s *state) judgeRecorded(ctx context.Context) error {
	if s.req.TrustRecordedSpec {
		return nil
	}
	if s.ledger != nil {
		rec, err := s.ledger.Get(ctx, s.ref.Run)
		// A ledger that cannot be read is judged like no record: check
		// 11 (claim) reports the ledger's error.
		if err == nil && rec.SuspendedBy != nil && rec.SuspendedBy.Generation == s.ref.Generation && rec.SuspendedBy.Host == s.hostID {
			return nil
		}
	}
	var spec []byte
	if s.ref.Spec != nil {
		spec = s.spec
	}
	hazards, err := runspec.JudgeRecorded(spec, s.ref.Runtime)
	if err != nil {
		return refuse(CheckSpec, ClassSnapshotMissing, fmt.Errorf("/ref/spec %s does not decode: %w", s.ref.Spec.Digest, err))
	}
	if len(hazards) == 0 {
		return nil
	}
	what := make([]string, len(hazards))
	for i, h := range hazards {
		what[i] = h.String()
	}
	return refusef(CheckSpec, ClassSpecDrift, "recorded spec from host %s carries %s", s.ref.Host.ID, strings.Join(what, "; "))
}

// patch makes the spec the incarnation is created from (state.createSpec):
// spec edited by runspec.Patch for the container to create in this namespace,
// recorded namespace paths dropped when dropPaths (the recorded spec of a
// /2 ref; a built spec has none, an offered one keeps its own).
func (s *state) patch(spec []byte, dropPaths bool) error {
	out, notApplied, err := runspec.Patch(spec, runspec.Edit{
		RootPath: runspec.BundleRootfs, Namespace: s.facts.Namespace(), ID: s.targetID(), DropNamespacePaths: dropPaths,
	})
	if err != nil {
		return err
	}
	s.createSpec, s.specEdits = out, notApplied
	return nil
}
