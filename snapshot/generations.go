package snapshot

import (
	"context"
)

// Progress receives the byte progress of a long operation (a rootfs diff
// while suspend waits for it): the same method set as migrate.Progress, so
// one implementation (the CLI's progress bar on a terminal's stderr) serves
// both. The library never prints. Implementations must be safe for
// concurrent use: a host may report from a goroutine of its own.
type Progress interface {
	// Phase starts a phase: what names it ("diff" while a layer is being
	// written), total is the number of bytes expected, or -1 when it is not
	// known.
	Phase(what string, total int64)
	// Add records n more bytes done in the current phase.
	Add(n int64)
}

// NoProgress is the Progress that reports nothing: what an operation
// given no Progress reports to.
type NoProgress struct{}

// Phase does nothing.
func (NoProgress) Phase(string, int64) {}

// Add does nothing.
func (NoProgress) Add(int64) {}

type progressKey struct{}

// WithProgress returns ctx carrying p: a host's diff operations
// (host.Differ's CreateDiff and CreateFlatDiff) report the bytes of the
// layer they write to it. A nil p returns ctx unchanged.
func WithProgress(ctx context.Context, p Progress) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressFrom returns the Progress ctx carries, or nil when it carries
// none.
func ProgressFrom(ctx context.Context) Progress {
	p, _ := ctx.Value(progressKey{}).(Progress)
	return p
}
