package ledger

import (
	"fmt"
	"strings"
	"time"
)

// Op is one transition request for Apply: a SuspendRequest, ClaimOp,
// LiveOp, ReleaseOp, DiscardOp or PurgeOp.
type Op interface {
	// RunID returns the run the transition is about.
	RunID() string
	name() string
}

// ClaimOp is the Claim transition for Apply: the request and the backend's
// judgement of the record's resuming holder. ledger/bolt and ledger/fake set
// HolderGone to JudgedGone(req.GoneHolder, cur); ledger/etcd sets it when the
// claim key of the run is absent (its lease expired or was revoked).
type ClaimOp struct {
	ClaimRequest
	// HolderGone: the current record's resuming holder is gone. Only read
	// for a resuming record.
	HolderGone bool
}

// LiveOp is the Live transition for Apply.
type LiveOp struct {
	// Run is the run id.
	Run string
	// Fence is the claim's fence.
	Fence uint64
	// Container is the incarnation created: the new holder.
	Container Container
}

// ReleaseOp is the Release transition for Apply.
type ReleaseOp struct {
	// Run is the run id.
	Run string
	// Fence is the claim's fence.
	Fence uint64
}

// DiscardOp is the Discard transition for Apply.
type DiscardOp struct {
	// Run is the run id.
	Run string
	// Force discards a live or resuming record too (--force).
	Force bool
}

// PurgeOp is the Purge transition for Apply.
type PurgeOp struct {
	// Run is the run id.
	Run string
}

// RunID returns r.Run.
func (r SuspendRequest) RunID() string { return r.Run }

// RunID returns o.Run.
func (o ClaimOp) RunID() string { return o.Run }

// RunID returns o.Run.
func (o LiveOp) RunID() string { return o.Run }

// RunID returns o.Run.
func (o ReleaseOp) RunID() string { return o.Run }

// RunID returns o.Run.
func (o DiscardOp) RunID() string { return o.Run }

// RunID returns o.Run.
func (o PurgeOp) RunID() string { return o.Run }

func (SuspendRequest) name() string { return "suspended" }
func (ClaimOp) name() string        { return "claim" }
func (LiveOp) name() string         { return "live" }
func (ReleaseOp) name() string      { return "release" }
func (DiscardOp) name() string      { return "discard" }
func (PurgeOp) name() string        { return "purge" }

// OpName returns the transition's name as *Error.Op spells it: "suspended",
// "claim", "live", "release", "discard" or "purge".
func OpName(op Op) string { return op.name() }

// JudgedGone reports whether gone, the holder a caller judged gone, is
// exactly the holder cur names (every field equal). It is the HolderGone of
// ClaimOp for backends that take the caller's judgement (ledger/bolt,
// ledger/fake).
func JudgedGone(gone *Holder, cur *Record) bool {
	return gone != nil && cur != nil && cur.Holder != nil && *gone == *cur.Holder
}

// Replaced returns a copy of the holder a successful Claim from cur fenced
// out (a resuming or live holder), or nil: the value of Claim.Replaced.
func Replaced(cur *Record) *Holder {
	if cur == nil || cur.Holder == nil || (cur.State != StateResuming && cur.State != StateLive) {
		return nil
	}
	h := *cur.Holder
	return &h
}

// ValidRun reports whether run can be a record's key: non-empty, at most
// 253 bytes, with no '/' and no control characters. (Run id syntax proper is
// the caller's: docs/design.md "SnapshotRef".)
func ValidRun(run string) bool {
	if run == "" || len(run) > 253 {
		return false
	}
	for _, r := range run {
		if r == '/' || r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// Apply is the transition table of docs/design.md "The run ledger", in one
// place for every backend: given the current record (nil: no record) and a
// transition, it returns the record after the transition and whether it
// changed. A backend stores next only when changed is true, and only if the
// record is still cur (compare-and-swap); when changed is false, next is
// the current record (the zero Record when cur is nil). now stamps Updated
// (stored in UTC).
//
// Apply does not modify cur. Refusals are *Error (ErrClaimConflict,
// ErrSuperseded, ErrForked) carrying a copy of cur; a malformed op, or a cur
// that is not op's run's record, is an error matching ErrInvalid.
func Apply(cur *Record, op Op, now time.Time) (next Record, changed bool, err error) {
	if err := validate(cur, op); err != nil {
		return current(cur), false, err
	}
	now = now.UTC()
	switch op := op.(type) {
	case SuspendRequest:
		return applySuspended(cur, op, now)
	case ClaimOp:
		return applyClaim(cur, op, now)
	case LiveOp:
		return applyLive(cur, op, now)
	case ReleaseOp:
		return applyRelease(cur, op, now)
	case DiscardOp:
		return applyDiscard(cur, op, now)
	case PurgeOp:
		return applyPurge(cur, op, now)
	}
	return current(cur), false, fmt.Errorf("%w: unknown transition %T", ErrInvalid, op)
}

func current(cur *Record) Record {
	if cur == nil {
		return Record{}
	}
	return cur.Clone()
}

func refuse(class string, op Op, gen uint64, cur *Record, format string, args ...any) error {
	e := &Error{Class: class, Op: op.name(), Run: op.RunID(), Generation: gen, Reason: fmt.Sprintf(format, args...)}
	if cur != nil {
		c := cur.Clone()
		e.Record = &c
	}
	return e
}

func invalid(op Op, format string, args ...any) error {
	return fmt.Errorf("%w: %s of run %q: %s", ErrInvalid, op.name(), op.RunID(), fmt.Sprintf(format, args...))
}

func validContainer(c Container) bool {
	return c.Host != "" && c.Namespace != "" && c.ID != ""
}

func validate(cur *Record, op Op) error {
	if op == nil {
		return fmt.Errorf("%w: no transition", ErrInvalid)
	}
	if !ValidRun(op.RunID()) {
		return invalid(op, "not a run id")
	}
	if cur != nil && cur.Run != op.RunID() {
		return invalid(op, "the record given is run %q's", cur.Run)
	}
	switch op := op.(type) {
	case SuspendRequest:
		if op.Generation == 0 {
			return invalid(op, "generation 0")
		}
		if err := op.Ref.Validate(); err != nil {
			return invalid(op, "ref: %v", err)
		}
		if !validContainer(op.Container) {
			return invalid(op, "%s: host, namespace and container id are required", op.Container)
		}
		if op.Generation == 1 && op.Fence != 0 {
			return invalid(op, "fence %d at generation 1", op.Fence)
		}
		if op.Generation > 1 && op.Fence == 0 {
			return invalid(op, "no fence at generation %d", op.Generation)
		}
	case ClaimOp:
		if op.Generation == 0 {
			return invalid(op, "generation 0")
		}
		if err := op.Ref.Validate(); err != nil {
			return invalid(op, "ref: %v", err)
		}
		if !validContainer(op.Holder.Container) {
			return invalid(op, "holder %s: host, namespace and container id are required", op.Holder)
		}
	case LiveOp:
		if op.Fence == 0 {
			return invalid(op, "fence 0")
		}
		if !validContainer(op.Container) {
			return invalid(op, "%s: host, namespace and container id are required", op.Container)
		}
	case ReleaseOp:
		if op.Fence == 0 {
			return invalid(op, "fence 0")
		}
	}
	return nil
}

// free reports whether cur accepts a transition from "no record".
func free(cur *Record) bool { return cur == nil || cur.State == StatePurged }

func fenceOf(cur *Record) uint64 {
	if cur == nil {
		return 0
	}
	return cur.Fence
}

func applySuspended(cur *Record, op SuspendRequest, now time.Time) (Record, bool, error) {
	by := &SuspendedBy{Container: op.Container, Created: op.Created.UTC(), Fence: op.Fence, Generation: op.Generation}
	if op.Generation == 1 {
		if !free(cur) {
			reason := "the run id is taken"
			if cur.SuspendedBy != nil {
				reason += fmt.Sprintf(": generation %d was suspended by %s created %s",
					cur.SuspendedBy.Generation, cur.SuspendedBy.Container, cur.SuspendedBy.Created.Format(time.RFC3339Nano))
			}
			return current(cur), false, refuse(ClassClaimConflict, op, op.Generation, cur, "%s", reason)
		}
		next := Record{Run: op.Run, Generation: 1, Ref: op.Ref, State: StateSuspended, SuspendedBy: by, Fence: fenceOf(cur), Updated: now}
		if op.Keep {
			next.State = StateLive
			next.Holder = &Holder{Container: op.Container}
			next.Fence++
		}
		return next, true, nil
	}
	var why string
	switch {
	case cur == nil || cur.State == StatePurged:
		why = "no record"
	case cur.State != StateLive:
		why = fmt.Sprintf("the run is %s", cur.State)
	case cur.Generation+1 != op.Generation:
		why = fmt.Sprintf("generation %d is recorded, not %d", cur.Generation, op.Generation-1)
	case cur.Fence != op.Fence:
		why = fmt.Sprintf("fence %d is recorded, the container holds %d (fenced out)", cur.Fence, op.Fence)
	case cur.Holder == nil || cur.Holder.Container != op.Container:
		why = "another container holds it"
	}
	if why != "" {
		return current(cur), false, refuse(ClassClaimConflict, op, op.Generation, cur, "%s no longer holds the run: %s", op.Container, why)
	}
	next := cur.Clone()
	next.Generation, next.Ref, next.SuspendedBy, next.Updated = op.Generation, op.Ref, by, now
	if !op.Keep {
		next.State, next.Holder = StateSuspended, nil
	}
	return next, true, nil
}

func applyClaim(cur *Record, op ClaimOp, now time.Time) (Record, bool, error) {
	if cur != nil && cur.State != StatePurged {
		// In the order of docs/design.md: superseded, forked, claim-conflict.
		switch {
		case cur.State == StateDiscarded:
			return current(cur), false, refuse(ClassSuperseded, op, op.Generation, cur, "the run was discarded (at generation %d)", cur.Generation)
		case cur.Generation > op.Generation:
			return current(cur), false, refuse(ClassSuperseded, op, op.Generation, cur, "generation %d is recorded", cur.Generation)
		case cur.Generation == op.Generation && cur.Ref != op.Ref:
			return current(cur), false, refuse(ClassForked, op, op.Generation, cur, "generation %d is recorded with ref %s, not %s", cur.Generation, cur.Ref, op.Ref)
		case cur.State == StateLive && !op.TakeOver:
			return current(cur), false, refuse(ClassClaimConflict, op, op.Generation, cur, "the run is live")
		case cur.State == StateResuming && !op.HolderGone:
			return current(cur), false, refuse(ClassClaimConflict, op, op.Generation, cur, "the run is resuming and its holder is not gone")
		}
	}
	h := op.Holder
	next := Record{Run: op.Run, Generation: op.Generation, Ref: op.Ref, State: StateResuming, Holder: &h, Fence: fenceOf(cur) + 1, Updated: now}
	if cur != nil && cur.Generation == op.Generation && cur.SuspendedBy != nil {
		// suspendedBy names the writer of the latest generation; it is kept
		// while that generation is the one claimed.
		s := *cur.SuspendedBy
		next.SuspendedBy = &s
	}
	return next, true, nil
}

func applyLive(cur *Record, op LiveOp, now time.Time) (Record, bool, error) {
	switch {
	case cur != nil && cur.State == StateResuming && cur.Fence == op.Fence:
		next := cur.Clone()
		next.State, next.Holder, next.Updated = StateLive, &Holder{Container: op.Container}, now
		return next, true, nil
	case cur != nil && cur.State == StateLive && cur.Fence == op.Fence && cur.Holder != nil && *cur.Holder == (Holder{Container: op.Container}):
		return current(cur), false, nil // a retried Live
	}
	var why string
	switch {
	case cur == nil || cur.State == StatePurged:
		why = "no record"
	case cur.Fence != op.Fence:
		why = fmt.Sprintf("fence %d is recorded", cur.Fence)
	case cur.State == StateLive:
		why = "live with this fence, held by another container"
	default:
		why = fmt.Sprintf("the run is %s", cur.State)
	}
	return current(cur), false, refuse(ClassClaimConflict, op, 0, cur, "fence %d no longer claims the run for %s: %s", op.Fence, op.Container, why)
}

func applyRelease(cur *Record, op ReleaseOp, now time.Time) (Record, bool, error) {
	if cur == nil || cur.State != StateResuming || cur.Fence != op.Fence {
		return current(cur), false, nil
	}
	next := cur.Clone()
	next.State, next.Holder, next.Updated = StateSuspended, nil, now
	return next, true, nil
}

func applyDiscard(cur *Record, op DiscardOp, now time.Time) (Record, bool, error) {
	switch {
	case free(cur):
		return Record{Run: op.Run, State: StateDiscarded, Fence: fenceOf(cur), Updated: now}, true, nil
	case cur.State == StateDiscarded:
		return current(cur), false, nil
	case (cur.State == StateLive || cur.State == StateResuming) && !op.Force:
		return current(cur), false, refuse(ClassClaimConflict, op, 0, cur, "the run is %s and force is not set", cur.State)
	}
	return Record{Run: op.Run, Generation: cur.Generation, Ref: cur.Ref, State: StateDiscarded, Fence: cur.Fence, Updated: now}, true, nil
}

func applyPurge(cur *Record, op PurgeOp, now time.Time) (Record, bool, error) {
	if cur == nil || cur.State != StateDiscarded {
		state := "no record"
		if cur != nil {
			state = string(cur.State)
		}
		return current(cur), false, refuse(ClassClaimConflict, op, 0, cur, "only a discarded run is purged, not %s", state)
	}
	return Record{Run: op.Run, State: StatePurged, Fence: cur.Fence, Updated: now}, true, nil
}

// String renders r on one line, for messages and test failures.
func (r Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %q %s", r.Run, r.State)
	if r.Generation != 0 {
		fmt.Fprintf(&b, " generation %d ref %s", r.Generation, r.Ref)
	}
	if r.Holder != nil {
		fmt.Fprintf(&b, " holder %s", r.Holder)
	}
	fmt.Fprintf(&b, " fence %d", r.Fence)
	return b.String()
}
