// Package hosttest is the one conformance suite of the container-host seam
// (docs/design.md "Layout"): host/memhost passes it in a unit test and
// runtime/containerd in an integration test against a real daemon, so
// both behave alike. Run drives an implementation through its parts:
// RunFacts (what the resume decision reads), RunMaterialize (what resume
// creates, starts and deletes), RunCapture (what suspend inspects,
// pauses, diffs and labels) and RunStore (what migrate reads, writes,
// leases, names and archives). The end-to-end suspend checks over a host
// are suspend/suspendtest's.
package hosttest

import (
	"context"
	"testing"
	"time"
)

// Fixtures makes the fresh fixtures of each part of the suite: each is
// called once per subtest.
type Fixtures struct {
	Facts       NewFacts
	Materialize NewMaterialize
	Capture     func(t *testing.T) CaptureFixture
}

// Run runs every part of the suite.
func Run(t *testing.T, f Fixtures) {
	t.Run("Facts", func(t *testing.T) { RunFacts(t, f.Facts) })
	t.Run("Materialize", func(t *testing.T) { RunMaterialize(t, f.Materialize) })
	t.Run("Capture", func(t *testing.T) { RunCapture(t, f.Capture) })
	t.Run("Store", func(t *testing.T) { RunStore(t, f.Facts) })
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}
