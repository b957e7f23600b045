package resume

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// RefDigest returns the digest of a ref file's bytes as given: the
// ledger's ref, the incarnation's ref label (docs/design.md
// "SnapshotRef"). A re-encoded or re-signed copy is another ref.
func RefDigest(refFile []byte) digest.Digest { return digest.FromBytes(refFile) }

// claimCheck is what the claim check established and did, for the steps
// after it and for the verdict.
type claimCheck struct {
	run    string
	gen    uint64
	ref    digest.Digest
	target ledger.Container // the container to create
	rec    *ledger.Record   // the record as read before the claim; nil: none
	gone   *ledger.Holder   // the resuming holder judged gone
	claim  ledger.Claim     // set by Resume once claimed; nil again once released
	fence  uint64           // the claim's fence (Resume, once claimed)
	// takenOver is the live holder a take-over fenced out (Resume).
	takenOver *ledger.Holder
	// copied: the claim check passed for a generation this ledger never
	// recorded with this ref, accepted as a copy (Request.Copy).
	copied bool
	// pendingRestore: the record is live with the target container, which
	// has no task — a memory resume stopped between Live and the restore;
	// Resume restores into it without a new claim (resume/memory.go).
	pendingRestore bool
}

// targetID returns the id of the container to create: the one Resume was
// given, else DefaultContainerID(run, generation) of the verified ref.
func (s *state) targetID() string {
	if s.containerID == "" {
		s.containerID = DefaultContainerID(s.ref.Run, s.ref.Gen())
	}
	return s.containerID
}

// ledgerClass maps a ledger refusal to the verdict's class; ok is false
// for an error that is not a refusal (a storage error: internal).
func ledgerClass(err error) (Class, bool) {
	switch c := errdef.Class(err); {
	case errors.Is(c, errdef.ErrSuperseded):
		return ClassSuperseded, true
	case errors.Is(c, errdef.ErrForked):
		return ClassForked, true
	case errors.Is(c, errdef.ErrClaimConflict):
		return ClassClaimConflict, true
	}
	return "", false
}

// refuseLedger turns a ledger error into the claim check's failure: a
// refusal keeps its class, anything else is internal naming the run.
func refuseLedger(what, run string, err error) error {
	if class, ok := ledgerClass(err); ok {
		return refuse(CheckClaim, class, err)
	}
	return internal(CheckClaim, fmt.Errorf("run ledger: %s run %q: %w", what, run, err))
}

// sameHost reports whether c is a container of this host and namespace
// (the only containers the facts can see).
func (s *state) local(c ledger.Container) bool {
	return c.Host == s.hostID && c.Namespace == s.facts.Namespace()
}

// judgeGone judges the resuming holder of rec (docs/design.md "The run
// ledger", a holder that is gone): on this host, its resumer process is
// gone (pid, start time, boot id) and its container either does not exist
// or exists with no running task and carries the record's fence label. A
// holder of another host or namespace is never judged gone here. A ledger
// that judges by itself (ledger.HolderJudge: ledger/etcd, by its claim
// key) is asked instead (ledgerJudge).
func (s *state) judgeGone(ctx context.Context, rec *ledger.Record) (bool, string, error) {
	h := rec.Holder
	if !s.local(h.Container) {
		return false, "its host or namespace is not this one", nil
	}
	if s.facts.ResumerAlive(h.PID, h.Start, h.Boot) {
		return false, fmt.Sprintf("its resumer process %d runs", h.PID), nil
	}
	cf, err := s.facts.ContainerState(ctx, h.ID)
	if err != nil {
		return false, "", fmt.Errorf("container %s of the resuming holder: %w", h.ID, err)
	}
	switch {
	case cf == nil:
		return true, "its resumer process is gone and its container does not exist", nil
	case cf.Running:
		return false, fmt.Sprintf("its container %s has a running task", h.ID), nil
	case cf.Labels[snapshot.LabelFence] != strconv.FormatUint(rec.Fence, 10):
		return false, fmt.Sprintf("its container %s carries fence label %q, not the record's %d", h.ID, cf.Labels[snapshot.LabelFence], rec.Fence), nil
	}
	return true, fmt.Sprintf("its resumer process is gone and its container %s has no running task and the record's fence %d", h.ID, rec.Fence), nil
}

// ledgerJudge is the judgement of a resuming holder by a ledger that judges
// by itself (ledger/etcd: the claim's lease), wherever the holder runs.
func ledgerJudge(j ledger.HolderJudge) func(context.Context, *ledger.Record) (bool, string, error) {
	return func(ctx context.Context, rec *ledger.Record) (bool, string, error) {
		gone, err := j.HolderGone(ctx, *rec)
		switch {
		case err != nil:
			return false, "", err
		case gone:
			return true, fmt.Sprintf("its claim (fence %d) expired in the ledger", rec.Fence), nil
		}
		return false, fmt.Sprintf("its claim (fence %d) is still held in the ledger (it expires when the resumer stops keeping it alive)", rec.Fence), nil
	}
}

// claim is the claim check (docs/design.md "Resume decision", check 11):
// the container id to create does not exist, or is the container of the
// holder the claim replaces; no claim lease of the previous release exists
// while the ledger has no record; and the ledger lets this generation be
// resumed — refusals in the design's order: superseded (9), forked (6),
// claim-conflict (8). Decide predicts the Claim transition from the record
// (ledger.Apply, writing nothing); Resume then runs it.
func (s *state) claim(ctx context.Context) (string, error) {
	if s.ledger == nil {
		return "", internal(CheckClaim, errors.New("no run ledger to consult"))
	}
	cc := &claimCheck{run: s.ref.Run, gen: s.ref.Gen(), ref: RefDigest(s.req.RefFile)}
	s.cc = cc
	cc.target = ledger.Container{Host: s.hostID, Namespace: s.facts.Namespace(), ID: s.targetID()}

	rec, err := s.ledger.Get(ctx, cc.run)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
	case err != nil:
		return "", refuseLedger("read", cc.run, err)
	default:
		cc.rec = &rec
	}
	if d, ok, err := s.pendingRestore(ctx); ok || err != nil {
		return d, err
	}
	why := ""
	if rec := cc.rec; rec != nil && rec.State == ledger.StateResuming && rec.Holder != nil {
		judge := s.judgeGone
		if j, ok := s.ledger.(ledger.HolderJudge); ok {
			judge = ledgerJudge(j)
		}
		gone, reason, err := judge(ctx, rec)
		if err != nil {
			return "", internal(CheckClaim, fmt.Errorf("run %q: judging its resuming holder: %w", cc.run, err))
		}
		why = reason
		if gone {
			h := *rec.Holder
			cc.gone = &h
		}
	}

	// Predict the transition from the record as read: the same table the
	// ledger runs, so superseded and forked are reported before anything
	// on this host is looked at, and under --check nothing is written.
	// The ref's run UID, parent and ancestors: the run UID and chain
	// continuity rules (a /2 ref has a parent only, a /1 ref none).
	req := ledger.ClaimRequest{Run: cc.run, Generation: cc.gen, Ref: cc.ref,
		Holder: ledger.Holder{Container: cc.target}, GoneHolder: cc.gone, TakeOver: s.req.TakeOver,
		RunUID: s.ref.RunUID, Parent: s.ref.Parent, Ancestors: s.ref.Ancestors, Copy: s.req.Copy}
	_, _, perr := ledger.Apply(cc.rec, ledger.ClaimOp{ClaimRequest: req, HolderGone: ledger.JudgedGone(cc.gone, cc.rec)}, time.Now())
	class, refused := ledgerClass(perr)
	switch {
	case perr != nil && !refused:
		return "", internal(CheckClaim, fmt.Errorf("run %q: %w", cc.run, perr))
	case refused && class != ClassClaimConflict:
		return "", refuse(CheckClaim, class, perr)
	}

	// The upgrade rule: a claim lease of the previous release, while the
	// ledger has no record of the run.
	if cc.rec == nil || cc.rec.State == ledger.StatePurged {
		lc, err := s.facts.LegacyClaim(ctx, cc.run)
		if err != nil {
			return "", internal(CheckClaim, fmt.Errorf("run %q: claim lease of the previous release: %w", cc.run, err))
		}
		if lc != nil {
			return "", refusef(CheckClaim, ClassClaimConflict,
				"run %q has no ledger record and the previous release's claim lease %s still holds it for container %q in namespace %q on host %q (discarding the run deletes the lease)",
				cc.run, lc.Lease, lc.Container, cc.target.Namespace, cc.target.Host)
		}
	}
	if refused {
		if why != "" {
			return "", refuse(CheckClaim, class, fmt.Errorf("%w; the holder is not gone: %s", perr, why))
		}
		return "", refuse(CheckClaim, class, perr)
	}

	// The container id to create: absent, or the container of the holder
	// the claim replaces (deleted after the claim, guarded).
	replaced := ledger.Replaced(cc.rec)
	deletes, err := s.guardReplaced(ctx, replaced, fenceOfRecord(cc.rec), cc.rec != nil && cc.rec.State == ledger.StateLive)
	if err != nil {
		return "", err
	}
	cf, err := s.facts.ContainerState(ctx, cc.target.ID)
	if err != nil {
		return "", internal(CheckClaim, fmt.Errorf("container %s: %w", cc.target.ID, err))
	}
	if cf != nil && (replaced == nil || replaced.Container != cc.target) {
		return "", refusef(CheckClaim, ClassClaimConflict,
			"container id %s already exists in namespace %q on host %q (choose another container id)", cc.target.ID, cc.target.Namespace, cc.target.Host)
	}

	copied := s.req.Copy && (cc.rec == nil || cc.rec.Generation != cc.gen || cc.rec.Ref != cc.ref)
	if s.mat == nil {
		cc.copied = copied
		d := s.predicted(replaced)
		if deletes != "" {
			d += "; the claim would delete " + deletes
		}
		if copied {
			d += copyNote
		}
		return d, nil
	}
	d, err := s.claimRun(ctx, req)
	cc.copied = copied && err == nil
	if cc.copied {
		d += copyNote
	}
	return d, err
}

// fenceOfRecord is the fence of rec (0 for none).
func fenceOfRecord(rec *ledger.Record) uint64 {
	if rec == nil {
		return 0
	}
	return rec.Fence
}

// copyNote ends the claim check's detail of a claim accepted as a copy.
const copyNote = "; a copy: this ledger never recorded the generation (no handoff), so the host it came from can still resume it"

// predicted is the claim check's detail under Decide: what Claim would do.
func (s *state) predicted(replaced *ledger.Holder) string {
	cc := s.cc
	d := fmt.Sprintf("run %q generation %d (ref %s) may be claimed for %s: ", cc.run, cc.gen, cc.ref, cc.target)
	if cc.rec == nil {
		d += "the ledger has no record of the run"
	} else {
		d += "the record is " + cc.rec.String()
	}
	switch {
	case replaced != nil && cc.rec.State == ledger.StateLive:
		d += fmt.Sprintf("; taking the live run over would fence out %s (an operator's decision)", replaced)
	case replaced != nil:
		d += fmt.Sprintf("; its resuming holder is gone and would be replaced: %s", replaced)
	}
	return d + "; nothing was written"
}

// claimRun runs the Claim transition (Resume), deletes the container of
// the holder it replaced, and stores the ref file's bytes under the run
// lease.
func (s *state) claimRun(ctx context.Context, req ledger.ClaimRequest) (string, error) {
	cc := s.cc
	self, err := Self(cc.target)
	if err != nil {
		return "", internal(CheckClaim, err)
	}
	req.Holder = self
	faultpoint.Reach("resume-judged")
	c, err := s.ledger.Claim(ctx, req)
	if err != nil {
		return "", refuseLedger("claim", cc.run, err)
	}
	cc.claim, cc.fence = c, c.Fence()
	d := fmt.Sprintf("claimed run %q generation %d (ref %s) with fence %d for %s", cc.run, cc.gen, cc.ref, c.Fence(), cc.target)
	if r := c.Replaced(); r != nil {
		if s.req.TakeOver && r.PID == 0 {
			h := *r
			cc.takenOver = &h
			d += fmt.Sprintf("; took the live run over from %s, now fenced out (an operator's decision)", r)
		} else {
			d += fmt.Sprintf("; replaced the gone resuming holder %s", r)
		}
		if s.local(r.Container) {
			// The guard again, on the holder the transition replaced.
			if _, err := s.guardReplaced(ctx, r, c.Fence()-1, s.req.TakeOver && r.PID == 0); err != nil {
				return "", s.releaseAfter(ctx, err)
			}
			if err := s.mat.DeleteContainer(ctx, r.ID); err != nil {
				return "", s.releaseAfter(ctx, internal(CheckClaim, fmt.Errorf("delete container %s of the replaced holder: %w", r.ID, err)))
			}
			d += fmt.Sprintf("; its container %s deleted", r.ID)
		} else {
			d += fmt.Sprintf("; its container %s is not on this host and namespace", r.ID)
		}
	}
	if err := s.mat.StoreRef(ctx, cc.run, s.req.RefFile); err != nil {
		return "", s.releaseAfter(ctx, internal(CheckClaim, fmt.Errorf("store the ref file's bytes (%s) under the run lease of run %q: %w", cc.ref, cc.run, err)))
	}
	return d, nil
}

// releaseAfter releases the claim after err, a failure before the
// container exists, and returns err naming the outcome.
func (s *state) releaseAfter(ctx context.Context, err error) error {
	c := s.cc.claim
	if c == nil {
		return err
	}
	s.cc.claim = nil
	rerr := c.Release(context.WithoutCancel(ctx))
	var ce *CheckError
	if !errors.As(err, &ce) {
		ce = &CheckError{Check: CheckClaim, Class: ClassInternal, Err: err}
	}
	if rerr != nil {
		ce.Err = fmt.Errorf("%w (and releasing the claim of run %q, fence %d, failed: %v)", ce.Err, s.cc.run, c.Fence(), rerr)
	} else {
		ce.Err = fmt.Errorf("%w; claim of run %q (fence %d) released", ce.Err, s.cc.run, c.Fence())
	}
	return ce
}
