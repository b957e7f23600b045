package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// moveProgress returns the options that make export, import, push and pull
// show their byte progress on the command's stderr, and a function to call
// when the operation returns. Progress is shown only when stderr is a
// terminal (golang.org/x/term); otherwise — a pipe, a file, a test's buffer —
// there are no options and nothing is written.
func moveProgress(cmd *cobra.Command) ([]migrate.Option, func()) {
	w := cmd.ErrOrStderr()
	if !isTerminal(w) {
		return nil, func() {}
	}
	p := &barProgress{w: w}
	return []migrate.Option{migrate.WithProgress(p)}, p.finish
}

// isTerminal reports whether w is an *os.File open on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// barProgress is a migrate.Progress drawing one progressbar/v3 bar per
// phase on w (bytes, rate; a spinner when the total is unknown). Safe for
// concurrent use. It starts no goroutine: the spinner moves when bytes are
// added (progressbar's own spinner ticker is off), so every write to w
// happens inside Phase, Add or finish, under mu, and nothing draws after
// finish returns.
type barProgress struct {
	mu    sync.Mutex
	w     io.Writer
	bar   *progressbar.ProgressBar
	total int64
	done  int64
}

// Phase ends the current bar and starts one for the phase what.
func (p *barProgress) Phase(what string, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked()
	if total <= 0 {
		total = -1
	}
	p.total, p.done = total, 0
	p.bar = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(fmt.Sprintf("%-12s", what)),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSpinnerType(14),
		// No ticker goroutine redrawing the spinner on its own: it would
		// write to w outside mu and outlive the bar (a bar with an unknown
		// total is never finished by Add).
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionSetRenderBlankState(true),
	)
}

// Add moves the current bar by n bytes; a total that turns out too small
// (tar headers) grows with it.
func (p *barProgress) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil || n <= 0 {
		return
	}
	p.done += n
	if p.total > 0 && p.done > p.total {
		p.total = p.done
		p.bar.ChangeMax64(p.total)
	}
	_ = p.bar.Add64(n)
}

// endLocked completes the current bar (drawn full when the phase moved
// anything; left as it is otherwise) and ends its line.
func (p *barProgress) endLocked() {
	if p.bar == nil {
		return
	}
	if p.total > 0 && p.done > 0 {
		_ = p.bar.Finish()
	} else {
		_ = p.bar.Add64(0)
		_ = p.bar.Exit()
	}
	fmt.Fprintln(p.w)
	p.bar = nil
}

// finish ends the last bar.
func (p *barProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked()
}
