//go:build faultpoint

package faultpoint

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Enabled reports whether this binary was built with the tag faultpoint,
// that is whether Reach can hold it.
const Enabled = true

// stderr and hold are what Reach writes to and how it holds (variables
// for this package's tests). hold returns after Sleep, or at once when a
// SIGCONT arrives on cont.
var (
	stderr io.Writer = os.Stderr
	hold             = func(cont <-chan os.Signal) {
		t := time.NewTimer(Sleep)
		defer t.Stop()
		select {
		case <-t.C:
		case <-cont:
		}
	}
)

// Reach is called after step is done. When Env holds exactly step, it
// writes the line Line(step, pid) to stderr and holds for Sleep before
// returning — or until the process receives SIGCONT, so that a test that
// stopped it there (SIGSTOP) and continues it sees it go on at once;
// otherwise it returns at once. It never fails.
func Reach(step string) {
	if os.Getenv(Env) != step {
		return
	}
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	fmt.Fprintln(stderr, Line(step, os.Getpid()))
	hold(cont)
}
