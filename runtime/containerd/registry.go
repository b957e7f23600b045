package containerd

import (
	"context"
	"fmt"
	"io"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/distribution/reference"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Registry is the registry transport of migrate.Push and migrate.Pull over
// containerd's docker resolver and a Transport (credentials, CA, retries,
// tag listing), reading from and storing into the content store of the
// Runtime that made it.
type Registry struct {
	r *Runtime
	t *Transport
}

var _ host.Registry = (*Registry)(nil)

// Registry returns the registry transport over r's content store that
// reaches registries through t (NewTransport; t must not be nil): a
// *Registry, returned as the host.Registry it is for. With t's
// PlainHTTP, loopback registries (and only those) are reached over plain
// HTTP; the CLI accepts plain HTTP for loopback references only.
func (r *Runtime) Registry(t *Transport) host.Registry { return &Registry{r: r, t: t} }

// refHost is the registry host of a reference string ("" when it does not
// parse; the resolver then says why).
func refHost(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ""
	}
	return reference.Domain(named)
}

// Resolve implements host.Registry (remotes.Resolver.Resolve, with a
// new resolver; its requests retry at the transport).
func (g *Registry) Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error) {
	_, desc, err := g.t.Resolver(ctx).Resolve(ctx, ref)
	if err != nil {
		return ocispec.Descriptor{}, g.t.registryError(refHost(ref), native(err))
	}
	return desc, nil
}

// Fetch implements host.Registry (remotes.Fetcher.Fetch). Opening the
// blob retries at the transport; a body that breaks off is the caller's
// to read again.
func (g *Registry) Fetch(ctx context.Context, ref string, desc ocispec.Descriptor) (io.ReadCloser, error) {
	f, err := g.t.Resolver(ctx).Fetcher(ctx, ref)
	if err != nil {
		return nil, g.t.registryError(refHost(ref), fmt.Errorf("fetch %s: %w", ref, err))
	}
	rc, err := f.Fetch(ctx, desc)
	if err != nil {
		return nil, g.t.registryError(refHost(ref), native(err))
	}
	return rc, nil
}

// FetchToStore implements host.Registry under the lease: one blob with
// remotes.Fetch, or, with tree, desc and every child with images.Dispatch
// over images.ChildrenHandler, each blob's fetch redone whole on a
// transient failure (RetryBlob with the Transport's policy). The content
// store's ingest checks each blob's size and digest; a blob it has is not
// fetched again. Errors name the digest and the reference.
func (g *Registry) FetchToStore(ctx context.Context, ref, lease string, desc ocispec.Descriptor, tree bool, p snapshot.Progress) error {
	f, err := g.t.Resolver(ctx).Fetcher(ctx, ref)
	if err != nil {
		return g.t.registryError(refHost(ref), fmt.Errorf("fetch %s: %w", ref, err))
	}
	fetcher := progressFetcher{Fetcher: f, p: p}
	lctx := leases.WithLease(ctx, lease)
	cs := g.r.client.ContentStore()
	policy := g.t.RetryPolicy()
	if !tree {
		return g.t.registryError(refHost(ref), fetchBlob(lctx, cs, fetcher, desc, kind(desc), ref, policy))
	}
	h := images.Handlers(retryingFetchHandler(cs, fetcher, ref, policy), images.ChildrenHandler(cs))
	if err := images.Dispatch(lctx, h, nil, desc); err != nil {
		return g.t.registryError(refHost(ref), native(err))
	}
	return nil
}

// Push implements host.Registry: desc and everything under it, each
// descriptor's push redone whole on a transient failure (pushTree), with a
// new resolver per call (a reused one silently skips a second push of a
// digest it pushed before, to any repository — measured), blobs read in
// place or ahead readBufferSize bytes at a time (localcontent.go).
func (g *Registry) Push(ctx context.Context, ref string, desc ocispec.Descriptor, p snapshot.Progress) error {
	pusher, err := g.t.Resolver(ctx).Pusher(ctx, ref)
	if err != nil {
		return g.t.registryError(refHost(ref), fmt.Errorf("push %s: %w", ref, err))
	}
	var store content.Provider = g.r.blobProvider(ctx)
	if _, quiet := p.(snapshot.NoProgress); !quiet && p != nil {
		store = progressProvider{Provider: store, p: p}
	}
	return g.t.registryError(refHost(ref), pushTree(ctx, pusher, store, desc, ref, g.t.RetryPolicy()))
}

// Tags implements host.Registry with Transport.Tags (the distribution
// tags API, every page).
func (g *Registry) Tags(ctx context.Context, repo string) ([]string, error) {
	return g.t.Tags(ctx, repo)
}
