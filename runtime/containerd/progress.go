package containerd

import (
	"context"
	"io"

	"sync"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/remotes"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Progress receives the byte progress of Export, Import, Push and Pull
// (DESIGN "Moving runs": progress on stderr when it is a terminal). The
// library never prints; the CLI passes an implementation with WithProgress
// only when its stderr is a terminal. Calls come from the goroutine running
// the operation, except during Push, where containerd's pusher may copy
// blobs concurrently: implementations must be safe for concurrent use.
type Progress interface {
	// Phase starts a phase of the operation: what names it (export:
	// "export"; import: "scan", then "import", then "verify diff"; push:
	// "push base", then "push"; pull: "pull", then "verify diff", then
	// "pull base" when the base is fetched) and total is the number of
	// bytes the phase is expected to move, or -1 when it is not known. The
	// bytes added may end above total (tar headers, a registry's redirects)
	// or below it (blobs the registry already has).
	Phase(what string, total int64)
	// Add records n more bytes moved in the current phase.
	Add(n int64)
}

// MoveOption configures Export, ExportFile, Import, ImportFile, Push and
// Pull.
type MoveOption func(*moveOptions)

type moveOptions struct {
	progress Progress
	run      string // WithRun
}

// WithProgress makes the operation report its byte progress to p. Without
// it the operation reports nothing (and the library never writes to the
// terminal). A nil p is the same as no option.
func WithProgress(p Progress) MoveOption {
	return func(o *moveOptions) {
		if p != nil {
			o.progress = p
		}
	}
}

func collectMoveOptions(opts []MoveOption) moveOptions {
	o := moveOptions{progress: noProgress{}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// treeSize returns the bytes of desc and every blob it references
// (images.ChildrenHandler over the content store), each counted once; it
// is only a progress total, so an unreadable child ends the walk early.
func (r *Runtime) treeSize(ctx context.Context, desc ocispec.Descriptor) int64 {
	var mu sync.Mutex
	seen := map[string]bool{}
	var total int64
	count := images.HandlerFunc(func(_ context.Context, d ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		mu.Lock()
		defer mu.Unlock()
		if seen[d.Digest.String()] {
			return nil, images.ErrSkipDesc
		}
		seen[d.Digest.String()] = true
		total += d.Size
		return nil, nil
	})
	_ = images.Walk(ctx, images.Handlers(count, images.ChildrenHandler(r.client.ContentStore())), desc)
	return total
}

// noProgress is the default Progress: it discards everything.
type noProgress struct{}

func (noProgress) Phase(string, int64) {}
func (noProgress) Add(int64)           {}

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
// pre-scan, then containerd's importer).
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

// progressProvider is a content.Provider whose readers count the bytes
// read into p (remotes.PushContent reads every blob it sends through it).
type progressProvider struct {
	content.Provider
	p Progress
}

func (pp progressProvider) ReaderAt(ctx context.Context, desc ocispec.Descriptor) (content.ReaderAt, error) {
	ra, err := pp.Provider.ReaderAt(ctx, desc)
	if err != nil {
		return nil, err
	}
	return progressReaderAt{ReaderAt: ra, p: pp.p}, nil
}

type progressReaderAt struct {
	content.ReaderAt
	p Progress
}

func (ra progressReaderAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := ra.ReaderAt.ReadAt(b, off)
	ra.p.Add(int64(n))
	return n, err
}

// progressFetcher is a remotes.Fetcher whose bodies count the bytes read
// into p.
type progressFetcher struct {
	remotes.Fetcher
	p Progress
}

func (pf progressFetcher) Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := pf.Fetcher.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	return progressReadCloser{ReadCloser: rc, p: pf.p}, nil
}

type progressReadCloser struct {
	io.ReadCloser
	p Progress
}

func (rc progressReadCloser) Read(b []byte) (int, error) {
	n, err := rc.ReadCloser.Read(b)
	rc.p.Add(int64(n))
	return n, err
}
