package main

import (
	"runtime/debug"
	"testing"
)

// TestStartupGC: the start of a process runs without proportional pacing
// under decisionHeapLimit; a decision keeps that, any other command gets
// the collector's settings back; GOGC in the environment disables it all.
func TestStartupGC(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	percent := debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })

	end := startupGC()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("during startup GC percent %d, want -1 (off)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != decisionHeapLimit {
		t.Fatalf("during startup memory limit %d, want %d", got, decisionHeapLimit)
	}
	end(false)
	if got := debug.SetGCPercent(percent); got != percent {
		t.Fatalf("after a command started GC percent %d, want %d back", got, percent)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Fatalf("after a command started memory limit %d, want %d back", got, limit)
	}

	startupGC()(true)
	if got := debug.SetGCPercent(percent); got != -1 {
		t.Fatalf("a decision: GC percent %d, want -1 kept", got)
	}
	debug.SetMemoryLimit(limit)

	t.Setenv("GOGC", "200")
	startupGC()
	if got := debug.SetGCPercent(percent); got != percent {
		t.Fatalf("with GOGC set: GC percent %d, want %d untouched", got, percent)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Fatalf("with GOGC set: memory limit %d, want %d untouched", got, limit)
	}
}

// TestIsDecision: only `resume --check` is a decision.
func TestIsDecision(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"resume", "--check"}, true},
		{[]string{"resume"}, false},
		{[]string{"verify"}, false},
	} {
		root := newRootCmd(newApp(nil, nil, nil)) // flags parsed afresh
		cmd, rest, err := root.Find(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatal(err)
		}
		if got := isDecision(cmd); got != tc.want {
			t.Errorf("%v: isDecision %t, want %t", tc.args, got, tc.want)
		}
	}
}
