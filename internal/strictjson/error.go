package strictjson

import (
	"fmt"
	"strconv"
)

// ErrorKind says what rule of the decoder a problem breaks. The strings
// are stable; callers map them to their own classes.
type ErrorKind string

// The kinds of problems Decode reports.
const (
	// Syntax: the text is not JSON (or JSONC), is empty, or its top level
	// is not an object. Always fatal.
	Syntax ErrorKind = "syntax"
	// Encoding: invalid raw UTF-8 (fatal), or a lone-surrogate escape or a
	// Unicode noncharacter in a name or string value.
	Encoding ErrorKind = "encoding"
	// Limit: more than MaxInputBytes, or nesting deeper than MaxDepth.
	// Always fatal.
	Limit ErrorKind = "limit"
	// Number: a number outside I-JSON (RFC 7493 §2.2).
	Number ErrorKind = "number"
	// DuplicateKey: a member name repeated in one object.
	DuplicateKey ErrorKind = "duplicate-key"
)

// Error is one problem Decode found. Pointer is the RFC 6901 JSON Pointer
// of the value concerned ("" for the whole document, which is where every
// fatal problem is). Line and Column (1-based, Column in bytes) place a
// fatal problem in the input; they are 0 when it has no place (an input
// over the size limit). Message says what is wrong, for people, without
// the position.
type Error struct {
	Kind    ErrorKind
	Pointer string
	Line    int
	Column  int
	Message string
}

var _ error = (*Error)(nil)

// Error renders "<line>:<column>: <message>" for a placed problem, else
// "<pointer>: <message>" with the root pointer shown as `""`.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Message)
	}
	p := e.Pointer
	if p == "" {
		p = `""`
	}
	return p + ": " + e.Message
}

// Text is the message with the position in front when there is one:
// "<line>:<column>: <message>", else the message alone.
func (e *Error) Text() string {
	if e.Line > 0 {
		return strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column) + ": " + e.Message
	}
	return e.Message
}
