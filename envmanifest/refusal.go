package envmanifest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sandbox-resume/sandbox-resume/errdef"
)

// Class names the kind of a refusal. The strings are part of the CLI's JSON
// contract (docs/design.md "Refusal classes") and never change.
type Class string

// Refusal classes, exactly as docs/design.md "Refusal classes" spells them.
const (
	ClassSyntax           Class = "syntax"             // JSONC does not parse, empty input, non-object top level
	ClassEncoding         Class = "encoding"           // invalid UTF-8, lone surrogates, noncharacters
	ClassLimit            Class = "limit"              // size (1 MiB) or depth (64) exceeded
	ClassNumber           Class = "number"             // not I-JSON safe (RFC 7493 §2.2)
	ClassDuplicateKey     Class = "duplicate-key"      // a member name repeated in one object
	ClassExecutesOrWidens Class = "executes-or-widens" // lifecycle commands, build, privileges
	ClassChangesWhatRuns  Class = "changes-what-runs"  // alters what runs but is not identity in v1
	ClassUnknownProperty  Class = "unknown-property"   // not in the property class table
	ClassInvalidValue     Class = "invalid-value"      // wrong type or a value the rules refuse
	ClassMissing          Class = "missing"            // a required member is absent
	ClassConflict         Class = "conflict"           // two members describe one thing
	ClassLockfile         Class = "lockfile"           // devcontainer-lock.json problems
	ClassReservedEnv      Class = "reserved-env"       // containerEnv sets a reserved name
)

// Refusal is one reason a document was refused. Pointer is an RFC 6901 JSON
// Pointer into the input ("" is the whole document); Message is free text for
// people.
type Refusal struct {
	Pointer string `json:"pointer"`
	Class   Class  `json:"class"`
	Message string `json:"message"`
}

// String renders the refusal as `pointer: class: message`, with the root
// pointer shown as `""`.
func (r Refusal) String() string {
	p := r.Pointer
	if p == "" {
		p = `""`
	}
	return fmt.Sprintf("%s: %s: %s", p, r.Class, r.Message)
}

// RefusedError is returned when a document does not ingest. Refusals holds
// every refusal of the document, sorted by pointer in UTF-8 byte order
// (stable). Source names the input (a file path, or "-" for stdin).
type RefusedError struct {
	Source   string
	Refusals []Refusal
	// NotA, when set, names what the input was read as and is not at all
	// ("a signed manifest": it is not JSON, or it lacks the document
	// member); Error then says so before counting the refusals.
	NotA string
}

// Unwrap returns the class errdef.ErrRefused.
func (e *RefusedError) Unwrap() error { return errdef.ErrRefused }

// Error names the source and counts the refusals ("x.json: 3 refusals";
// "x.json is not a signed manifest: 1 refusal" when NotA is set), then
// lists every refusal, one per line.
func (e *RefusedError) Error() string {
	var b strings.Builder
	src := e.Source
	if src == "" {
		src = "input"
	}
	b.WriteString(src)
	if e.NotA != "" {
		b.WriteString(" is not ")
		b.WriteString(e.NotA)
	}
	if len(e.Refusals) == 1 {
		b.WriteString(": 1 refusal")
	} else {
		fmt.Fprintf(&b, ": %d refusals", len(e.Refusals))
	}
	for _, r := range e.Refusals {
		b.WriteString("\n  ")
		b.WriteString(r.String())
	}
	return b.String()
}

// SortRefusals sorts refusals by pointer in UTF-8 byte order, keeping the
// relative order of refusals at the same pointer (docs/design.md "Ingestion").
func SortRefusals(rs []Refusal) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Pointer < rs[j].Pointer })
}
