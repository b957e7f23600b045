package containerd

import (
	"bytes"
	"context"
	"sync"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// maxCachedBytes bounds the bytes of index, manifest and config blobs a
// Runtime keeps; past it the cache is emptied.
const maxCachedBytes = 16 << 20

// blobCache keeps the verified bytes of small metadata blobs by digest.
// Content is immutable under its digest, so the bytes never go stale; but
// presence can change, so every use still asks the content store (Info).
// This saves the Read stream of each index, manifest and config read.
type blobCache struct {
	mu    sync.Mutex
	blobs map[digest.Digest][]byte
	size  int
}

func (c *blobCache) get(d digest.Digest) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.blobs[d]
	return b, ok
}

// put stores b, whose digest the caller verified.
func (c *blobCache) put(d digest.Digest, b []byte) {
	if len(b) > maxCachedBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blobs == nil || c.size+len(b) > maxCachedBytes {
		c.blobs, c.size = map[digest.Digest][]byte{}, 0
	}
	if _, ok := c.blobs[d]; !ok {
		c.blobs[d] = b
		c.size += len(b)
	}
}

// cachedProvider is a content.Provider that checks presence with Info and
// serves cached bytes when it has them.
type cachedProvider struct {
	cs    content.Store
	cache *blobCache
}

func (p cachedProvider) ReaderAt(ctx context.Context, desc ocispec.Descriptor) (content.ReaderAt, error) {
	if b, ok := p.cache.get(desc.Digest); ok {
		if _, err := p.cs.Info(ctx, desc.Digest); err != nil {
			return nil, err
		}
		return bytesReaderAt{bytes.NewReader(b)}, nil
	}
	return p.cs.ReaderAt(ctx, desc)
}

type bytesReaderAt struct{ *bytes.Reader }

func (bytesReaderAt) Close() error { return nil }
