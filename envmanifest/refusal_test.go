package envmanifest

import "testing"

// TestRefusedErrorText: the first line counts the refusals in words ("3
// refusals"), never as "refused (3)", which reads like an exit code.
func TestRefusedErrorText(t *testing.T) {
	one := Refusal{Pointer: "/runArgs", Class: ClassExecutesOrWidens, Message: "runArgs is refused"}
	root := Refusal{Pointer: "", Class: ClassSyntax, Message: "1:1: unexpected end of input"}
	for _, c := range []struct {
		err  *RefusedError
		want string
	}{
		{&RefusedError{Source: "a.json", Refusals: []Refusal{one}},
			"a.json: 1 refusal\n  /runArgs: executes-or-widens: runArgs is refused"},
		{&RefusedError{Refusals: []Refusal{root, one, one}},
			"input: 3 refusals\n  \"\": syntax: 1:1: unexpected end of input\n  /runArgs: executes-or-widens: runArgs is refused\n  /runArgs: executes-or-widens: runArgs is refused"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() =\n%s\nwant\n%s", got, c.want)
		}
	}
}
