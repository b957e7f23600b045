package resume_test

import (
	"fmt"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// TestReason: a refusal's reason comes from the ledger's code or the
// whiteout-name sentinel, and every reason is in exitcode.Reasons (the
// docs/exit-codes.md table) with the class the ledger refuses with.
func TestReason(t *testing.T) {
	if got := resume.Reason(fmt.Errorf("suspend: %w", snapshot.ErrWhiteoutName)); got != exitcode.ReasonWhiteoutName {
		t.Errorf("whiteout-name: %q", got)
	}
	if got := resume.Reason(fmt.Errorf("x: %w", &ledger.Error{Class: errdef.ErrSuperseded, Code: ledger.ReasonNotHandedOff})); got != ledger.ReasonNotHandedOff {
		t.Errorf("ledger code: %q", got)
	}
	if got := resume.Reason(fmt.Errorf("plain")); got != "" {
		t.Errorf("no reason: %q", got)
	}
	table := map[string]exitcode.Class{}
	for _, r := range exitcode.Reasons {
		table[r.Reason] = r.Class
	}
	for code, class := range map[string]exitcode.Class{
		ledger.ReasonAnotherRun: exitcode.ClassSuperseded, ledger.ReasonPurged: exitcode.ClassSuperseded,
		ledger.ReasonDiscarded: exitcode.ClassSuperseded, ledger.ReasonNewerGeneration: exitcode.ClassSuperseded,
		ledger.ReasonHandedOff: exitcode.ClassSuperseded, ledger.ReasonNotHandedOff: exitcode.ClassSuperseded,
		ledger.ReasonBrokenChain: exitcode.ClassForked,
	} {
		if table[code] != class {
			t.Errorf("reason %q: table class %q, want %q", code, table[code], class)
		}
	}
}
