package strictjson

import "strconv"

// Kind is the JSON type of a decoded Node.
type Kind uint8

// The kinds of JSON values (RFC 8259 §3).
const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindObject
	KindArray
)

// String names the kind as JSON does ("null", "boolean", "number",
// "string", "object", "array").
func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindObject:
		return "object"
	case KindArray:
		return "array"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Node is one decoded JSON value with its place in the input.
//
// Pointer is the RFC 6901 JSON Pointer of the value ("" for the root).
// Bool holds a KindBool value; Str the unescaped text of a KindString value.
// Raw is the value's JSON text after comment and trailing-comma stripping:
// valid RFC 8259 JSON, numbers exactly as written, so it can be fed to JCS
// to canonicalize a subtree. Raw aliases the decoder's working buffer and
// must not be modified. Members (KindObject) keeps source order with
// duplicate names kept and flagged; Elems holds a KindArray's elements.
type Node struct {
	Kind    Kind
	Bool    bool // beside Kind: no padding after either (112 bytes, not 120)
	Pointer string
	Str     string
	Raw     []byte
	Members []Member
	Elems   []*Node
}

// Member is one name/value pair of a JSON object. Duplicate is true on
// every occurrence of a name that appears more than once in its object
// (names compared after unescaping, as RFC 8785 §3.2.3 and RFC 7493 §2.3 do).
type Member struct {
	Name      string
	Value     *Node
	Duplicate bool
}

// Get returns the value of the first member named name, or nil when n is
// nil, not an object, or has no such member.
func (n *Node) Get(name string) *Node {
	if n == nil {
		return nil
	}
	for i := range n.Members {
		if n.Members[i].Name == name {
			return n.Members[i].Value
		}
	}
	return nil
}
