// Package ledgerlin checks that a run-ledger backend is linearizable, the
// way etcd's robustness tests check etcd (tests/robustness: many clients
// record every request with its invocation and return times — a request
// that got no answer has an unknown outcome — and porcupine checks the
// history against a small sequential model).
//
// The model is one run's record (docs/design.md "The run ledger"), stepped
// by the one transition table, ledger.Apply; histories are partitioned by
// run. Clients (Workload) drive a ledger.Ledger through suspends, claims,
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
// Everything else must be exactly what ledger.Apply says of the state the
// linearization reached: the class of a refusal and the record it carries,
// and the record a transition or Get returns (Updated aside).
package ledgerlin

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

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
)

// Input is one call: Kind, its run, and its arguments.
type Input struct {
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// Run is the run id.
	Run string `json:"run"`
	// Suspend is the request of a KindSuspended call.
	Suspend *ledger.SuspendRequest `json:"suspend,omitempty"`
	// Claim is the request of a KindClaim call.
	Claim *ledger.ClaimRequest `json:"claim,omitempty"`
	// Fence is the fence of a KindLive or KindRelease call.
	Fence uint64 `json:"fence,omitempty"`
	// Container is the container of a KindLive call.
	Container ledger.Container `json:"container,omitzero"`
	// Force is the force of a KindDiscard call.
	Force bool `json:"force,omitempty"`
}

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

// epoch stamps the model's transitions; Updated is never compared.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// outcome is one way a call may go from a state.
type outcome struct {
	next  *ledger.Record // the record after the call (nil: none)
	ret   *ledger.Record // the record the call returns on success
	class string         // refusal class, "" on success
	found *ledger.Record // the record a refusal carries
}

// outcomes lists the ways in may go from cur.
func outcomes(cur *ledger.Record, in Input) []outcome {
	var ops []ledger.Op
	var lostLive bool
	switch in.Kind {
	case KindSuspended:
		ops = []ledger.Op{*in.Suspend}
	case KindClaim:
		ops = []ledger.Op{ledger.ClaimOp{ClaimRequest: *in.Claim}}
		if cur != nil && cur.State == ledger.StateResuming {
			ops = append(ops, ledger.ClaimOp{ClaimRequest: *in.Claim, HolderGone: true})
		}
	case KindLive:
		ops = []ledger.Op{ledger.LiveOp{Run: in.Run, Fence: in.Fence, Container: in.Container}}
		lostLive = cur != nil && cur.State == ledger.StateResuming && cur.Fence == in.Fence
	case KindRelease:
		ops = []ledger.Op{ledger.ReleaseOp{Run: in.Run, Fence: in.Fence}}
	case KindDiscard:
		ops = []ledger.Op{ledger.DiscardOp{Run: in.Run, Force: in.Force}}
	case KindPurge:
		ops = []ledger.Op{ledger.PurgeOp{Run: in.Run}}
	default:
		panic("ledgerlin: unknown kind " + in.Kind)
	}
	var outs []outcome
	for _, op := range ops {
		next, changed, err := ledger.Apply(cur, op, epoch)
		if err != nil {
			outs = append(outs, outcome{next: cur, class: classOf(err), found: cur})
			continue
		}
		o := outcome{next: cur, ret: &next}
		if changed {
			o.next = &next
		}
		if next.Run == "" {
			o.ret = nil // Release of no record returns the zero Record
		}
		outs = append(outs, o)
	}
	if lostLive {
		outs = append(outs, outcome{next: cur, class: ledger.ClassClaimConflict, found: cur})
	}
	return outs
}

func classOf(err error) string {
	if c := ledger.ClassOf(err); c != "" {
		return c
	}
	return "invalid: " + err.Error()
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
