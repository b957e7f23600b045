package snapshot

// Progress receives the byte progress of a long operation: a rootfs diff
// while suspend waits for it, an export, import, push or pull
// (migrate.Progress is this type). It is always passed explicitly —
// suspend's request field, host.Differ's argument, migrate.WithProgress —
// never through a context, so one implementation (the CLI's progress bar
// on a terminal's stderr) serves every operation. The library never prints. Implementations must be safe for
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
