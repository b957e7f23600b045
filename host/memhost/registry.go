package memhost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Registry is an in-memory host.Registry: Remote holds the registry's
// blobs, tags map REG/REPO:TAG to descriptors, and blobs move between
// Remote and the client's Local store (the one Push reads and
// FetchToStore writes). The zero value is not usable; call NewRegistry.
// It is safe for concurrent use.
type Registry struct {
	// Remote is the registry's own content.
	Remote *Machine
	// Local is the client's content store.
	Local *Machine

	mu     sync.Mutex
	tags   map[string]ocispec.Descriptor
	pushes []string
}

var _ host.Registry = (*Registry)(nil)

// NewRegistry returns an empty registry (its Remote a Host of its own)
// that local pushes from and fetches into.
func NewRegistry(local *Machine) *Registry {
	return &Registry{Remote: New(snapshot.Host{}), Local: local, tags: map[string]ocispec.Descriptor{}}
}

// Tag points name (REG/REPO:TAG) at desc, as a push of a tag does.
func (g *Registry) Tag(name string, desc ocispec.Descriptor) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tags[name] = desc
}

// Pushes returns the references Push was called with, in order.
func (g *Registry) Pushes() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.pushes)
}

// Resolve returns the descriptor of REG/REPO:TAG, or of the blob a
// …@digest reference names (its media type read from the blob).
func (g *Registry) Resolve(_ context.Context, ref string) (ocispec.Descriptor, error) {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		d := digest.Digest(ref[i+1:])
		b, err := g.Remote.get(d)
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		var probe struct {
			MediaType string `json:"mediaType"`
		}
		_ = json.Unmarshal(b, &probe)
		return ocispec.Descriptor{MediaType: probe.MediaType, Digest: d, Size: int64(len(b))}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	desc, ok := g.tags[ref]
	if !ok {
		return ocispec.Descriptor{}, fmt.Errorf("%s: %w", ref, errdefs.ErrNotFound)
	}
	return desc, nil
}

// Fetch opens the registry's blob desc.
func (g *Registry) Fetch(_ context.Context, _ string, desc ocispec.Descriptor) (io.ReadCloser, error) {
	b, err := g.Remote.get(desc.Digest)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// FetchToStore copies desc (with everything it references when tree) into
// Local under lease, checking each blob's digest as the ingest would.
func (g *Registry) FetchToStore(ctx context.Context, _, lease string, desc ocispec.Descriptor, tree bool, p snapshot.Progress) error {
	ds := []digest.Digest{desc.Digest}
	if tree {
		ds = nil
		g.Remote.treeOf(desc, &ds)
	}
	for _, d := range ds {
		b, err := g.Remote.get(d)
		if err != nil {
			return err
		}
		if got := digest.FromBytes(b); got != d {
			return fmt.Errorf("blob %s arrived as %s: %w", d, got, errdefs.ErrFailedPrecondition)
		}
		g.Local.mu.Lock()
		g.Local.putLocked(b)
		g.Local.mu.Unlock()
		if p != nil {
			p.Add(int64(len(b)))
		}
		if err := g.Local.AddToLease(ctx, lease, d); err != nil {
			return err
		}
	}
	return nil
}

// Push copies desc and everything it references from Local to Remote; a
// REG/REPO:TAG@digest reference also tags it.
func (g *Registry) Push(_ context.Context, ref string, desc ocispec.Descriptor, p snapshot.Progress) error {
	var ds []digest.Digest
	g.Local.treeOf(desc, &ds)
	for _, d := range ds {
		b, err := g.Local.get(d)
		if err != nil {
			return err
		}
		g.Remote.Put(b)
		if p != nil {
			p.Add(int64(len(b)))
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		if name := ref[:i]; strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
			g.tags[name] = desc // REPO:TAG@digest
		}
	}
	g.pushes = append(g.pushes, ref)
	return nil
}

// Tags lists repo's tags, sorted.
func (g *Registry) Tags(_ context.Context, repo string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var tags []string
	for name := range g.tags {
		if tag, ok := strings.CutPrefix(name, repo+":"); ok {
			tags = append(tags, tag)
		}
	}
	slices.Sort(tags)
	return tags, nil
}
