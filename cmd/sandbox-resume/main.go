// Command sandbox-resume decides whether a suspended durable run may resume.
// See the README and docs/ for the commands and their exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// decisionHeapLimit bounds the Go memory of a process running without the
// garbage collector's proportional pacing (startupGC): below it nothing is
// collected, past it the collector runs as the limit requires
// (runtime/debug.SetMemoryLimit).
const decisionHeapLimit = 64 << 20

// endStartup, when not nil, is called by every command (app.command) as
// it starts, with whether the command only decides and exits (`resume
// --check`). main sets it from startupGC; tests that run commands in
// their own process leave it nil, and their collector keeps its settings.
var endStartup func(decision bool)

// startupGC turns the garbage collector's proportional pacing off for the
// start of the process (flag parsing, loading the command's inputs) and
// returns the function that ends that phase: a command that only decides
// and exits keeps the setting, any other command gets the collector's
// settings back as they were.
//
// Package initialization (the containerd, etcd and gRPC clients) leaves
// ≈ 3 MiB of heap, a decision adds 1–2 MiB, so the default pacing's first
// collection, at 4 MiB, came in nearly every `resume --check` and cost it
// ≈ 2.5–4 ms of CPU and ≈ 250 page faults (docs/dev/perf-cpu.md) for
// memory the process never reuses. Without pacing and with a limit of
// decisionHeapLimit, nothing is collected below 64 MiB and the collector
// still bounds a heap that grows past it. A GOGC or GOMEMLIMIT in the
// environment is the user's choice: then nothing changes.
func startupGC() func(decision bool) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func(bool) {}
	}
	limit := debug.SetMemoryLimit(decisionHeapLimit)
	percent := debug.SetGCPercent(-1)
	return func(decision bool) {
		if !decision {
			debug.SetGCPercent(percent)
			debug.SetMemoryLimit(limit)
		}
	}
}

func main() {
	endStartup = startupGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
