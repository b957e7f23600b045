package envmanifest

import (
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// pc is an expected refusal: pointer and class (messages are free text).
type pc struct {
	ptr   string
	class Class
}

func refusalKeys(rs []Refusal) []pc {
	out := make([]pc, len(rs))
	for i, r := range rs {
		out[i] = pc{r.Pointer, r.Class}
	}
	return out
}

func samePCs(got []Refusal, want []pc) bool {
	g := refusalKeys(got)
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

// TestDecodeRefusals checks the mapping of the strict decoder's problems to
// refusals (docs/design.md "Ingestion"): every kind is the class of the
// same name, at the problem's pointer, with line:column leading the
// message of a placed problem. The decoder's own rules are tested in
// internal/strictjson.
func TestDecodeRefusals(t *testing.T) {
	tests := []struct {
		in     string
		jsonc  bool
		want   []pc
		prefix string // of the first message
	}{
		{`{"a" 1}`, true, []pc{{"", ClassSyntax}}, "1:6: "},
		{"{\"a\":\"\xff\"}", true, []pc{{"", ClassEncoding}}, "1:7: invalid UTF-8"},
		{`{"a":"` + strings.Repeat("x", strictjson.MaxInputBytes) + `"}`, true, []pc{{"", ClassLimit}}, "input is "},
		{strings.Repeat("[", 70), true, []pc{{"", ClassLimit}}, "1:65: nesting deeper"},
		{`{"n":1e400,"a":1,"a":2,"s":"\ud800"}`, false, []pc{{"/n", ClassNumber}, {"/s", ClassEncoding}, {"/a", ClassDuplicateKey}}, "1e400 overflows"},
	}
	for _, tt := range tests {
		_, rs := decode([]byte(tt.in), tt.jsonc)
		if !samePCs(rs, tt.want) {
			t.Errorf("decode(%.40q) = %v, want %v", tt.in, rs, tt.want)
			continue
		}
		if !strings.HasPrefix(rs[0].Message, tt.prefix) {
			t.Errorf("decode(%.40q): message %q, want it to start %q", tt.in, rs[0].Message, tt.prefix)
		}
	}
	if rs := refusalsOf(nil); rs != nil {
		t.Errorf("refusalsOf(nil) = %v, want nil", rs)
	}
}
