package fake_test

import (
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/ledger/fake"
)

func lost(c ledger.Claim) bool {
	select {
	case <-c.Lost():
		return true
	default:
		return false
	}
}

// TestLost: the fake closes a claim's Lost channel when a later transition
// fences it out, and never for a claim that ended by its own Live or
// Release.
func TestLost(t *testing.T) {
	ctx := t.Context()
	ref := digest.FromString("g1")
	ctr := ledger.Container{Host: "h", Namespace: "ns", ID: "c"}
	h := func(pid int) ledger.Holder { return ledger.Holder{Container: ctr, PID: pid} }
	l := fake.New()
	if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: "r", Generation: 1, Ref: ref, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	a, err := l.Claim(ctx, ledger.ClaimRequest{Run: "r", Generation: 1, Ref: ref, Holder: h(1)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Claim(ctx, ledger.ClaimRequest{Run: "r", Generation: 1, Ref: ref, Holder: h(2), GoneHolder: &[]ledger.Holder{h(1)}[0]})
	if err != nil {
		t.Fatal(err)
	}
	if !lost(a) || lost(b) {
		t.Fatalf("after a claim over a gone holder: a lost %v (want true), b lost %v (want false)", lost(a), lost(b))
	}
	if _, err := b.Live(ctx, ctr); err != nil {
		t.Fatal(err)
	}
	if lost(b) {
		t.Fatal("Live lost the claim")
	}
	c, err := l.Claim(ctx, ledger.ClaimRequest{Run: "r", Generation: 1, Ref: ref, Holder: h(3), TakeOver: true})
	if err != nil {
		t.Fatal(err)
	}
	if lost(b) {
		t.Fatal("a claim that went live is reported lost after a take-over")
	}
	if _, err := l.Discard(ctx, "r", true); err != nil {
		t.Fatal(err)
	}
	if !lost(c) {
		t.Fatal("Discard --force did not lose the resuming claim")
	}
}
