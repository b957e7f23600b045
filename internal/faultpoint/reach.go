//go:build faultpoint

package faultpoint

import (
	"fmt"
	"io"
	"os"
	"time"
)

// Enabled reports whether this binary was built with the tag faultpoint,
// that is whether Reach can hold it.
const Enabled = true

// stderr and hold are what Reach writes to and how it holds (variables
// for this package's tests).
var (
	stderr io.Writer = os.Stderr
	hold             = func() { time.Sleep(Sleep) }
)

// Reach is called after step is done. When Env holds exactly step, it
// writes the line Line(step, pid) to stderr and sleeps for Sleep before
// returning; otherwise it returns at once. It never fails.
func Reach(step string) {
	if os.Getenv(Env) != step {
		return
	}
	fmt.Fprintln(stderr, Line(step, os.Getpid()))
	hold()
}
