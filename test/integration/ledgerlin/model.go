// Package ledgerlin checks that a run-ledger backend is linearizable, the
// way etcd's robustness tests check etcd (tests/robustness: many clients
// record every request with its invocation and return times — a request
// that got no answer has an unknown outcome — and porcupine checks the
// history against a small sequential model).
//
// The model is one run's record (docs/design.md "The run ledger"), stepped
// by a transition table of its own with the design's invariants checked on
// every step; histories are partitioned by run. Clients (Workload) drive a ledger.Ledger through suspends, claims,
// Live, Release, take-overs, discards and purges chosen from what they read,
// so that they race on a few runs, and record each call in a History, which
// can be written and read as JSON lines so that clients in separate
// processes (ledger/bolt) make one history.
//
// The model allows what any backend may do and nothing else:
//   - a Claim of a resuming record succeeds only if its holder is gone, and
//     is refused otherwise; whether a holder is gone is the backend's
//     judgement (ledger/etcd: the claim lease expired), so the model accepts
//     either for a resuming record, and the fence then tells them apart;
//   - a Live of a resuming record with its fence may be refused as a lost
//     claim (ledger/etcd: the claim lease expired), changing nothing;
//   - a call without an answer may have taken effect or not.
//
// Everything else must be exactly what the model's own table (predict,
// written from docs/design.md, not ledger.Apply) says of the state the
// linearization reached: the class of a refusal and the record it carries,
// and the record a transition or Get returns (Updated aside); and every
// success must keep the invariants of docs/design.md "Hardening"
// (invariants). A backend running a mutated ledger.Apply is caught.
package ledgerlin

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// The kinds of call a history records.
const (
	KindGet       = "get"
	KindSuspended = "suspended"
	KindClaim     = "claim"
	KindLive      = "live"
	KindRelease   = "release"
	KindDiscard   = "discard"
	KindPurge     = "purge"
	KindHandedOff = "handed-off"
	KindRecalled  = "recalled"
	KindUnwound   = "unwound"
)

// Input is one call: Kind, its run, and its arguments.
type Input struct {
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// Run is the run id.
	Run string `json:"run"`
	// Suspend is the request of a KindSuspended call.
	Suspend *ledger.SuspendRequest `json:"suspend,omitempty"`
	// HandOff is the request of a KindHandedOff call.
	HandOff *ledger.HandOffRequest `json:"handOff,omitempty"`
	// Recall is the request of a KindRecalled call.
	Recall *ledger.RecallRequest `json:"recall,omitempty"`
	// Claim is the request of a KindClaim call.
	Claim *ledger.ClaimRequest `json:"claim,omitempty"`
	// Fence is the fence of a KindLive, KindRelease or KindUnwound call.
	Fence uint64 `json:"fence,omitempty"`
	// Container is the container of a KindLive or KindUnwound call.
	Container ledger.Container `json:"container,omitzero"`
	// Force is the force of a KindDiscard call.
	Force bool `json:"force,omitempty"`
	// Judged is, for a KindClaim over a resuming record, who judged its
	// holder gone: JudgedByBackend when the backend judges by itself
	// (ledger.HolderJudge: etcd's claim lease); otherwise the caller's
	// judgement is Claim.GoneHolder.
	Judged string `json:"judged,omitempty"`
}

// JudgedByBackend is Input.Judged of a claim whose backend judges a
// resuming holder by itself.
const JudgedByBackend = "backend"

// Output is what a call returned.
type Output struct {
	// Unknown: the call got no answer (a storage error or timeout): it may
	// or may not have taken effect.
	Unknown bool `json:"unknown,omitempty"`
	// Found is, for KindGet, whether the run has a record.
	Found bool `json:"found,omitempty"`
	// Class is the refusal class; empty for a success.
	Class string `json:"class,omitempty"`
	// Record is, for a success, the record returned (nil when the call
	// returns none, as Claim.Release); for a refusal, the record carried by
	// the *ledger.Error (nil when there was none); for KindGet, the record
	// read.
	Record *ledger.Record `json:"record,omitempty"`
}

// state is the model's state: the canonical JSON of the run's record, ""
// when there is none. A string, so porcupine compares states with ==.
type state string

// canonical is r's JSON with Updated dropped and times in UTC: two records
// the model cannot tell apart have the same canonical form.
func canonical(r *ledger.Record) state {
	if r == nil {
		return ""
	}
	c := r.Clone()
	c.Updated = time.Time{}
	if c.HandedOff != nil {
		c.HandedOff.At = time.Time{} // the backend's clock, like Updated
	}
	if c.Received != nil {
		c.Received.At = time.Time{}
	}
	if c.SuspendedBy != nil {
		c.SuspendedBy.Created = c.SuspendedBy.Created.UTC()
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return state(b)
}

func (s state) record() *ledger.Record {
	if s == "" {
		return nil
	}
	var r ledger.Record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		panic(err)
	}
	return &r
}

// outcome is one way a call may go from a state.
type outcome struct {
	next  *ledger.Record // the record after the call (nil: none)
	ret   *ledger.Record // the record the call returns on success
	class string         // refusal class, "" on success
	found *ledger.Record // the record a refusal carries
}

// outcomes lists the ways in may go from cur, by the model's own reading
// of docs/design.md "The run ledger" (predict), never by ledger.Apply: a
// mutated table in a backend is a history the model refuses. Every success
// is also checked against the invariants of docs/design.md "Hardening"
// (invariants); an outcome that breaks one is dropped.
func outcomes(cur *ledger.Record, in Input) []outcome {
	var outs []outcome
	for _, o := range predict(cur, in) {
		if o.class == "" && invariants(cur, in, o.next) != nil {
			continue
		}
		outs = append(outs, o)
	}
	return outs
}

// refusal is the outcome of a refused call: nothing changes, the refusal
// carries the record as found.
func refusal(cur *ledger.Record, class string) outcome {
	return outcome{next: cur, class: class, found: cur}
}

// success is the outcome of a call that wrote next and returned ret.
func success(next, ret *ledger.Record) outcome { return outcome{next: next, ret: ret} }

// unchanged is a success that changed nothing and returned the record.
func unchanged(cur *ledger.Record) outcome { return outcome{next: cur, ret: cur} }

func fenceOf(r *ledger.Record) uint64 {
	if r == nil {
		return 0
	}
	return r.Fence
}

// predict is the model's transition table for the calls the workload
// makes: Suspended, Claim, Live, Release, Discard, Purge, HandedOff,
// Recalled and Unwound.
func predict(cur *ledger.Record, in Input) []outcome {
	live := cur != nil && cur.State == ledger.StateLive
	resuming := cur != nil && cur.State == ledger.StateResuming
	purged := cur != nil && cur.State == ledger.StatePurged
	switch in.Kind {
	case KindSuspended:
		r := in.Suspend
		by := &ledger.SuspendedBy{Container: r.Container, Created: r.Created.UTC(), Fence: r.Fence, Generation: r.Generation}
		if r.Generation == 1 {
			if cur != nil && (!purged || (r.RunUID != "" && r.RunUID == cur.RunUID)) {
				return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
			}
			next := &ledger.Record{Run: r.Run, Generation: 1, Ref: r.Ref, RunUID: r.RunUID, State: ledger.StateSuspended, SuspendedBy: by, ForkedFrom: r.ForkedFrom, Fence: fenceOf(cur)}
			if r.Keep {
				next.State, next.Holder, next.Fence = ledger.StateLive, &ledger.Holder{Container: r.Container}, next.Fence+1
			}
			return []outcome{success(next, next)}
		}
		holds := live && cur.Generation+1 == r.Generation && cur.Fence == r.Fence && cur.Holder != nil &&
			*cur.Holder == (ledger.Holder{Container: r.Container}) && (cur.RunUID == "" || cur.RunUID == r.RunUID)
		if !holds {
			return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
		}
		next := cur.Clone()
		next.Generation, next.Ref, next.RunUID, next.SuspendedBy, next.Received = r.Generation, r.Ref, r.RunUID, by, nil
		if !r.Keep {
			next.State, next.Holder = ledger.StateSuspended, nil
		}
		return []outcome{success(&next, &next)}
	case KindClaim:
		c := in.Claim
		if cur != nil {
			switch {
			case cur.RunUID != "" && cur.RunUID != c.RunUID, purged, cur.State == ledger.StateDiscarded, cur.Generation > c.Generation,
				cur.State == ledger.StateHandedOff && cur.Generation >= c.Generation:
				return []outcome{refusal(cur, errdef.ErrSuperseded.Error())}
			case cur.Generation == c.Generation && cur.Ref != c.Ref:
				return []outcome{refusal(cur, errdef.ErrForked.Error())}
			case cur.Generation < c.Generation:
				chained := c.Generation == cur.Generation+1 && c.Parent == cur.Ref ||
					c.Generation > cur.Generation+1 && slices.Contains(c.Ancestors, cur.Ref)
				if !chained {
					return []outcome{refusal(cur, errdef.ErrForked.Error())}
				}
			}
		}
		if !(cur != nil && cur.Generation == c.Generation && cur.Ref == c.Ref) && !c.Copy {
			return []outcome{refusal(cur, errdef.ErrSuperseded.Error())} // not handed off
		}
		h := c.Holder
		next := &ledger.Record{Run: c.Run, Generation: c.Generation, Ref: c.Ref, RunUID: c.RunUID, State: ledger.StateResuming, Holder: &h, Fence: fenceOf(cur) + 1}
		if cur != nil {
			k := cur.Clone()
			if cur.Generation == c.Generation {
				next.SuspendedBy, next.Received = k.SuspendedBy, k.Received
			}
			next.ForkedFrom = k.ForkedFrom
		}
		switch {
		case live && !c.TakeOver:
			return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
		case resuming && in.Judged == JudgedByBackend:
			// The backend judges by itself (etcd: the claim's lease), the
			// judgement recorded as its own: either way, told apart by
			// the fence.
			return []outcome{refusal(cur, errdef.ErrClaimConflict.Error()), success(next, next)}
		case resuming && !(c.GoneHolder != nil && cur.Holder != nil && *c.GoneHolder == *cur.Holder):
			return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
		}
		return []outcome{success(next, next)}
	case KindLive:
		ctr := ledger.Holder{Container: in.Container}
		switch {
		case resuming && cur.Fence == in.Fence:
			next := cur.Clone()
			next.State, next.Holder = ledger.StateLive, &ctr
			// A claim whose lease expired (etcd) is refused, changing
			// nothing.
			return []outcome{success(&next, &next), refusal(cur, errdef.ErrClaimConflict.Error())}
		case live && cur.Fence == in.Fence && cur.Holder != nil && *cur.Holder == ctr:
			return []outcome{unchanged(cur)}
		}
		return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
	case KindRelease:
		if resuming && cur.Fence == in.Fence {
			next := cur.Clone()
			next.State, next.Holder = ledger.StateSuspended, nil
			return []outcome{success(&next, &next)}
		}
		if cur == nil {
			return []outcome{success(nil, nil)} // no record: Release returns the zero Record
		}
		return []outcome{unchanged(cur)}
	case KindDiscard:
		switch {
		case cur == nil:
			next := &ledger.Record{Run: in.Run, State: ledger.StateDiscarded}
			return []outcome{success(next, next)}
		case cur.State == ledger.StateDiscarded, cur.State == ledger.StateHandedOff:
			return []outcome{unchanged(cur)}
		case (live || resuming) && !in.Force:
			return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
		}
		next := &ledger.Record{Run: in.Run, Generation: cur.Generation, Ref: cur.Ref, RunUID: cur.RunUID, State: ledger.StateDiscarded, Fence: cur.Fence}
		return []outcome{success(next, next)}
	case KindPurge:
		if cur == nil || cur.State != ledger.StateDiscarded {
			return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
		}
		next := &ledger.Record{Run: in.Run, Generation: cur.Generation, Ref: cur.Ref, RunUID: cur.RunUID, State: ledger.StatePurged, Fence: cur.Fence}
		return []outcome{success(next, next)}
	case KindHandedOff:
		h := in.HandOff
		handed := cur != nil && cur.State == ledger.StateHandedOff
		switch {
		case handed && cur.Generation == h.Generation && cur.Ref == h.Ref && cur.HandedOff != nil && cur.HandedOff.To == h.To:
			return []outcome{unchanged(cur)} // a retried export
		case handed, live:
			return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
		case h.To == h.Host || h.RunUID == "":
			return []outcome{refusal(cur, errdef.ErrBadInput.Error())}
		case cur == nil || cur.State != ledger.StateSuspended || cur.Generation != h.Generation || cur.Ref != h.Ref ||
			(cur.RunUID != "" && cur.RunUID != h.RunUID):
			return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
		}
		next := &ledger.Record{Run: in.Run, Generation: cur.Generation, Ref: cur.Ref, RunUID: h.RunUID, State: ledger.StateHandedOff,
			HandedOff: &ledger.HandedOff{To: h.To}, Fence: cur.Fence}
		return []outcome{success(next, next)}
	case KindRecalled:
		r := in.Recall
		if cur == nil || cur.State != ledger.StateHandedOff || cur.Generation != r.Generation || cur.Ref != r.Ref {
			return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
		}
		next := cur.Clone()
		next.State, next.HandedOff, next.Fence = ledger.StateSuspended, nil, cur.Fence+1
		return []outcome{success(&next, &next)}
	case KindUnwound:
		if !live || cur.Fence != in.Fence || cur.Holder == nil || *cur.Holder != (ledger.Holder{Container: in.Container}) {
			return []outcome{refusal(cur, errdef.ErrClaimConflict.Error())}
		}
		next := cur.Clone()
		next.State, next.Holder = ledger.StateSuspended, nil
		return []outcome{success(&next, &next)}
	}
	panic("ledgerlin: unknown kind " + in.Kind)
}

// invariants checks one successful call from cur to next against the
// invariants of docs/design.md "Hardening" (linearizability), stated on
// their own and not as the table:
//   - the fence only grows;
//   - the generation never decreases, but through Suspended(1) of a purged
//     run;
//   - a run UID never changes, but through Suspended(1) of a purged run (or
//     a first UID over a record without one);
//   - a Claim writes fence + 1 (so a fence, and a generation's claim under
//     it, is taken at most once) and never claims a generation below the
//     recorded one, nor a discarded, purged or handed-off one;
//   - at most one live holder: a live record is taken only by a take-over;
//     a resuming one only when its holder was judged gone (the judgement
//     in the history: GoneHolder, or the backend's own);
//   - Live makes live only the claim resuming with its fence.
func invariants(cur *ledger.Record, in Input, next *ledger.Record) error {
	f0 := fenceOf(cur)
	if next != nil && next.Fence < f0 {
		return fmt.Errorf("fence went back from %d to %d", f0, next.Fence)
	}
	if cur == nil || next == nil {
		return nil
	}
	restart := in.Kind == KindSuspended && in.Suspend.Generation == 1 && cur.State == ledger.StatePurged
	if next.Generation < cur.Generation && !restart && in.Kind != KindDiscard {
		return fmt.Errorf("generation went back from %d to %d", cur.Generation, next.Generation)
	}
	if cur.RunUID != "" && next.RunUID != cur.RunUID && !restart {
		return fmt.Errorf("run UID changed from %s to %q", cur.RunUID, next.RunUID)
	}
	switch in.Kind {
	case KindClaim:
		c := in.Claim
		switch {
		case next.Fence != f0+1:
			return fmt.Errorf("claim wrote fence %d over %d", next.Fence, f0)
		case c.Generation < cur.Generation:
			return fmt.Errorf("claim of generation %d below the recorded %d", c.Generation, cur.Generation)
		case cur.State == ledger.StateDiscarded || cur.State == ledger.StatePurged:
			return fmt.Errorf("claim of a %s run", cur.State)
		case cur.State == ledger.StateHandedOff && c.Generation <= cur.Generation:
			return fmt.Errorf("claim of generation %d, handed off at %d", c.Generation, cur.Generation)
		case cur.State == ledger.StateLive && !c.TakeOver:
			return fmt.Errorf("a live holder %s replaced without a take-over", cur.Holder)
		case cur.State == ledger.StateResuming && in.Judged != JudgedByBackend && (c.GoneHolder == nil || cur.Holder == nil || *c.GoneHolder != *cur.Holder):
			return fmt.Errorf("a resuming holder %s replaced, not judged gone", cur.Holder)
		}
	case KindLive:
		if next.State == ledger.StateLive && cur.State != ledger.StateLive && (cur.State != ledger.StateResuming || cur.Fence != in.Fence) {
			return fmt.Errorf("live with fence %d from %s", in.Fence, cur)
		}
	case KindHandedOff:
		if next.State == ledger.StateHandedOff && cur.State != ledger.StateHandedOff && cur.State != ledger.StateSuspended {
			return fmt.Errorf("handed off from %s", cur)
		}
	case KindRecalled:
		if next.Fence != f0+1 {
			return fmt.Errorf("recall wrote fence %d over %d", next.Fence, f0)
		}
	}
	return nil
}

// step returns the states the model may reach from s by in returning out.
func step(s state, in Input, out Output) []any {
	cur := s.record()
	if in.Kind == KindGet {
		switch {
		case out.Unknown:
			return []any{s}
		case !out.Found && cur == nil, out.Found && canonical(out.Record) == s:
			return []any{s}
		}
		return nil
	}
	var next []any
	for _, o := range outcomes(cur, in) {
		switch {
		case out.Unknown:
			// An unknown outcome linearized here took effect; one that did
			// not is linearized after everything (its return is unbounded).
			next = append(next, canonical(o.next))
		case o.class != "":
			if out.Class == o.class && canonical(out.Record) == canonical(o.found) {
				next = append(next, canonical(o.next))
			}
		case out.Class == "":
			if out.Record == nil && in.Kind == KindRelease || canonical(out.Record) == canonical(o.ret) {
				next = append(next, canonical(o.next))
			}
		}
	}
	return next
}

// Model is the porcupine model of a run ledger, partitioned by run.
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			byRun := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range h {
				r := op.Input.(Input).Run
				if _, ok := byRun[r]; !ok {
					order = append(order, r)
				}
				byRun[r] = append(byRun[r], op)
			}
			var out [][]porcupine.Operation
			for _, r := range order {
				out = append(out, byRun[r])
			}
			return out
		},
		Init:  func() []any { return []any{state("")} },
		Step:  func(s, in, out any) []any { return step(s.(state), in.(Input), out.(Output)) },
		Equal: func(a, b any) bool { return a.(state) == b.(state) },
		DescribeOperation: func(in, out any) string {
			return describe(in.(Input), out.(Output))
		},
		DescribeState: func(s any) string {
			if r := s.(state).record(); r != nil {
				return r.String()
			}
			return "no record"
		},
	}
	return nm.ToModel()
}

func describe(in Input, out Output) string {
	var call string
	switch in.Kind {
	case KindGet:
		call = fmt.Sprintf("get(%s)", in.Run)
	case KindSuspended:
		s := in.Suspend
		call = fmt.Sprintf("suspended(%s, gen %d, %s, fence %d, keep %v)", s.Run, s.Generation, s.Container.ID, s.Fence, s.Keep)
	case KindClaim:
		c := in.Claim
		call = fmt.Sprintf("claim(%s, gen %d, %s, takeOver %v)", c.Run, c.Generation, c.Holder.ID, c.TakeOver)
	case KindLive:
		call = fmt.Sprintf("live(%s, fence %d, %s)", in.Run, in.Fence, in.Container.ID)
	case KindRelease:
		call = fmt.Sprintf("release(%s, fence %d)", in.Run, in.Fence)
	case KindDiscard:
		call = fmt.Sprintf("discard(%s, force %v)", in.Run, in.Force)
	case KindPurge:
		call = fmt.Sprintf("purge(%s)", in.Run)
	case KindHandedOff:
		call = fmt.Sprintf("handed-off(%s, gen %d, to %s)", in.Run, in.HandOff.Generation, in.HandOff.To)
	case KindRecalled:
		call = fmt.Sprintf("recalled(%s, gen %d)", in.Run, in.Recall.Generation)
	case KindUnwound:
		call = fmt.Sprintf("unwound(%s, fence %d, %s)", in.Run, in.Fence, in.Container.ID)
	}
	switch {
	case out.Unknown:
		return call + " → unknown"
	case out.Class != "":
		return call + " → " + out.Class
	case in.Kind == KindGet && !out.Found:
		return call + " → none"
	case out.Record != nil:
		return call + " → " + out.Record.String()
	}
	return call + " → ok"
}
