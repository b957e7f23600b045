package exitcode

import "testing"

// TestClassCodes pins the class → exit code table of docs/design.md "CLI
// contract" (written from the table, not from the code).
func TestClassCodes(t *testing.T) {
	want := map[Class]int{
		ClassInternal: 1, ClassRefused: 2, ClassBadInput: 2, ClassImageMetadata: 2,
		ClassManifestMismatch: 3, ClassSpecDrift: 3,
		ClassUnpinnedCrossHost: 4, ClassImageUnresolved: 5, ClassImageDrifted: 5,
		ClassUntrusted: 6, ClassTampered: 6, ClassSnapshotMissing: 7,
		ClassClaimConflict: 8, ClassForked: 6, ClassSuperseded: 9, ClassUsage: 64, Class("no-such-class"): 1,
	}
	for c, code := range want {
		if got := c.Code(); got != code {
			t.Errorf("%q.Code() = %d, want %d", c, got, code)
		}
	}
}

// TestCodesTable checks that Codes is ascending, has a meaning for every
// code and lists every code a class maps to.
func TestCodesTable(t *testing.T) {
	listed := map[int]bool{}
	for i, e := range Codes {
		if e.Meaning == "" {
			t.Errorf("code %d has no meaning", e.Code)
		}
		if i > 0 && Codes[i-1].Code >= e.Code {
			t.Errorf("Codes not ascending at %d", e.Code)
		}
		listed[e.Code] = true
	}
	for _, c := range append(VerdictClasses, ClassRefused, ClassUsage) {
		if !listed[c.Code()] {
			t.Errorf("class %q exits %d, which Codes does not list", c, c.Code())
		}
	}
}
