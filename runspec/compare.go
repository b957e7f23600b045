package runspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// SpecDrift is one member of an offered OCI runtime spec that differs from
// the recorded one (docs/design.md "Spec validation"): the
// verdict's "specDrift" entries, in the shape of DriftEntry.
//
// Pointer is an RFC 6901 JSON Pointer into the recorded spec when the
// member exists there (a null member exists), else into the offered spec.
// OfferedPointer is set only when the member exists on both sides at
// different places (an rlimit, device or namespace paired by its key at
// another index, or a set element). Recorded and Offered are the member's
// JSON values, compact, numbers exactly as written; an absent side is
// omitted. Allowed is true for a difference the rules allow and list (a
// bind mount's source); every other entry widens or may widen the
// recorded spec, and one such entry refuses the resume (Refused).
type SpecDrift struct {
	Pointer        string          `json:"pointer"`
	OfferedPointer string          `json:"offeredPointer,omitempty"`
	Recorded       json.RawMessage `json:"recorded,omitempty"`
	Offered        json.RawMessage `json:"offered,omitempty"`
	Allowed        bool            `json:"allowed,omitempty"`
}

// Refused reports whether any entry of d is not Allowed: whether
// check 10 fails with class "spec-drift" (docs/design.md "Resume
// decision").
func Refused(d []SpecDrift) bool {
	for _, e := range d {
		if !e.Allowed {
			return true
		}
	}
	return false
}

// The sides of a spec comparison, as Error.Side names them.
const (
	SideRecorded = "recorded"
	SideOffered  = "offered"
)

// ErrInvalid is wrapped by every *Error: a runtime spec that does
// not decode under docs/design.md "Spec validation". An offered
// spec that does not decode is refused input (class "bad-input", exit 2);
// a recorded one is "snapshot-missing" (exit 7).
var ErrInvalid = errors.New("runtime spec does not decode")

// Error is a runtime spec that is not JSON under the strict decoder's
// structure rules, or not an OCI runtime spec (config.md): a member of the
// wrong JSON type, a number that is not an integer of its member's range,
// a missing "ociVersion".
//
// Side is SideRecorded or SideOffered. Pointer is the RFC 6901 JSON
// Pointer of the offending value ("" for the whole document: syntax,
// encoding and size problems, whose Message carries line:column). Kind is
// one of "syntax", "encoding", "limit", "duplicate-key" (the strict
// decoder's), "number", "type" or "missing".
type Error struct {
	Side    string
	Pointer string
	Kind    string
	Message string
}

var _ error = (*Error)(nil)

// Error renders `<side> spec: <pointer>: <kind>: <message>`, the root
// pointer shown as `""`.
func (e *Error) Error() string {
	p := e.Pointer
	if p == "" {
		p = `""`
	}
	return fmt.Sprintf("%s spec: %s: %s: %s", e.Side, p, e.Kind, e.Message)
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// Options carries what check 10 needs beyond the two specs.
type Options struct {
	// ContainerEnv is the recorded manifest core's containerEnv. Every
	// entry whose value holds no "${" must be in the offered
	// process.env as NAME=value, and no other NAME= entry may be there
	// (docs/design.md: process.env may differ, but …). nil: no
	// requirement.
	ContainerEnv map[string]string
	// Reserved is the recorded reserved-environment policy (the ref's
	// policy): an offered process.env may differ only in names it does not
	// reserve (compared case-insensitively, as ingestion does); an entry
	// of a reserved name on one side only is drift, reported at its index.
	Reserved []string
	// HostNamespace reports whether path may name the namespace of type
	// nsType (an OCI type: "pid", "network", "mount", …) of this host's
	// pid 1, that is whether it has the device and inode of
	// /proc/1/ns/<name>; it should answer true when it cannot tell (fail
	// closed). HostPID1Namespace is the real one. nil treats every offered
	// namespace path as the host's: any offered path is then drift.
	HostNamespace func(nsType, path string) bool
	// BindSource checks, on this host, an offered bind mount source that
	// differs from the recorded one and passed the lexical rule (absolute,
	// not "/", not under /proc, /sys, /dev, /run, /var/run or /boot); an
	// error makes the difference drift. CheckBindSource is the real one
	// (no symlinks, not a socket or device). nil applies the lexical rule
	// only.
	BindSource func(path string) error
}

// Compare is check 10 (docs/design.md "Spec validation"):
// it decodes the recorded and the offered OCI runtime spec and compares
// them member by member as parsed values (never through JCS), driven by
// the rule table Rules returns.
//
// Both specs are read with the strict decoder's structure rules
// (duplicate names, UTF-8, noncharacters, 1 MiB, depth 64) but with exact
// numbers: every number must be an integer in plain JSON integer syntax
// that fits int64 or uint64 (and its member's Go type in
// opencontainers/runtime-spec specs-go), and numbers compare as integers
// (18446744073709551615 equals itself; 9007199254740993 differs from
// 9007199254740992). A spec that does not decode, is not a JSON object, has
// a known member of the wrong type or lacks "ociVersion" returns a
// *Error (wrapping ErrInvalid) naming its side and pointer, and no
// drift.
//
// Otherwise the result lists every member that must be equal and is not,
// and the allowed differences (bind mount sources, Allowed true), sorted
// by Pointer in UTF-8 byte order (entries pointing into the recorded spec
// first at equal pointers, then by OfferedPointer); it is empty (non-nil)
// when nothing differs that the rules report. The resume is refused when
// Refused(result).
func Compare(recorded, offered []byte, opts Options) ([]SpecDrift, error) {
	r, serr := decodeSpec(SideRecorded, recorded)
	if serr != nil {
		return nil, serr
	}
	o, serr := decodeSpec(SideOffered, offered)
	if serr != nil {
		return nil, serr
	}
	c := &specComparer{opts: opts}
	c.compare(specRuleTree, r, o, nil, nil)
	c.requiredEnv(r.get("process").get("env"), o.get("process").get("env"))
	c.reservedEnv(r.get("process").get("env"), o.get("process").get("env"))

	sort.SliceStable(c.out, func(a, b int) bool {
		ea, eb := c.out[a], c.out[b]
		if ea.e.Pointer != eb.e.Pointer {
			return ea.e.Pointer < eb.e.Pointer
		}
		if ea.offeredSide != eb.offeredSide {
			return !ea.offeredSide
		}
		return ea.e.OfferedPointer < eb.e.OfferedPointer
	})
	out := make([]SpecDrift, len(c.out))
	for i, s := range c.out {
		out[i] = s.e
	}
	return out, nil
}

// Validate decodes one runtime spec as Compare reads each side (the strict
// decoder's structure rules, exact integers, the table's types and
// required members) and returns the *Error naming side and pointer, or nil.
// side is SideRecorded or SideOffered.
func Validate(side string, spec []byte) error {
	if _, serr := decodeSpec(side, spec); serr != nil {
		return serr
	}
	return nil
}
