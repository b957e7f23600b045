package resume

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/runspec"
)

// Check names, in the order Decide runs them (docs/design.md "Resume decision",
// the check table). The strings are part of the verdict's JSON contract.
const (
	CheckRefParse      = "ref-parse"      // 1: strict decoder, a JSON object with an object "ref"
	CheckSignature     = "signature"      // 2: the "Signed documents" rule over the JCS of "ref" as parsed
	CheckRefSchema     = "ref-schema"     // 3: "ref" has exactly the SnapshotRef members with the right types
	CheckRefIntegrity  = "ref-integrity"  // 4: manifest = address(core), pinned = IsPinned(core)
	CheckOfferedIngest = "offered-ingest" // 5: the offered devcontainer.json ingests with the recorded policy and lockfile rules
	CheckManifest      = "manifest"       // 6: offered address = ref.manifest
	CheckHost          = "host"           // 7: same host (host.id and host.idSource), or pinned
	CheckImage         = "image"          // 8: platform, base content present, the reference still names the recorded digests, the devcontainer.metadata label passes
	CheckSnapshot      = "snapshot"       // 9: every layer blob and the spec blob present with its digest and size (the spec read and its digest verified)
	CheckMemory        = "memory"         // 12 (after snapshot): the recorded memory image is one this host restores (format, tool and version, CPU flags)
	CheckSpec          = "spec"           // 10: the offered --spec decodes and does not widen the recorded spec (without --spec: the recorded spec decodes)
	CheckClaim         = "claim"          // 11: the container id is free and the ledger lets this generation be claimed
)

// CheckNames lists the twelve check names in the order they run (check
// 12, memory, runs after snapshot and before spec: docs/design.md
// "Memory").
var CheckNames = []string{
	CheckRefParse, CheckSignature, CheckRefSchema, CheckRefIntegrity,
	CheckOfferedIngest, CheckManifest, CheckHost, CheckImage, CheckSnapshot, CheckMemory, CheckSpec, CheckClaim,
}

// Class names why a resume was refused: the verdict's "class"
// (docs/design.md "Resume decision", the check table's "class on failure"
// column). It is internal/exitcode's class, whose Code method gives the
// exit code; the strings are part of the JSON contract.
type Class = exitcode.Class

// Verdict classes (internal/exitcode holds the one table of classes and
// exit codes).
const (
	ClassBadInput           = exitcode.ClassBadInput           // checks 1, 3, 5, 10: exit 2
	ClassUntrusted          = exitcode.ClassUntrusted          // check 2: exit 6
	ClassTampered           = exitcode.ClassTampered           // check 4: exit 6
	ClassManifestMismatch   = exitcode.ClassManifestMismatch   // check 6: exit 3
	ClassUnpinnedCrossHost  = exitcode.ClassUnpinnedCrossHost  // check 7: exit 4
	ClassImageUnresolved    = exitcode.ClassImageUnresolved    // check 8: exit 5
	ClassImageDrifted       = exitcode.ClassImageDrifted       // check 8: exit 5
	ClassImageMetadata      = exitcode.ClassImageMetadata      // check 8: exit 2
	ClassSnapshotMissing    = exitcode.ClassSnapshotMissing    // check 9, a recorded spec that does not decode (check 10), materialize: exit 7
	ClassSpecDrift          = exitcode.ClassSpecDrift          // check 10: the offered spec widens the recorded one, exit 3
	ClassForked             = exitcode.ClassForked             // claim: another ref recorded for this generation, exit 6
	ClassClaimConflict      = exitcode.ClassClaimConflict      // claim: held, in flight, the container id exists; a lost claim: exit 8
	ClassSuperseded         = exitcode.ClassSuperseded         // claim: a newer generation, or the run discarded: exit 9
	ClassMemoryIncompatible = exitcode.ClassMemoryIncompatible // memory: the memory image cannot be restored here: exit 10
	ClassUsage              = exitcode.ClassUsage              // memory: --copy or --take-over of a memory generation without --no-memory or --duplicate-process: exit 64
	// ClassInternal is a failure to establish a fact (a daemon error other
	// than "not found"), not a refusal: exit 1.
	ClassInternal = exitcode.ClassInternal
)

// Check results (the verdict's checks[].result).
const (
	ResultPass    = "pass"
	ResultFail    = "fail"
	ResultSkipped = "skipped" // not run: an earlier check failed
)

// CheckResult is one row of the verdict's "checks" array: the check's name
// (one of CheckNames), its result (ResultPass, ResultFail or ResultSkipped)
// and a detail for people naming what was compared (digests, pointers,
// host ids).
type CheckResult struct {
	Name   string `json:"name"`
	Result string `json:"result"`
	Detail string `json:"detail"`
}

// Verdict is the outcome of the resume decision (docs/design.md "Resume decision":
// the verdict JSON). Checks always holds all eleven checks in order. Class is
// empty when Accepted (and encodes as null); ExitCode is Class.Code(),
// or 0 when accepted. Refusals are the ingestion refusals of check 5, or
// the devcontainer.metadata label refusals of check 8 (pointers under
// /config/Labels/devcontainer.metadata), sorted by pointer; Drift compares the recorded and offered manifest cores
// whenever check 5 produced an offered core (see DiffCores). Both encode as
// [] when empty. SpecDrift is check 10's comparison of an offered spec
// with the recorded (or, for a `/1` ref, the built) one, runspec.Compare's
// result: "specDrift"?, present exactly when a spec was offered and both
// decoded ([] when nothing differs), every entry widening the recorded
// spec plus the allowed bind-mount sources ("allowed": true).
// Container, NotApplied, Pid and Materialize are filled by Resume
// (materialization, docs/design.md "Materialize") only and are omitted
// otherwise: "container"?, "notApplied"?, "pid"? (with --start),
// "materialize"? (a CheckResult). NotApplied holds JSON Pointers of what
// the incarnation does not carry as recorded: the edits made to its spec
// ("/process/terminal" when it was true, "/linux/namespaces/<i>/path" for
// each recorded namespace path removed) and, for a `/1` ref, pointers into
// the recorded core (its mounts, remoteUser and containerEnv values
// holding "${"); the two never collide (a core has no "process" or
// "linux" member).
//
// Run and Generation are set once the ref is verified (check 4 passed):
// "run"?, "generation"?. Fence is the token the ledger issued to the claim
// (Resume only, once claimed): "fence"?. TakenOver is the live holder a
// take-over fenced out (Resume only): "takenOver"? {"host", "namespace",
// "container", "fence"} — the record's fence when it was taken over; the
// claim check's detail says it was an operator's decision
// (docs/design.md "Resume decision").
type Verdict struct {
	Accepted bool
	Class    Class
	// Reason is the refusal's finer reason beside Class (Reason: a ledger
	// refusal's code such as "not-handed-off" or "purged"), "" when the
	// class says all: "reason"?.
	Reason   string
	ExitCode int
	Checks   []CheckResult
	Refusals []envmanifest.Refusal
	Drift    []DriftEntry
	// SpecDrift is check 10's comparison (nil when no spec was compared).
	SpecDrift  []runspec.SpecDrift
	Container  string
	NotApplied []string
	// Pid is the started task's process id (resume --start), 0 otherwise.
	Pid uint32
	// Materialize reports materialization after an accepted claim check
	// (resume without --check): name "materialize", result pass or fail,
	// and what was verified and created or why not. Nil under --check.
	Materialize *CheckResult
	// Run is the verified ref's run id ("" before check 4 passed).
	Run string
	// Generation is the verified ref's generation (0 before check 4
	// passed).
	Generation uint64
	// Fence is the claim's fence token (0 when nothing was claimed).
	Fence uint64
	// TakenOver is the live holder a take-over fenced out, nil otherwise.
	TakenOver *TakenOver
	// Copy is true when the claim check accepted, as a copy (Request.Copy),
	// a generation the ledger never recorded with this ref: "copy"? true.
	Copy bool
}

// TakenOver names the holder a take-over fenced out: the container that
// held the run live and the fence it held (the verdict's "takenOver").
type TakenOver struct {
	Host      string `json:"host"`
	Namespace string `json:"namespace"`
	Container string `json:"container"`
	Fence     uint64 `json:"fence"`
}

// verdictJSON is the wire shape of Verdict: class null when accepted,
// refusals and drift never null.
type verdictJSON struct {
	Accepted    bool                  `json:"accepted"`
	Class       *Class                `json:"class"`
	Reason      string                `json:"reason,omitempty"`
	ExitCode    int                   `json:"exitCode"`
	Checks      []CheckResult         `json:"checks"`
	Refusals    []envmanifest.Refusal `json:"refusals"`
	Drift       []DriftEntry          `json:"drift"`
	SpecDrift   *[]runspec.SpecDrift  `json:"specDrift,omitempty"`
	Container   string                `json:"container,omitempty"`
	NotApplied  []string              `json:"notApplied,omitempty"`
	Pid         uint32                `json:"pid,omitempty"`
	Materialize *CheckResult          `json:"materialize,omitempty"`
	Run         string                `json:"run,omitempty"`
	Generation  uint64                `json:"generation,omitempty"`
	Fence       uint64                `json:"fence,omitempty"`
	TakenOver   *TakenOver            `json:"takenOver,omitempty"`
	Copy        bool                  `json:"copy,omitempty"`
}

// MarshalJSON encodes the verdict as docs/design.md's object:
// {"accepted", "class"|null, "reason"?, "exitCode", "checks", "refusals", "drift",
// "specDrift"?, "container"?, "notApplied"?, "pid"?, "materialize"?, "run"?,
// "generation"?, "fence"?, "takenOver"?, "copy"?}.
func (v *Verdict) MarshalJSON() ([]byte, error) {
	w := verdictJSON{
		Accepted:    v.Accepted,
		Reason:      v.Reason,
		ExitCode:    v.ExitCode,
		Checks:      v.Checks,
		Refusals:    v.Refusals,
		Drift:       v.Drift,
		Container:   v.Container,
		NotApplied:  v.NotApplied,
		Pid:         v.Pid,
		Materialize: v.Materialize,
		Run:         v.Run,
		Generation:  v.Generation,
		Fence:       v.Fence,
		TakenOver:   v.TakenOver,
		Copy:        v.Copy,
	}
	if v.Class != "" {
		c := v.Class
		w.Class = &c
	}
	if w.Checks == nil {
		w.Checks = []CheckResult{}
	}
	if w.Refusals == nil {
		w.Refusals = []envmanifest.Refusal{}
	}
	if w.Drift == nil {
		w.Drift = []DriftEntry{}
	}
	if v.SpecDrift != nil {
		sd := v.SpecDrift
		w.SpecDrift = &sd
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes the object MarshalJSON writes (for callers that read
// verdicts back, such as tests and the runtime's Go client).
func (v *Verdict) UnmarshalJSON(data []byte) error {
	var w verdictJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*v = Verdict{
		Accepted:    w.Accepted,
		Reason:      w.Reason,
		ExitCode:    w.ExitCode,
		Checks:      w.Checks,
		Refusals:    w.Refusals,
		Drift:       w.Drift,
		Container:   w.Container,
		NotApplied:  w.NotApplied,
		Pid:         w.Pid,
		Materialize: w.Materialize,
		Run:         w.Run,
		Generation:  w.Generation,
		Fence:       w.Fence,
		TakenOver:   w.TakenOver,
		Copy:        w.Copy,
	}
	if w.Class != nil {
		v.Class = *w.Class
	}
	if w.SpecDrift != nil {
		v.SpecDrift = *w.SpecDrift
		if v.SpecDrift == nil {
			v.SpecDrift = []runspec.SpecDrift{}
		}
	}
	return nil
}

// Check returns the result of the named check, or nil when name is not one
// of CheckNames.
func (v *Verdict) Check(name string) *CheckResult {
	for i := range v.Checks {
		if v.Checks[i].Name == name {
			return &v.Checks[i]
		}
	}
	return nil
}

// Failed returns the check that decided a refusal (one of Checks, or
// Materialize when materialization failed), or nil when the verdict is
// accepted.
func (v *Verdict) Failed() *CheckResult {
	for i := range v.Checks {
		if v.Checks[i].Result == ResultFail {
			return &v.Checks[i]
		}
	}
	if v.Materialize != nil && v.Materialize.Result == ResultFail {
		return v.Materialize
	}
	return nil
}

// CheckError is a failed check as an error: the check's name (one of
// CheckNames), the verdict class it fails with, and the cause. VerifyRef
// returns it; its Class decides the exit code (Class.Code).
type CheckError struct {
	Check string
	Class Class
	Err   error
}

// Error renders "<check>: <class>: <cause>".
func (e *CheckError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Check, e.Class, e.Err)
}

// Unwrap returns the cause (an *envmanifest.RefusedError, a wrapped
// envelope.ErrSignature or snapshot.ErrTampered, an errdefs class, …).
func (e *CheckError) Unwrap() error { return e.Err }

var _ error = (*CheckError)(nil)

// checkError returns err's *CheckError, or nil.
func checkError(err error) *CheckError {
	var ce *CheckError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}
