package strictjson

import (
	"fmt"
	"strings"
	"testing"
)

// pc is an expected problem: pointer and kind (messages are free text).
type pc struct {
	ptr  string
	kind ErrorKind
}

func problemKeys(rs []*Error) []pc {
	out := make([]pc, len(rs))
	for i, r := range rs {
		out[i] = pc{r.Pointer, r.Kind}
	}
	return out
}

func samePCs(got []*Error, want []pc) bool {
	g := problemKeys(got)
	if len(g) != len(want) {
		return false
	}
	for i := range g {
		if g[i] != want[i] {
			return false
		}
	}
	return true
}

func nest(depth int) string {
	// depth levels of objects, the top level being depth 1
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

// TestDecodeRules covers docs/design.md "Ingestion" rows handled by the
// decoder; expectations are written from the table, not from the code.
func TestDecodeRules(t *testing.T) {
	bom := "\ufeff"
	tests := []struct {
		name  string
		in    string
		jsonc bool
		fatal bool // nil root, one refusal at ""
		want  []pc // refusals in document order
	}{
		{"plain object", `{"a":1}`, true, false, nil},
		{"one BOM stripped", bom + `{"a":1}`, true, false, nil},
		{"second BOM is syntax", bom + bom + `{"a":1}`, true, true, []pc{{"", Syntax}}},
		{"BOM in strict JSON is syntax", bom + `{}`, false, true, []pc{{"", Syntax}}},
		{"empty input", ``, true, true, []pc{{"", Syntax}}},
		{"whitespace only", " \n\t", true, true, []pc{{"", Syntax}}},
		{"comment only", "// nothing\n", true, true, []pc{{"", Syntax}}},
		{"array top level", `[1]`, true, true, []pc{{"", Syntax}}},
		{"string top level", `"x"`, true, true, []pc{{"", Syntax}}},
		{"number top level", `42`, false, true, []pc{{"", Syntax}}},
		{"syntax error", `{"a" 1}`, true, true, []pc{{"", Syntax}}},
		{"unclosed", `{"a":1`, true, true, []pc{{"", Syntax}}},
		{"trailing data", `{"a":1} x`, true, true, []pc{{"", Syntax}}},
		{"line comment", "{\"a\":1 // c\n}", true, false, nil},
		{"block comment", `{/* c */"a":1}`, true, false, nil},
		{"line comment at EOF without newline", `{"a":1} // c`, true, false, nil},
		{"comment in strict JSON", `{/* c */"a":1}`, false, true, []pc{{"", Syntax}}},
		{"trailing comma object", `{"a":1,}`, true, false, nil},
		{"trailing comma array", `{"a":[1,2,]}`, true, false, nil},
		{"trailing comma strict", `{"a":1,}`, false, true, []pc{{"", Syntax}}},
		{"leading comma", `{,"a":1}`, true, true, []pc{{"", Syntax}}},
		{"doubled comma", `{"a":1,,}`, true, true, []pc{{"", Syntax}}},
		{"lone comma object", `{,}`, true, true, []pc{{"", Syntax}}},
		{"lone comma array", `{"a":[,]}`, true, true, []pc{{"", Syntax}}},
		{"invalid raw UTF-8", "{\"a\":\"\xff\"}", true, true, []pc{{"", Encoding}}},
		{"invalid raw UTF-8 in a comment", "{\"a\":1} // \xc3\n", true, true, []pc{{"", Encoding}}},
		{"depth 64 allowed", nest(64), true, false, nil},
		{"depth 65 refused", nest(65), true, true, []pc{{"", Limit}}},
		{"depth 65 with a comment", "//\n" + nest(65), true, true, []pc{{"", Limit}}},
		{"depth 65 in arrays", `{"a":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, false, true, []pc{{"", Limit}}},
		{"brackets inside strings do not count", "//\n{\"a\":\"" + strings.Repeat("[", 100) + "\"}", true, false, nil},
		{"size limit exceeded", `{"a":"` + strings.Repeat("x", MaxInputBytes) + `"}`, true, true, []pc{{"", Limit}}},
		{"size limit exact", `{"a":"` + strings.Repeat("x", MaxInputBytes-8) + `"}`, true, false, nil},
		{"duplicate key", `{"a":1,"b":2,"a":3}`, true, false, []pc{{"/a", DuplicateKey}}},
		{"duplicate key three times, one refusal", `{"a":1,"a":2,"a":3}`, true, false, []pc{{"/a", DuplicateKey}}},
		{"duplicate after unescaping", `{"a":1,"\u0061":2}`, true, false, []pc{{"/a", DuplicateKey}}},
		{"duplicate nested", `{"x":{"y":[{"k":1,"k":2}]}}`, true, false, []pc{{"/x/y/0/k", DuplicateKey}}},
		{"duplicate key with slash", `{"a/b":1,"a/b":2}`, true, false, []pc{{"/a~1b", DuplicateKey}}},
		{"noncharacter escape in value", `{"a":"\uffff"}`, true, false, []pc{{"/a", Encoding}}},
		{"noncharacter raw in value", "{\"a\":\"\ufdd0\"}", true, false, []pc{{"/a", Encoding}}},
		{"noncharacter U+10FFFF pair", `{"a":["\udbff\udfff"]}`, true, false, []pc{{"/a/0", Encoding}}},
		{"noncharacter in key", `{"o":{"\ufffe":1}}`, true, false, []pc{{"/o", Encoding}}},
		{"noncharacter in comment is fine", "{\"a\":1} // \uffff\n", true, false, nil},
		{"lone high surrogate", `{"a":"\ud800"}`, true, false, []pc{{"/a", Encoding}}},
		{"lone low surrogate", `{"a":"x\udc00y"}`, true, false, []pc{{"/a", Encoding}}},
		{"reversed surrogates", `{"a":"\udc00\ud800"}`, true, false, []pc{{"/a", Encoding}}},
		{"lone surrogate in key", `{"\ud800":1}`, true, false, []pc{{"", Encoding}}},
		{"valid surrogate pair", `{"a":"\ud83d\ude00"}`, true, false, nil},
		{"U+FFFD is fine", `{"a":"\ufffd"}`, true, false, nil},
		{"2^53-1", `{"n":9007199254740991}`, true, false, nil},
		{"-(2^53-1)", `{"n":-9007199254740991}`, true, false, nil},
		{"2^53", `{"n":9007199254740992}`, true, false, []pc{{"/n", Number}}},
		{"2^53+1", `{"n":9007199254740993}`, true, false, []pc{{"/n", Number}}},
		{"-2^53-1", `{"n":-9007199254740993}`, true, false, []pc{{"/n", Number}}},
		{"1e20 is whole", `{"n":1e20}`, true, false, []pc{{"/n", Number}}},
		{"1e15 is fine", `{"n":1e15}`, true, false, nil},
		{"excess digits", `{"n":333333333.33333329}`, true, false, []pc{{"/n", Number}}},
		{"long fraction", `{"n":0.1` + strings.Repeat("0", 40) + `1}`, true, false, []pc{{"/n", Number}}},
		{"trailing zeros name the same decimal", `{"n":1.50000}`, true, false, nil},
		{"exponent forms", `{"n":[1E+2,100e-2,0.0e10,1e-7,0.30000000000000004]}`, true, false, nil},
		{"underflow", `{"n":1e-400}`, true, false, []pc{{"/n", Number}}},
		{"underflow to subnormal rounding", `{"n":2e-324}`, true, false, []pc{{"/n", Number}}},
		{"overflow", `{"n":[1,1e400]}`, true, false, []pc{{"/n/1", Number}}},
		{"huge exponent overflow", `{"n":1e99999999999999999999}`, true, false, []pc{{"/n", Number}}},
		{"zero with huge exponent", `{"n":0e99999999999999999999}`, true, false, nil},
		{"-0 accepted", `{"n":-0,"m":-0.0}`, true, false, nil},
		{"min subnormal", `{"n":5e-324}`, true, false, nil},
		{"several refusals in order", `{"b":"\uffff","a":1e400,"b":1}`, true, false, []pc{{"/b", Encoding}, {"/a", Number}, {"/b", DuplicateKey}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, rs := Decode([]byte(tt.in), tt.jsonc)
			if tt.fatal {
				if root != nil {
					t.Fatalf("root = %v, want nil (fatal)", root)
				}
			} else if root == nil || root.Kind != KindObject {
				t.Fatalf("root = %v, want an object; refusals %v", root, rs)
			}
			if !samePCs(rs, tt.want) {
				t.Errorf("refusals = %v, want %v", rs, tt.want)
			}
			for _, r := range rs {
				if r.Message == "" {
					t.Errorf("refusal %v has no message", r)
				}
			}
		})
	}
}

// TestDecodeFatalLineColumn checks that fatal messages carry line:column.
func TestDecodeFatalLineColumn(t *testing.T) {
	tests := []struct{ in, prefix string }{
		{"{\n  \"a\": tru\n}", "2:"},
		{"{\n\"a\":\"\xff\"}", "2:6:"},
		{"\ufeff{\"a\" 1}", "1:9:"}, // the BOM counts as 3 bytes of column
		{"", "1:1:"},
	}
	for _, tt := range tests {
		_, rs := Decode([]byte(tt.in), true)
		if len(rs) != 1 || !strings.HasPrefix(rs[0].Text(), tt.prefix) {
			t.Errorf("Decode(%q) = %v, want one refusal whose message starts %q", tt.in, rs, tt.prefix)
		}
	}
}

// TestDecodeTree checks the Node shape: pointers, Raw text after
// stripping, source order, duplicates flagged, unescaped strings.
func TestDecodeTree(t *testing.T) {
	in := "{\n // c\n \"b\": [1, {\"x~y\": \"\\u00e9\"},], \"a\": true, \"a\": null, \"n\": 1.50,\n}"
	root, rs := Decode([]byte(in), true)
	if root == nil {
		t.Fatalf("refused: %v", rs)
	}
	if want := []pc{{"/a", DuplicateKey}}; !samePCs(rs, want) {
		t.Fatalf("refusals = %v, want %v", rs, want)
	}
	var names []string
	for _, m := range root.Members {
		names = append(names, fmt.Sprintf("%s:%v", m.Name, m.Duplicate))
	}
	if got, want := strings.Join(names, ","), "b:false,a:true,a:true,n:false"; got != want {
		t.Errorf("members = %s, want %s", got, want)
	}
	b := root.Get("b")
	if b.Kind != KindArray || len(b.Elems) != 2 || b.Pointer != "/b" {
		t.Fatalf("b = %+v", b)
	}
	if got := string(b.Raw); got != `[1, {"x~y": "\u00e9"} ]` {
		t.Errorf("b.Raw = %q", got)
	}
	s := b.Elems[1].Get("x~y")
	if s.Pointer != "/b/1/x~0y" || s.Str != "é" || string(s.Raw) != `"\u00e9"` {
		t.Errorf("string node = %+v", s)
	}
	if a := root.Get("a"); a.Kind != KindBool || !a.Bool {
		t.Errorf("Get returns the first member: %+v", a)
	}
	if n := root.Get("n"); n.Kind != KindNumber || string(n.Raw) != "1.50" {
		t.Errorf("n = %+v", n)
	}
	if root.Get("missing") != nil || (*Node)(nil).Get("a") != nil {
		t.Error("Get of a missing member is not nil")
	}
	if string(root.Raw[0]) != "{" || root.Raw[len(root.Raw)-1] != '}' {
		t.Errorf("root.Raw = %q", root.Raw)
	}
}

// TestDecodeDoesNotModifyInput guards against hujson's in-place Standardize.
func TestDecodeDoesNotModifyInput(t *testing.T) {
	in := []byte("{\"a\":1, // c\n}")
	orig := string(in)
	if root, rs := Decode(in, true); root == nil {
		t.Fatal(rs)
	}
	if string(in) != orig {
		t.Errorf("input modified: %q", in)
	}
}
