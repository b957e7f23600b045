//go:build faultpoint

package faultpoint

import (
	"bytes"
	"os"
	"testing"
)

// TestReach (run with -tags faultpoint, as `make test` does): the step
// named by Env writes Line and holds; any other step returns at once
// without writing.
func TestReach(t *testing.T) {
	if !Enabled {
		t.Fatal("built with the tag faultpoint, but Enabled is false")
	}
	var out bytes.Buffer
	held := 0
	stderr, hold = &out, func() { held++ }
	t.Cleanup(func() { stderr, hold = os.Stderr, nil })

	t.Setenv(Env, "held-step")
	Reach("a-step")
	if held != 0 || out.Len() != 0 {
		t.Fatalf("Reach of a step not named: held %d times, wrote %q", held, out.String())
	}
	Reach("held-step")
	if want := Line("held-step", os.Getpid()) + "\n"; held != 1 || out.String() != want {
		t.Fatalf("Reach of the named step: held %d times, wrote %q; want 1, %q", held, out.String(), want)
	}
	t.Setenv(Env, "")
	Reach("held-step")
	if held != 1 {
		t.Fatal("Reach held with Env unset")
	}
}
