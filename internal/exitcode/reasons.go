package exitcode

// The finer reasons of a refusal: `reason` beside `class` in the JSON
// verdict and in {"error": …} (docs/design.md "Hardening"). The ledger's
// reasons are the codes of its refusals (ledger.Reason*, the same
// strings); the others name a refusal outside the ledger.
const (
	ReasonAnotherRun      = "another-run"
	ReasonPurged          = "purged"
	ReasonDiscarded       = "discarded"
	ReasonNewerGeneration = "newer-generation"
	ReasonHandedOff       = "handed-off"
	ReasonNotHandedOff    = "not-handed-off"
	ReasonBrokenChain     = "broken-chain"
	ReasonWhiteoutName    = "whiteout-name"
)

// ReasonInfo documents one reason for docs/exit-codes.md: the reason, the
// class it comes with and what it means.
type ReasonInfo struct {
	Reason  string
	Class   Class
	Meaning string
}

// Reasons lists every reason a refusal may carry, in the order
// docs/exit-codes.md lists them.
var Reasons = []ReasonInfo{
	{ReasonAnotherRun, ClassSuperseded, "the ledger's record of the run id is another run (another run UID): a reused run id"},
	{ReasonPurged, ClassSuperseded, "the run was purged: no generation of it is claimed again"},
	{ReasonDiscarded, ClassSuperseded, "the run was discarded (also when a content check failed: the record takes precedence)"},
	{ReasonNewerGeneration, ClassSuperseded, "the ledger records a newer generation of the run"},
	{ReasonHandedOff, ClassSuperseded, "the generation was handed off to another host (export/push --handoff); on import or pull, the statement names another host and nothing was stored"},
	{ReasonNotHandedOff, ClassSuperseded, "this ledger never recorded the generation (no handoff to this host): export with --handoff, or resume with --copy to accept a copy the source can still resume"},
	{ReasonBrokenChain, ClassForked, "the ref's parent or ancestors do not reach the generation the ledger records"},
	{ReasonWhiteoutName, ClassBadInput, "suspend: a workload file is named like a layer whiteout (.wh.*)"},
}
