package containerd

import (
	"context"
	"fmt"
	"slices"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
)

// pushConcurrency is how many blobs pushTree sends at once.
const pushConcurrency = 3

// pushTree pushes root and every descriptor under it (images.Children over
// store: a manifest's config and layers, an index's manifests) with pusher,
// in the order remotes.PushContent uses — blobs first, then manifests, then
// indexes, a parent after its children — but with each descriptor's push
// redone whole by RetryBlob when it fails transiently (docs/design.md
// "Moving runs", per-blob retries; containerd's PushContent cannot retry
// its manifests). Blobs the registry has are skipped by the pusher's HEAD.
// Errors name the digest and the reference.
func pushTree(ctx context.Context, pusher remotes.Pusher, store content.Provider, root ocispec.Descriptor, ref string, p RetryPolicy) error {
	var blobs, manifests, indexes []ocispec.Descriptor
	seen := map[digest.Digest]bool{}
	collect := images.HandlerFunc(func(ctx context.Context, d ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		if seen[d.Digest] {
			return nil, images.ErrSkipDesc
		}
		seen[d.Digest] = true
		switch {
		case images.IsManifestType(d.MediaType):
			manifests = append(manifests, d)
		case images.IsIndexType(d.MediaType):
			indexes = append(indexes, d)
		default:
			blobs = append(blobs, d)
		}
		return images.Children(ctx, store, d)
	})
	// Walk is depth first and sequential: children are seen after parents.
	if err := images.Walk(ctx, collect, root); err != nil {
		return fmt.Errorf("push %s: read %s: %w", ref, root.Digest, native(err))
	}
	push := remotes.PushHandler(pusher, store)
	one := func(ctx context.Context, d ocispec.Descriptor) error {
		return RetryBlob(ctx, p, func(ctx context.Context) error {
			if _, err := push(ctx, d); err != nil && !errdefs.IsAlreadyExists(err) {
				return fmt.Errorf("push %s %s to %s: %w", kind(d), d.Digest, ref, native(err))
			}
			return nil
		})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(pushConcurrency)
	for _, d := range blobs {
		g.Go(func() error { return one(gctx, d) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	slices.Reverse(manifests) // deepest first (index children before the root manifest)
	slices.Reverse(indexes)
	for _, d := range append(manifests, indexes...) {
		if err := one(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// fetchBlob fetches desc into the content store with fetcher, redone whole
// by RetryBlob on transient failures (a partial ingest is resumed or
// truncated by containerd's writer). A blob already present is no error.
// Errors name what, the digest and the source.
func fetchBlob(ctx context.Context, cs content.Ingester, fetcher remotes.Fetcher, desc ocispec.Descriptor, what, src string, p RetryPolicy) error {
	return RetryBlob(ctx, p, func(ctx context.Context) error {
		err := native(remotes.Fetch(ctx, cs, fetcher, desc))
		if err != nil && !errdefs.IsAlreadyExists(err) {
			return fmt.Errorf("fetch %s %s from %s: %w", what, desc.Digest, src, err)
		}
		return nil
	})
}

// retryingFetchHandler is remotes.FetchHandler with each descriptor's
// fetch under fetchBlob, for images.Dispatch.
func retryingFetchHandler(cs content.Ingester, fetcher remotes.Fetcher, src string, p RetryPolicy) images.HandlerFunc {
	return func(ctx context.Context, d ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		if d.MediaType == images.MediaTypeDockerSchema1Manifest {
			return nil, fmt.Errorf("fetch %s from %s: %s is not supported: %w", d.Digest, src, d.MediaType, errdefs.ErrNotImplemented)
		}
		return nil, fetchBlob(ctx, cs, fetcher, d, kind(d), src, p)
	}
}

func kind(d ocispec.Descriptor) string {
	switch {
	case images.IsManifestType(d.MediaType):
		return "manifest"
	case images.IsIndexType(d.MediaType):
		return "index"
	case images.IsConfigType(d.MediaType):
		return "config"
	}
	return "blob"
}
