package containerd

import (
	"context"
	"io"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/remotes"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// The adapters below count the bytes the registry transport moves into a
// snapshot.Progress.

// progressProvider is a content.Provider whose readers count the bytes
// read into p (remotes.PushContent reads every blob it sends through it).
type progressProvider struct {
	content.Provider
	p snapshot.Progress
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
	p snapshot.Progress
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
	p snapshot.Progress
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
	p snapshot.Progress
}

func (rc progressReadCloser) Read(b []byte) (int, error) {
	n, err := rc.ReadCloser.Read(b)
	rc.p.Add(int64(n))
	return n, err
}
