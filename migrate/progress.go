package migrate

import (
	"io"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Progress receives the byte progress of Export, Import, Push and Pull
// (docs/design.md "Moving runs": progress on stderr when it is a terminal).
// The library never prints; the CLI passes an implementation with
// WithProgress only when its stderr is a terminal. Calls come from the
// goroutine running the operation, except during Push, where the registry
// transport may copy blobs concurrently: implementations must be safe for
// concurrent use. The phases: export: "export"; import: "scan", then
// "import", then "verify diff"; push: "push base", then "push"; pull:
// "pull", then "verify diff", then "pull base" when the base is fetched.
// The bytes added may end above a phase's total (tar headers, a
// registry's redirects) or below it (blobs the registry already has).
//
// It is snapshot.Progress, the one progress type (suspend's diff reports to
// it too), so one implementation serves both.
type Progress = snapshot.Progress

// Option configures Export, ExportFile, Import, ImportFile, Push and Pull.
type Option func(*options)

type options struct {
	progress Progress
	run      string    // WithRun
	handoff  *Handoff  // WithHandoff
	receiver *Receiver // WithReceiver
	out      string    // PullFile's out
}

// WithProgress makes the operation report its byte progress to p. Without
// it the operation reports nothing. A nil p is the same as no option.
func WithProgress(p Progress) Option {
	return func(o *options) {
		if p != nil {
			o.progress = p
		}
	}
}

func collectOptions(opts []Option) options {
	o := options{progress: NoProgress{}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// NoProgress is the Progress of an operation without WithProgress: it
// discards everything. A transport may skip counting for it (it is
// snapshot.NoProgress, which the registry transport recognizes).
type NoProgress = snapshot.NoProgress

// progressWriter counts the bytes written through it into p.
type progressWriter struct {
	w io.Writer
	p Progress
}

func (pw progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	pw.p.Add(int64(n))
	return n, err
}

// progressReader counts the bytes read through it into p; a Seek to the
// start begins phase next (the archive is read twice by Import: the
// pre-scan, then the store's importer).
type progressReader struct {
	r    io.ReadSeeker
	p    Progress
	next string
	size int64
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	pr.p.Add(int64(n))
	return n, err
}

func (pr *progressReader) Seek(offset int64, whence int) (int64, error) {
	pos, err := pr.r.Seek(offset, whence)
	if err == nil && pos == 0 && pr.next != "" {
		pr.p.Phase(pr.next, pr.size)
		pr.next = ""
	}
	return pos, err
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
