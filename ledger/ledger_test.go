package ledger_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

var (
	when = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ref2 = digest.FromString("generation 2")
)

// TestRecordJSON: the stored and printed form is the record of
// docs/design.md "The run ledger", member for member.
func TestRecordJSON(t *testing.T) {
	rec := ledger.Record{
		Run: "demo-1", Generation: 2, Ref: ref2, State: ledger.StateResuming,
		Holder:      &ledger.Holder{Container: ledger.Container{Host: "h", Namespace: "ns", ID: "c2"}, PID: 123, Start: "s", Boot: "b"},
		SuspendedBy: &ledger.SuspendedBy{Container: ledger.Container{Host: "h", Namespace: "ns", ID: "c1"}, Created: when, Fence: 16, Generation: 2},
		Fence:       17, Updated: when,
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"run":"demo-1","generation":2,"ref":"` + ref2.String() + `","state":"resuming",` +
		`"holder":{"host":"h","namespace":"ns","container":"c2","pid":123,"start":"s","boot":"b"},` +
		`"suspendedBy":{"host":"h","namespace":"ns","container":"c1","created":"2026-12-01T10:00:00Z","fence":16,"generation":2},` +
		`"fence":17,"updated":"2026-12-01T10:00:00Z"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back ledger.Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if b2, _ := json.Marshal(back); string(b2) != want {
		t.Fatalf("round trip: %s", b2)
	}

	live := ledger.Record{Run: "demo-1", Generation: 1, Ref: ref2, State: ledger.StateLive,
		Holder:      &ledger.Holder{Container: ledger.Container{Host: "h", Namespace: "ns", ID: "c"}},
		SuspendedBy: &ledger.SuspendedBy{Container: ledger.Container{Host: "h", Namespace: "ns", ID: "c"}, Created: when, Generation: 1},
		Fence:       1, Updated: when}
	b, _ = json.Marshal(live)
	want = `{"run":"demo-1","generation":1,"ref":"` + ref2.String() + `","state":"live",` +
		`"holder":{"host":"h","namespace":"ns","container":"c"},` +
		`"suspendedBy":{"host":"h","namespace":"ns","container":"c","created":"2026-12-01T10:00:00Z","generation":1},` +
		`"fence":1,"updated":"2026-12-01T10:00:00Z"}`
	if string(b) != want {
		t.Fatalf("live: got  %s\nwant %s", b, want)
	}

	purged := ledger.Record{Run: "demo-1", State: ledger.StatePurged, Fence: 17, Updated: when}
	b, _ = json.Marshal(purged)
	if want := `{"run":"demo-1","state":"purged","fence":17,"updated":"2026-12-01T10:00:00Z"}`; string(b) != want {
		t.Fatalf("purged: got %s, want %s", b, want)
	}
}

func TestErrorClasses(t *testing.T) {
	cur := ledger.Record{Run: "demo-1", Generation: 2, Ref: ref2, State: ledger.StateLive,
		Holder: &ledger.Holder{Container: ledger.Container{Host: "host-a", Namespace: "ns", ID: "inc-1"}}, Fence: 3, Updated: when}
	req := ledger.ClaimRequest{Run: "demo-1", Generation: 2, Ref: ref2,
		Holder: ledger.Holder{Container: ledger.Container{Host: "host-b", Namespace: "ns", ID: "inc-2"}, PID: 9}}
	_, changed, err := ledger.Apply(&cur, ledger.ClaimOp{ClaimRequest: req}, when)
	if changed || !errors.Is(err, errdef.ErrClaimConflict) || errors.Is(err, errdef.ErrSuperseded) || !errors.Is(errdef.Class(err), errdef.ErrClaimConflict) {
		t.Fatalf("claim of a live run: %v", err)
	}
	for _, s := range []string{`"demo-1"`, "claim-conflict", `"inc-1"`, `"host-a"`, "fence 3"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q does not name %s", err, s)
		}
	}
	if strings.Contains(err.Error(), "exit") {
		t.Errorf("message %q speaks of exit codes", err)
	}
	var e *ledger.Error
	if !errors.As(err, &e) || e.Record == nil || e.Record.Holder.Host != "host-a" || e.Op != "claim" {
		t.Fatalf("errors.As: %+v", e)
	}
	e.Record.Fence = 99 // the error carries a copy
	if cur.Fence != 3 {
		t.Fatal("Apply's error shares the current record")
	}
	if errdef.ErrSuperseded.Error() != "superseded" || errdef.ErrForked.Error() != "forked" || errdef.ErrClaimConflict.Error() != "claim-conflict" {
		t.Fatal("class names differ from the CLI contract")
	}

	_, _, err = ledger.Apply(nil, ledger.ClaimOp{ClaimRequest: ledger.ClaimRequest{Run: "demo-1", Ref: ref2, Holder: req.Holder}}, when)
	if !errors.Is(err, ledger.ErrInvalid) || !errdefs.IsInvalidArgument(err) || errdef.Class(err) != nil {
		t.Fatalf("generation 0: %v", err)
	}
	if !errdefs.IsNotFound(ledger.ErrNotFound) {
		t.Fatal("ErrNotFound is not errdefs.ErrNotFound")
	}
}

// TestApplyDoesNotModify: Apply is pure; the record given is never changed.
func TestApplyDoesNotModify(t *testing.T) {
	h := ledger.Holder{Container: ledger.Container{Host: "h", Namespace: "ns", ID: "c"}, PID: 1}
	cur := ledger.Record{Run: "demo-1", Generation: 2, Ref: ref2, State: ledger.StateResuming, Holder: &h, Fence: 3, Updated: when}
	keep, _ := json.Marshal(cur)
	for _, op := range []ledger.Op{
		ledger.LiveOp{Run: "demo-1", Fence: 3, Container: h.Container},
		ledger.ReleaseOp{Run: "demo-1", Fence: 3},
		ledger.DiscardOp{Run: "demo-1", Force: true},
		ledger.ClaimOp{ClaimRequest: ledger.ClaimRequest{Run: "demo-1", Generation: 2, Ref: ref2, Holder: h, GoneHolder: &h}, HolderGone: true},
	} {
		next, changed, err := ledger.Apply(&cur, op, when.Add(time.Hour))
		if err != nil || !changed {
			t.Fatalf("%s: %v", ledger.OpName(op), err)
		}
		if next.Holder != nil && next.Holder == cur.Holder {
			t.Fatalf("%s: next shares the holder of cur", ledger.OpName(op))
		}
		if b, _ := json.Marshal(cur); string(b) != string(keep) {
			t.Fatalf("%s modified cur: %s", ledger.OpName(op), b)
		}
	}
	if _, _, err := ledger.Apply(&cur, ledger.PurgeOp{Run: "other"}, when); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("a record of another run: %v", err)
	}
}

// TestRecordJSONTurn3: the record's turn-3 members, in the order of
// docs/design.md "The run ledger".
func TestRecordJSONTurn3(t *testing.T) {
	rec := ledger.Record{
		Run: "demo-1", Generation: 2, Ref: ref2, RunUID: "ruid:0123456789abcdef0123456789abcdef", State: ledger.StateHandedOff,
		HandedOff:  &ledger.HandedOff{To: "host-b", At: when},
		Received:   &ledger.Received{From: "host-c", At: when},
		ForkedFrom: &ledger.ForkedFrom{Run: "src", RunUID: "ruid:fedcba9876543210fedcba9876543210", Generation: 4, Ref: ref2},
		Fence:      17, Updated: when,
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"run":"demo-1","generation":2,"ref":"` + ref2.String() + `","runUID":"ruid:0123456789abcdef0123456789abcdef","state":"handed-off",` +
		`"handedOff":{"to":"host-b","at":"2026-12-01T10:00:00Z"},"received":{"from":"host-c","at":"2026-12-01T10:00:00Z"},` +
		`"forkedFrom":{"run":"src","runUID":"ruid:fedcba9876543210fedcba9876543210","generation":4,"ref":"` + ref2.String() + `"},` +
		`"fence":17,"updated":"2026-12-01T10:00:00Z"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	if !ledger.StateHandedOff.Valid() || ledger.State("handed_off").Valid() {
		t.Fatal("state handed-off")
	}
	c := rec.Clone()
	c.HandedOff.To, c.Received.From, c.ForkedFrom.Run = "x", "x", "x"
	if rec.HandedOff.To != "host-b" || rec.Received.From != "host-c" || rec.ForkedFrom.Run != "src" {
		t.Fatal("Clone shares the turn-3 members")
	}
}

// TestApplyDoesNotModifyTurn3: the turn-3 rows are pure too, and their
// refusals carry copies; CodeOf reads the finer reason.
func TestApplyDoesNotModifyTurn3(t *testing.T) {
	uid := "ruid:0123456789abcdef0123456789abcdef"
	cur := ledger.Record{Run: "demo-1", Generation: 2, Ref: ref2, RunUID: uid, State: ledger.StateHandedOff,
		HandedOff: &ledger.HandedOff{To: "host-b", At: when}, Fence: 3, Updated: when}
	keep, _ := json.Marshal(cur)
	for _, op := range []ledger.Op{
		ledger.RecallRequest{Run: "demo-1", Generation: 2, Ref: ref2},
		ledger.ReceiveRequest{Run: "demo-1", Generation: 2, Ref: ref2, RunUID: uid, From: "host-b", To: "host-a", Fence: 9},
		ledger.ClaimOp{ClaimRequest: ledger.ClaimRequest{Run: "demo-1", Generation: 3, Ref: digest.FromString("g3"), Parent: ref2, RunUID: uid, Copy: true,
			Holder: ledger.Holder{Container: ledger.Container{Host: "h", Namespace: "ns", ID: "c"}}}},
	} {
		next, changed, err := ledger.Apply(&cur, op, when.Add(time.Hour))
		if err != nil || !changed {
			t.Fatalf("%s: %v", ledger.OpName(op), err)
		}
		if next.HandedOff != nil {
			t.Fatalf("%s: still handed off: %s", ledger.OpName(op), next)
		}
		if b, _ := json.Marshal(cur); string(b) != string(keep) {
			t.Fatalf("%s modified cur: %s", ledger.OpName(op), b)
		}
	}
	_, _, err := ledger.Apply(&cur, ledger.ClaimOp{ClaimRequest: ledger.ClaimRequest{Run: "demo-1", Generation: 2, Ref: ref2, RunUID: uid,
		Holder: ledger.Holder{Container: ledger.Container{Host: "h", Namespace: "ns", ID: "c"}}}}, when)
	var e *ledger.Error
	if !errors.As(err, &e) || ledger.CodeOf(err) != ledger.ReasonHandedOff || e.Record.HandedOff == cur.HandedOff ||
		!strings.Contains(err.Error(), `handed off to "host-b"`) {
		t.Fatalf("claim of a handed-off generation: %v", err)
	}
	_, _, err = ledger.Apply(nil, ledger.HandOffRequest{Run: "demo-1", Generation: 1, Ref: ref2, RunUID: uid, To: "h", Host: "h"}, when)
	if !errors.Is(err, errdef.ErrBadInput) || !errdefs.IsInvalidArgument(err) || !errors.Is(errdef.Class(err), errdef.ErrBadInput) {
		t.Fatalf("a handoff to this host: %v", err)
	}
}
