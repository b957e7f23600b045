//go:build faultpoint

package faultpoint

import (
	"bytes"
	"os"
	"syscall"
	"testing"
	"time"
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
	realHold := hold
	stderr, hold = &out, func(<-chan os.Signal) { held++ }
	t.Cleanup(func() { stderr, hold = os.Stderr, realHold })

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

// TestReachSIGCONT: the hold ends at once when the process receives
// SIGCONT (a test that stopped it at the step with SIGSTOP continues it),
// long before Sleep.
func TestReachSIGCONT(t *testing.T) {
	var out bytes.Buffer
	stderr = &out
	t.Cleanup(func() { stderr = os.Stderr })
	t.Setenv(Env, "cont-step")
	done := make(chan struct{})
	go func() { defer close(done); Reach("cont-step") }()
	deadline := time.After(10 * time.Second)
	for {
		// Reach registers for SIGCONT before it writes its line; a
		// SIGCONT to a running process does nothing else.
		_ = syscall.Kill(os.Getpid(), syscall.SIGCONT)
		select {
		case <-done:
			return
		case <-deadline:
			t.Fatalf("Reach still holds 10 s after SIGCONT (Sleep is %s)", Sleep)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
