package resume

import (
	"context"
	"errors"
	"time"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// precedence is the verdict precedence of docs/design.md "Hardening": when
// a content check (8 image or 9 snapshot) refused, the run's ledger record
// is read — never written — and when it makes the Claim superseded for a
// reason the record gives (discarded, purged, handed off, a newer
// generation, another run; not not-handed-off, which a missing record
// gives), the verdict is superseded (exit 9), the claim check fails with
// that reason and the content check keeps its own failure: a discarded run
// reads as discarded, not as corruption.
func (s *state) precedence(ctx context.Context, v *Verdict, failed string) {
	if s.ledger == nil || s.ref == nil || v.Class == ClassInternal {
		return
	}
	if failed != CheckImage && failed != CheckSnapshot {
		return
	}
	rec, err := s.ledger.Get(ctx, s.ref.Run)
	if err != nil {
		return // no record (or unreadable): the content check decides
	}
	host := s.hostID
	if host == "" {
		host = s.ref.Host.ID
	}
	req := ledger.ClaimRequest{Run: s.ref.Run, Generation: s.ref.Gen(), Ref: RefDigest(s.req.RefFile),
		Holder:   ledger.Holder{Container: ledger.Container{Host: host, Namespace: s.facts.Namespace(), ID: s.targetID()}},
		TakeOver: s.req.TakeOver, RunUID: s.ref.RunUID, Parent: s.ref.Parent, Ancestors: s.ref.Ancestors, Copy: s.req.Copy}
	_, _, perr := ledger.Apply(&rec, ledger.ClaimOp{ClaimRequest: req}, time.Now())
	if !errors.Is(errdef.Class(perr), errdef.ErrSuperseded) || ledger.CodeOf(perr) == ledger.ReasonNotHandedOff {
		return
	}
	v.Class, v.ExitCode, v.Reason = ClassSuperseded, ClassSuperseded.Code(), ledger.CodeOf(perr)
	if c := v.Check(CheckClaim); c != nil {
		c.Result = ResultFail
		c.Detail = perr.Error() + " (the record was read, not written: it takes precedence over the " + failed + " check's failure)"
	}
}

// Reason returns the finer reason of a refusal (docs/design.md
// "Hardening": `reason` beside `class`): a ledger refusal's code
// (ledger.CodeOf: not-handed-off, purged, …), "whiteout-name" for
// snapshot.ErrWhiteoutName, else "".
func Reason(err error) string {
	if c := ledger.CodeOf(err); c != "" {
		return c
	}
	if errors.Is(err, snapshot.ErrWhiteoutName) {
		return exitcode.ReasonWhiteoutName
	}
	return ""
}
