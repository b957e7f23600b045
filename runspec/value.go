package runspec

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// specKind is the JSON type of a specValue.
type specKind uint8

const (
	specNull specKind = iota
	specBool
	specNumber
	specString
	specObject
	specArray
)

func (k specKind) String() string {
	return [...]string{"null", "boolean", "number", "string", "object", "array"}[k]
}

// specValue is one decoded value of a runtime spec. str holds a string's
// text, or a number's integer in canonical decimal form; raw is the
// value's JSON text as written.
type specValue struct {
	kind    specKind
	ptr     string
	raw     []byte
	str     string
	b       bool
	names   []string
	members map[string]*specValue
	elems   []*specValue
}

// get returns member name of an object value, or nil.
func (v *specValue) get(name string) *specValue {
	if v == nil || v.kind != specObject {
		return nil
	}
	return v.members[name]
}

// empty reports an absent value, null, {} or []: the values docs/design.md
// (check 10) makes equal to each other.
func (v *specValue) empty() bool {
	if v == nil {
		return true
	}
	switch v.kind {
	case specNull:
		return true
	case specObject:
		return len(v.names) == 0
	case specArray:
		return len(v.elems) == 0
	}
	return false
}

// list returns an array value's elements (none for an absent or empty one).
func (v *specValue) list() []*specValue {
	if v == nil || v.kind != specArray {
		return nil
	}
	return v.elems
}

// text returns a string value's text, "" for anything else.
func (v *specValue) text() string {
	if v == nil || v.kind != specString {
		return ""
	}
	return v.str
}

// decodeSpec reads one runtime spec: the strict decoder's structure rules
// (its I-JSON number rule is replaced by exact integers), then the table's
// types and required members. It is the only use of the strict decoder in
// this file.
func decodeSpec(side string, data []byte) (*specValue, *Error) {
	root, errs := strictjson.Decode(data, false)
	for _, e := range errs {
		if e.Kind == strictjson.Number {
			continue // numbers are read exactly below
		}
		return nil, &Error{Side: side, Pointer: e.Pointer, Kind: string(e.Kind), Message: e.Text()}
	}
	if root == nil {
		return nil, &Error{Side: side, Kind: string(strictjson.Syntax), Message: "does not decode"}
	}
	v, serr := fromNode(side, root)
	if serr != nil {
		return nil, serr
	}
	if serr := typeCheck(side, specRuleTree, v); serr != nil {
		return nil, serr
	}
	return v, nil
}

// Integer bounds of the table's number types.
var (
	minInt64  = big.NewInt(-1 << 63)
	maxUint64 = new(big.Int).SetUint64(1<<64 - 1)
	intRanges = map[string][2]*big.Int{
		"int32":  {big.NewInt(-1 << 31), big.NewInt(1<<31 - 1)},
		"int64":  {minInt64, big.NewInt(1<<63 - 1)},
		"uint16": {big.NewInt(0), big.NewInt(1<<16 - 1)},
		"uint32": {big.NewInt(0), big.NewInt(1<<32 - 1)},
		"uint64": {big.NewInt(0), maxUint64},
	}
)

func fromNode(side string, n *strictjson.Node) (*specValue, *Error) {
	v := &specValue{ptr: n.Pointer, raw: n.Raw}
	switch n.Kind {
	case strictjson.KindNull:
		v.kind = specNull
	case strictjson.KindBool:
		v.kind, v.b = specBool, n.Bool
	case strictjson.KindString:
		v.kind, v.str = specString, n.Str
	case strictjson.KindNumber:
		v.kind = specNumber
		i, ok := parseInteger(string(n.Raw))
		if !ok {
			return nil, &Error{Side: side, Pointer: n.Pointer, Kind: "number",
				Message: fmt.Sprintf("%s is not an integer in plain JSON integer syntax (runtime spec numbers are Go integers)", n.Raw)}
		}
		if i.Cmp(minInt64) < 0 || i.Cmp(maxUint64) > 0 {
			return nil, &Error{Side: side, Pointer: n.Pointer, Kind: "number",
				Message: fmt.Sprintf("%s fits neither int64 nor uint64", n.Raw)}
		}
		v.str = i.String()
	case strictjson.KindObject:
		v.kind = specObject
		v.members = make(map[string]*specValue, len(n.Members))
		for _, m := range n.Members {
			c, serr := fromNode(side, m.Value)
			if serr != nil {
				return nil, serr
			}
			v.names = append(v.names, m.Name)
			v.members[m.Name] = c
		}
	case strictjson.KindArray:
		v.kind = specArray
		for _, e := range n.Elems {
			c, serr := fromNode(side, e)
			if serr != nil {
				return nil, serr
			}
			v.elems = append(v.elems, c)
		}
	}
	return v, nil
}

// parseInteger reads a JSON number token written as -?(0|[1-9][0-9]*).
func parseInteger(tok string) (*big.Int, bool) {
	digits := strings.TrimPrefix(tok, "-")
	if digits == "" {
		return nil, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return nil, false
		}
	}
	return new(big.Int).SetString(tok, 10)
}

// typeCheck checks v against the table's types and required members.
func typeCheck(side string, n *ruleNode, v *specValue) *Error {
	if v == nil || v.kind == specNull || n.typ == "any" {
		return nil
	}
	bad := func(want string) *Error {
		return &Error{Side: side, Pointer: v.ptr, Kind: "type",
			Message: fmt.Sprintf("must be %s, not %s", want, v.kind)}
	}
	switch n.typ {
	case "object":
		if v.kind != specObject {
			return bad("an object")
		}
		for _, name := range v.names {
			if serr := typeCheck(side, n.child(name), v.members[name]); serr != nil {
				return serr
			}
		}
		for name, c := range n.children {
			if m := v.members[name]; c.required && (m == nil || m.kind == specNull) {
				return &Error{Side: side, Pointer: strictjson.Pointer(v.ptr, name), Kind: "missing",
					Message: "required member is missing"}
			}
		}
	case "array":
		if v.kind != specArray {
			return bad("an array")
		}
		for _, e := range v.elems {
			if serr := typeCheck(side, n.child("*"), e); serr != nil {
				return serr
			}
		}
	case "string":
		if v.kind != specString {
			return bad("a string")
		}
	case "boolean":
		if v.kind != specBool {
			return bad("a boolean")
		}
	default:
		rng, ok := intRanges[n.typ]
		if !ok {
			panic("runspec: unknown type " + n.typ)
		}
		if v.kind != specNumber {
			return bad("an integer (" + n.typ + ")")
		}
		i, _ := new(big.Int).SetString(v.str, 10)
		if i.Cmp(rng[0]) < 0 || i.Cmp(rng[1]) > 0 {
			return &Error{Side: side, Pointer: v.ptr, Kind: "number",
				Message: fmt.Sprintf("%s is out of range for %s", v.raw, n.typ)}
		}
	}
	return nil
}
