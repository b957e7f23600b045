package ledger

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
)

// Op is one transition request for Apply: a SuspendRequest, ClaimOp,
// LiveOp, ReleaseOp, DiscardOp, PurgeOp, HandOffRequest, ReceiveRequest,
// RecallRequest, UnwindRequest or RepinRequest.
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

// RunID returns r.Run.
func (r HandOffRequest) RunID() string { return r.Run }

// RunID returns r.Run.
func (r ReceiveRequest) RunID() string { return r.Run }

// RunID returns r.Run.
func (r RecallRequest) RunID() string { return r.Run }

// RunID returns r.Run.
func (r UnwindRequest) RunID() string { return r.Run }

// RunID returns r.Run.
func (r RepinRequest) RunID() string { return r.Run }

func (SuspendRequest) name() string { return "suspended" }
func (ClaimOp) name() string        { return "claim" }
func (LiveOp) name() string         { return "live" }
func (ReleaseOp) name() string      { return "release" }
func (DiscardOp) name() string      { return "discard" }
func (PurgeOp) name() string        { return "purge" }
func (HandOffRequest) name() string { return "handed-off" }
func (ReceiveRequest) name() string { return "received" }
func (RecallRequest) name() string  { return "recalled" }
func (UnwindRequest) name() string  { return "unwound" }
func (RepinRequest) name() string   { return "repinned" }

// OpName returns the transition's name as *Error.Op spells it:
// "suspended", "claim", "live", "release", "discard", "purge",
// "handed-off", "received", "recalled", "unwound" or "repinned".
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
// Apply does not modify cur. Refusals are *Error (errdef.ErrClaimConflict,
// errdef.ErrSuperseded, errdef.ErrForked, errdef.ErrBadInput) carrying a copy of cur; a
// malformed op, or a cur that is not op's run's record, is an error
// matching ErrInvalid.
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
	case HandOffRequest:
		return applyHandedOff(cur, op, now)
	case ReceiveRequest:
		return applyReceived(cur, op, now)
	case RecallRequest:
		return applyRecalled(cur, op, now)
	case UnwindRequest:
		return applyUnwound(cur, op, now)
	case RepinRequest:
		return applyRepinned(cur, op, now)
	}
	return current(cur), false, fmt.Errorf("%w: unknown transition %T", ErrInvalid, op)
}

func current(cur *Record) Record {
	if cur == nil {
		return Record{}
	}
	return cur.Clone()
}

func refuse(class error, op Op, gen uint64, cur *Record, format string, args ...any) error {
	return refuseCode(class, "", op, gen, cur, format, args...)
}

func refuseCode(class error, code string, op Op, gen uint64, cur *Record, format string, args ...any) error {
	e := &Error{Class: class, Code: code, Op: op.name(), Run: op.RunID(), Generation: gen, Reason: fmt.Sprintf(format, args...)}
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

func validRefs(op Op, parent digest.Digest, ancestors []digest.Digest) error {
	if parent != "" {
		if err := parent.Validate(); err != nil {
			return invalid(op, "parent: %v", err)
		}
	}
	for i, a := range ancestors {
		if err := a.Validate(); err != nil {
			return invalid(op, "ancestors[%d]: %v", i, err)
		}
	}
	return nil
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
		if op.Generation > 1 && op.ForkedFrom != nil {
			return invalid(op, "forkedFrom at generation %d (a fork writes generation 1)", op.Generation)
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
		if err := validRefs(op, op.Parent, op.Ancestors); err != nil {
			return err
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
	case HandOffRequest:
		if op.Generation == 0 {
			return invalid(op, "generation 0")
		}
		if err := op.Ref.Validate(); err != nil {
			return invalid(op, "ref: %v", err)
		}
		if op.To == "" || op.Host == "" {
			return invalid(op, "the host handed to and this host are required")
		}
	case ReceiveRequest:
		if op.Generation == 0 {
			return invalid(op, "generation 0")
		}
		if err := op.Ref.Validate(); err != nil {
			return invalid(op, "ref: %v", err)
		}
		if op.RunUID == "" || op.From == "" || op.To == "" {
			return invalid(op, "the run UID and the hosts handing from and to are required")
		}
		if op.From == op.To {
			return invalid(op, "handed from host %q to itself", op.From)
		}
		if err := validRefs(op, op.Parent, op.Ancestors); err != nil {
			return err
		}
	case RecallRequest:
		if op.Generation == 0 {
			return invalid(op, "generation 0")
		}
		if err := op.Ref.Validate(); err != nil {
			return invalid(op, "ref: %v", err)
		}
	case UnwindRequest:
		if op.Fence == 0 {
			return invalid(op, "fence 0")
		}
		if !validContainer(op.Container) {
			return invalid(op, "%s: host, namespace and container id are required", op.Container)
		}
	case RepinRequest:
		if op.Generation < 2 {
			return invalid(op, "generation %d (a repin writes generation 2 or later)", op.Generation)
		}
		if err := op.Ref.Validate(); err != nil {
			return invalid(op, "ref: %v", err)
		}
		if err := op.Parent.Validate(); err != nil {
			return invalid(op, "parent: %v", err)
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

func uidOrNone(uid string) string {
	if uid == "" {
		return "none (a /2 ref)"
	}
	return uid
}

// chained reports whether a ref of generation gen with parent and
// ancestors continues the chain of rec, a record at a lower generation:
// one generation ahead, parent = rec's ref; further ahead, rec's ref among
// the ancestors.
func chained(rec *Record, gen uint64, parent digest.Digest, ancestors []digest.Digest) bool {
	if gen == rec.Generation+1 {
		return parent == rec.Ref
	}
	return slices.Contains(ancestors, rec.Ref)
}

func brokenChain(rec *Record, gen uint64) string {
	if gen == rec.Generation+1 {
		return fmt.Sprintf("the ref's parent is not generation %d's recorded ref %s (a broken chain)", rec.Generation, rec.Ref)
	}
	return fmt.Sprintf("generation %d's recorded ref %s is not among the ref's ancestors (a broken chain)", rec.Generation, rec.Ref)
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
			return current(cur), false, refuse(errdef.ErrClaimConflict, op, op.Generation, cur, "%s", reason)
		}
		if cur != nil && op.RunUID != "" && op.RunUID == cur.RunUID {
			return current(cur), false, refuse(errdef.ErrClaimConflict, op, op.Generation, cur,
				"the run id is taken: run UID %s is the purged run's (a new generation 1 mints a new run UID)", op.RunUID)
		}
		next := Record{Run: op.Run, Generation: 1, Ref: op.Ref, RunUID: op.RunUID, State: StateSuspended, SuspendedBy: by, Fence: fenceOf(cur), Updated: now}
		if op.ForkedFrom != nil {
			f := *op.ForkedFrom
			next.ForkedFrom = &f
		}
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
	case cur.RunUID != "" && cur.RunUID != op.RunUID:
		why = fmt.Sprintf("the record is run UID %s, the new generation's ref carries %s (another run)", cur.RunUID, uidOrNone(op.RunUID))
	}
	if why != "" {
		return current(cur), false, refuse(errdef.ErrClaimConflict, op, op.Generation, cur, "%s no longer holds the run: %s", op.Container, why)
	}
	next := cur.Clone()
	next.Generation, next.Ref, next.SuspendedBy, next.Updated = op.Generation, op.Ref, by, now
	next.RunUID = op.RunUID // the record's, or one a /3 child of a /2 parent minted
	next.Received = nil     // the new generation was written here
	if !op.Keep {
		next.State, next.Holder = StateSuspended, nil
	}
	return next, true, nil
}

func applyClaim(cur *Record, op ClaimOp, now time.Time) (Record, bool, error) {
	g := op.Generation
	recorded := cur != nil && cur.Generation == g && cur.Ref == op.Ref
	if cur != nil {
		// In the order of docs/design.md: another run or purged (9);
		// superseded (9); forked (6); not handed off (9); claim-conflict (8).
		switch {
		case cur.RunUID != "" && cur.RunUID != op.RunUID:
			return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonAnotherRun, op, g, cur,
				"another run with this id: the record is generation %d of run UID %s, the ref's run UID is %s", cur.Generation, cur.RunUID, uidOrNone(op.RunUID))
		case cur.State == StatePurged:
			return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonPurged, op, g, cur,
				"the run was purged (at generation %d); only a new generation 1 with a new run UID starts it again", cur.Generation)
		case cur.State == StateDiscarded:
			return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonDiscarded, op, g, cur, "the run was discarded (at generation %d)", cur.Generation)
		case cur.Generation > g:
			return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonNewerGeneration, op, g, cur, "generation %d is recorded", cur.Generation)
		case cur.State == StateHandedOff && cur.Generation >= g:
			to, at := "", ""
			if cur.HandedOff != nil {
				to, at = cur.HandedOff.To, cur.HandedOff.At.Format(time.RFC3339)
			}
			return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonHandedOff, op, g, cur, "generation %d was handed off to %q at %s", cur.Generation, to, at)
		case cur.Generation == g && cur.Ref != op.Ref:
			return current(cur), false, refuse(errdef.ErrForked, op, g, cur, "generation %d is recorded with ref %s, not %s", cur.Generation, cur.Ref, op.Ref)
		case cur.Generation < g && !chained(cur, g, op.Parent, op.Ancestors):
			return current(cur), false, refuseCode(errdef.ErrForked, ReasonBrokenChain, op, g, cur, "%s", brokenChain(cur, g))
		}
	}
	if !recorded && !op.Copy {
		return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonNotHandedOff, op, g, cur,
			"no handoff of generation %d to this host: this ledger never recorded it with ref %s (export it with a handoff to this host, or resume it as a copy the source can still resume)", g, op.Ref)
	}
	if cur != nil {
		switch {
		case cur.State == StateLive && !op.TakeOver:
			return current(cur), false, refuse(errdef.ErrClaimConflict, op, g, cur, "the run is live")
		case cur.State == StateResuming && !op.HolderGone:
			return current(cur), false, refuse(errdef.ErrClaimConflict, op, g, cur, "the run is resuming and its holder is not gone")
		}
	}
	h := op.Holder
	next := Record{Run: op.Run, Generation: g, Ref: op.Ref, RunUID: op.RunUID, State: StateResuming, Holder: &h, Fence: fenceOf(cur) + 1, Updated: now}
	if cur != nil {
		c := cur.Clone()
		if cur.Generation == g {
			// suspendedBy and received name the provenance of the latest
			// generation; they are kept while it is the one claimed.
			next.SuspendedBy, next.Received = c.SuspendedBy, c.Received
		}
		next.ForkedFrom = c.ForkedFrom
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
	return current(cur), false, refuse(errdef.ErrClaimConflict, op, 0, cur, "fence %d no longer claims the run for %s: %s", op.Fence, op.Container, why)
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
	case cur == nil:
		return Record{Run: op.Run, State: StateDiscarded, Updated: now}, true, nil
	case cur.State == StateDiscarded, cur.State == StateHandedOff:
		// A handed-off record stays handed-off: only this host's content
		// goes.
		return current(cur), false, nil
	case (cur.State == StateLive || cur.State == StateResuming) && !op.Force:
		return current(cur), false, refuse(errdef.ErrClaimConflict, op, 0, cur, "the run is %s and force is not set", cur.State)
	}
	return Record{Run: op.Run, Generation: cur.Generation, Ref: cur.Ref, RunUID: cur.RunUID, State: StateDiscarded, Fence: cur.Fence, Updated: now}, true, nil
}

func applyPurge(cur *Record, op PurgeOp, now time.Time) (Record, bool, error) {
	if cur == nil || cur.State != StateDiscarded {
		state := "no record"
		if cur != nil {
			state = string(cur.State)
		}
		return current(cur), false, refuse(errdef.ErrClaimConflict, op, 0, cur, "only a discarded run is purged, not %s", state)
	}
	return Record{Run: op.Run, Generation: cur.Generation, Ref: cur.Ref, RunUID: cur.RunUID, State: StatePurged, Fence: cur.Fence, Updated: now}, true, nil
}

func applyHandedOff(cur *Record, op HandOffRequest, now time.Time) (Record, bool, error) {
	g := op.Generation
	if cur != nil && cur.State == StateHandedOff {
		if cur.Generation == g && cur.Ref == op.Ref && cur.HandedOff != nil && cur.HandedOff.To == op.To {
			return current(cur), false, nil // a retried export
		}
		to := ""
		if cur.HandedOff != nil {
			to = cur.HandedOff.To
		}
		return current(cur), false, refuse(errdef.ErrClaimConflict, op, g, cur, "generation %d was handed off to %q already", cur.Generation, to)
	}
	if cur != nil && cur.State == StateLive {
		return current(cur), false, refuse(errdef.ErrClaimConflict, op, g, cur, "the run is live (a generation kept running): suspend it without keeping it running first")
	}
	if op.To == op.Host {
		return current(cur), false, refuse(errdef.ErrBadInput, op, g, cur, "the handoff names this host %q", op.Host)
	}
	if op.RunUID == "" {
		return current(cur), false, refuse(errdef.ErrBadInput, op, g, cur, "generation %d's ref carries no run UID (not a /3 ref): suspend the run once more", g)
	}
	var why string
	switch {
	case cur == nil || cur.State == StatePurged:
		why = "no record"
	case cur.State != StateSuspended:
		why = fmt.Sprintf("the run is %s", cur.State)
	case cur.Generation != g:
		why = fmt.Sprintf("generation %d is recorded", cur.Generation)
	case cur.Ref != op.Ref:
		why = fmt.Sprintf("generation %d is recorded with ref %s", g, cur.Ref)
	case cur.RunUID != "" && cur.RunUID != op.RunUID:
		why = fmt.Sprintf("the record is run UID %s", cur.RunUID)
	}
	if why != "" {
		return current(cur), false, refuse(errdef.ErrClaimConflict, op, g, cur, "only a suspended generation is handed off: %s", why)
	}
	return Record{Run: op.Run, Generation: g, Ref: op.Ref, RunUID: op.RunUID, State: StateHandedOff,
		HandedOff: &HandedOff{To: op.To, At: now}, Fence: cur.Fence, Updated: now}, true, nil
}

func applyReceived(cur *Record, op ReceiveRequest, now time.Time) (Record, bool, error) {
	g := op.Generation
	keep := cur // the record the received one continues; nil from none or a purged other run
	if cur != nil {
		// In the order of docs/design.md: another run or purged (9);
		// superseded (9); forked (6); claim-conflict (8).
		switch {
		case cur.State == StatePurged && cur.RunUID == op.RunUID:
			return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonPurged, op, g, cur, "run UID %s was purged here", op.RunUID)
		case cur.State != StatePurged && cur.RunUID != "" && cur.RunUID != op.RunUID:
			return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonAnotherRun, op, g, cur,
				"another run with this id: the record is generation %d of run UID %s, the statement's is %s", cur.Generation, cur.RunUID, op.RunUID)
		}
		if cur.State == StatePurged {
			keep = nil
		}
	}
	if k := keep; k != nil {
		third := k.State == StateHandedOff && k.Generation == g && k.HandedOff != nil && k.HandedOff.To != op.To && k.HandedOff.To != op.From
		switch {
		case k.State == StateDiscarded:
			return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonDiscarded, op, g, cur, "the run was discarded (at generation %d)", k.Generation)
		case k.Generation > g:
			return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonNewerGeneration, op, g, cur, "generation %d is recorded", k.Generation)
		case third:
			return current(cur), false, refuseCode(errdef.ErrSuperseded, ReasonHandedOff, op, g, cur, "generation %d was handed off to %q, neither this host nor %q", g, k.HandedOff.To, op.From)
		case k.Generation == g && k.Ref != op.Ref:
			return current(cur), false, refuse(errdef.ErrForked, op, g, cur, "generation %d is recorded with ref %s, not %s", g, k.Ref, op.Ref)
		case k.Generation < g && !chained(k, g, op.Parent, op.Ancestors):
			return current(cur), false, refuseCode(errdef.ErrForked, ReasonBrokenChain, op, g, cur, "%s", brokenChain(k, g))
		case k.State == StateLive || k.State == StateResuming:
			return current(cur), false, refuse(errdef.ErrClaimConflict, op, g, cur, "the run is %s", k.State)
		case k.Generation == g && k.State == StateSuspended && k.Received != nil && k.Received.From == op.From:
			return current(cur), false, nil // a retried import
		case k.Generation < g && (k.State == StateSuspended || k.State == StateHandedOff):
		case k.Generation == g && k.State == StateHandedOff:
		default:
			return current(cur), false, refuse(errdef.ErrClaimConflict, op, g, cur, "generation %d is recorded here already (%s)", g, k.State)
		}
	}
	next := Record{Run: op.Run, Generation: g, Ref: op.Ref, RunUID: op.RunUID, State: StateSuspended,
		Received: &Received{From: op.From, At: now}, Fence: max(fenceOf(cur), op.Fence), Updated: now}
	if keep != nil && keep.ForkedFrom != nil {
		f := *keep.ForkedFrom
		next.ForkedFrom = &f
	}
	return next, true, nil
}

func applyRecalled(cur *Record, op RecallRequest, now time.Time) (Record, bool, error) {
	if cur == nil || cur.State != StateHandedOff || cur.Generation != op.Generation || cur.Ref != op.Ref {
		return current(cur), false, refuse(errdef.ErrClaimConflict, op, op.Generation, cur, "only a handed-off generation is recalled, with its ref")
	}
	next := cur.Clone()
	next.State, next.HandedOff, next.Fence, next.Updated = StateSuspended, nil, cur.Fence+1, now
	return next, true, nil
}

func applyUnwound(cur *Record, op UnwindRequest, now time.Time) (Record, bool, error) {
	if cur == nil || cur.State != StateLive || cur.Fence != op.Fence || cur.Holder == nil || *cur.Holder != (Holder{Container: op.Container}) {
		return current(cur), false, refuse(errdef.ErrClaimConflict, op, 0, cur, "fence %d and %s do not hold the run live", op.Fence, op.Container)
	}
	next := cur.Clone()
	next.State, next.Holder, next.Updated = StateSuspended, nil, now
	return next, true, nil
}

func applyRepinned(cur *Record, op RepinRequest, now time.Time) (Record, bool, error) {
	var why string
	switch {
	case cur == nil || cur.State == StatePurged:
		why = "no record"
	case cur.State != StateSuspended:
		why = fmt.Sprintf("the run is %s", cur.State)
	case cur.Generation+1 != op.Generation:
		why = fmt.Sprintf("generation %d is recorded, not %d", cur.Generation, op.Generation-1)
	case cur.Ref != op.Parent:
		why = fmt.Sprintf("the new ref's parent is not the recorded ref %s", cur.Ref)
	case cur.RunUID != op.RunUID:
		why = fmt.Sprintf("the record is run UID %s, the new ref carries %s", uidOrNone(cur.RunUID), uidOrNone(op.RunUID))
	}
	if why != "" {
		return current(cur), false, refuse(errdef.ErrClaimConflict, op, op.Generation, cur, "only the suspended parent generation is repinned: %s", why)
	}
	next := cur.Clone()
	next.Generation, next.Ref, next.SuspendedBy, next.Received, next.Updated = op.Generation, op.Ref, nil, nil, now
	return next, true, nil
}

// String renders r on one line, for messages and test failures.
func (r Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %q %s", r.Run, r.State)
	if r.Generation != 0 {
		fmt.Fprintf(&b, " generation %d ref %s", r.Generation, r.Ref)
	}
	if r.RunUID != "" {
		fmt.Fprintf(&b, " run UID %s", r.RunUID)
	}
	if r.HandedOff != nil {
		fmt.Fprintf(&b, " handed off to %q", r.HandedOff.To)
	}
	if r.Holder != nil {
		fmt.Fprintf(&b, " holder %s", r.Holder)
	}
	fmt.Fprintf(&b, " fence %d", r.Fence)
	return b.String()
}
