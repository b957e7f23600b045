package migrate

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// memStore is an in-memory Store: blobs by digest, leases holding them.
// Like containerd's importer, ImportArchive stores a blob under the digest
// of its bytes whatever its name says.
type memStore struct {
	mu       sync.Mutex
	blobs    map[digest.Digest][]byte
	leases   map[string]map[digest.Digest]bool
	labels   map[string]map[string]string
	children map[digest.Digest][]digest.Digest
	images   map[string]ocispec.Descriptor
	temp     int
}

func newMemStore() *memStore {
	return &memStore{blobs: map[digest.Digest][]byte{}, leases: map[string]map[digest.Digest]bool{},
		labels: map[string]map[string]string{}, children: map[digest.Digest][]digest.Digest{},
		images: map[string]ocispec.Descriptor{}}
}

func (m *memStore) ImageTarget(_ context.Context, name string) (ocispec.Descriptor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.images[name]
	if !ok {
		return ocispec.Descriptor{}, fmt.Errorf("image %s: %w", name, errdefs.ErrNotFound)
	}
	return d, nil
}

func (m *memStore) CreateImage(_ context.Context, name string, target ocispec.Descriptor) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.images[name]; ok {
		return fmt.Errorf("image %s: %w", name, errdefs.ErrAlreadyExists)
	}
	m.images[name] = target
	return nil
}

var _ Store = (*memStore)(nil)

func (m *memStore) put(b []byte) ocispec.Descriptor {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := digest.FromBytes(b)
	m.blobs[d] = append([]byte(nil), b...)
	return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
}

func (m *memStore) get(d digest.Digest) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blobs[d]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", d, errdefs.ErrNotFound)
	}
	return b, nil
}

func (m *memStore) BlobSize(_ context.Context, d digest.Digest) (int64, error) {
	b, err := m.get(d)
	return int64(len(b)), err
}

func (m *memStore) ReadBlob(_ context.Context, d digest.Digest) ([]byte, error) { return m.get(d) }

type memBlob struct{ *bytes.Reader }

func (memBlob) Close() error { return nil }

func (m *memStore) OpenBlob(_ context.Context, desc ocispec.Descriptor) (StoredBlob, error) {
	b, err := m.get(desc.Digest)
	if err != nil {
		return nil, err
	}
	return memBlob{bytes.NewReader(b)}, nil
}

func (m *memStore) MissingContent(_ context.Context, manifest digest.Digest) ([]digest.Digest, error) {
	b, err := m.get(manifest)
	if err != nil {
		return []digest.Digest{manifest}, nil
	}
	var mf ocispec.Manifest
	if err := json.Unmarshal(b, &mf); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", manifest, errdefs.ErrInvalidArgument)
	}
	var missing []digest.Digest
	for _, d := range append([]ocispec.Descriptor{mf.Config}, mf.Layers...) {
		if _, err := m.get(d.Digest); err != nil {
			missing = append(missing, d.Digest)
		}
	}
	return missing, nil
}

func (m *memStore) hold(lease string, d digest.Digest) error {
	held, ok := m.leases[lease]
	if !ok {
		return fmt.Errorf("lease %s: %w", lease, errdefs.ErrNotFound)
	}
	held[d] = true
	return nil
}

func (m *memStore) WriteBlob(_ context.Context, lease, _, mediaType string, data []byte) (ocispec.Descriptor, error) {
	desc := m.put(data)
	desc.MediaType = mediaType
	m.mu.Lock()
	defer m.mu.Unlock()
	return desc, m.hold(lease, desc.Digest)
}

func (m *memStore) SetChildren(_ context.Context, parent digest.Digest, children ...digest.Digest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.blobs[parent]; !ok {
		return fmt.Errorf("blob %s: %w", parent, errdefs.ErrNotFound)
	}
	m.children[parent] = children
	return nil
}

func (m *memStore) CreateLease(_ context.Context, id string, labels map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.leases[id]; ok {
		return fmt.Errorf("lease %s: %w", id, errdefs.ErrAlreadyExists)
	}
	m.leases[id], m.labels[id] = map[digest.Digest]bool{}, labels
	return nil
}

// TempLease's release deletes the lease and every blob no other lease
// holds (the garbage collection containerd runs).
func (m *memStore) TempLease(context.Context) (string, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.temp++
	id := fmt.Sprintf("temp-%d", m.temp)
	m.leases[id] = map[digest.Digest]bool{}
	return id, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		held := m.leases[id]
		delete(m.leases, id)
		for d := range held {
			kept := false
			for _, other := range m.leases {
				kept = kept || other[d]
			}
			if !kept {
				delete(m.blobs, d)
			}
		}
	}, nil
}

func (m *memStore) AddToLease(_ context.Context, lease string, blobs ...digest.Digest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range blobs {
		if _, ok := m.blobs[d]; !ok {
			return fmt.Errorf("blob %s: %w", d, errdefs.ErrNotFound)
		}
		if err := m.hold(lease, d); err != nil {
			return err
		}
	}
	return nil
}

// tree returns desc's digest and those of every present blob it
// references, in walk order.
func (m *memStore) tree(d ocispec.Descriptor, out *[]digest.Digest) {
	for _, have := range *out {
		if have == d.Digest {
			return
		}
	}
	b, err := m.get(d.Digest)
	if err != nil {
		return
	}
	*out = append(*out, d.Digest)
	var probe struct {
		Manifests []ocispec.Descriptor `json:"manifests"`
		Config    *ocispec.Descriptor  `json:"config"`
		Layers    []ocispec.Descriptor `json:"layers"`
	}
	if json.Unmarshal(b, &probe) != nil || (!isIndexType(d.MediaType) && !isManifestType(d.MediaType)) {
		return
	}
	for _, c := range probe.Manifests {
		m.tree(c, out)
	}
	if probe.Config != nil {
		m.tree(*probe.Config, out)
	}
	for _, l := range probe.Layers {
		m.tree(l, out)
	}
}

func (m *memStore) WriteArchive(_ context.Context, w io.Writer, entries ...ArchiveEntry) error {
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	var all []digest.Digest
	for _, e := range entries {
		d := e.Desc
		if e.Name != "" {
			d.Annotations = map[string]string{ocispec.AnnotationRefName: e.Name}
		}
		idx.Manifests = append(idx.Manifests, d)
		m.tree(e.Desc, &all)
	}
	ib, _ := json.Marshal(idx)
	tw := tar.NewWriter(w)
	file := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o444, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := file(ocispec.ImageLayoutFile, []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	for _, d := range all {
		b, err := m.get(d)
		if err != nil {
			return err
		}
		if err := file("blobs/sha256/"+d.Encoded(), b); err != nil {
			return err
		}
	}
	if err := file(ocispec.ImageIndexFile, ib); err != nil {
		return err
	}
	return tw.Close()
}

func (m *memStore) ImportArchive(_ context.Context, lease string, r io.Reader) (digest.Digest, error) {
	tr := tar.NewReader(r)
	var index digest.Digest
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return "", err
		}
		switch {
		case hdr.Name == ocispec.ImageIndexFile:
			index = digest.FromBytes(b)
		case strings.HasPrefix(hdr.Name, "blobs/sha256/"):
			d := m.put(b)
			m.mu.Lock()
			err := m.hold(lease, d.Digest)
			m.mu.Unlock()
			if err != nil {
				return "", err
			}
		}
	}
	return index, nil
}

// memRegistry is a Registry over a memStore of its own (the registry's
// blobs) and the client's store it fetches into and pushes from; tags map
// to descriptors.
type memRegistry struct {
	remote *memStore
	local  *memStore
	tags   map[string]ocispec.Descriptor
	pushes []string
}

var _ Registry = (*memRegistry)(nil)

func (g *memRegistry) Resolve(_ context.Context, ref string) (ocispec.Descriptor, error) {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		d := digest.Digest(ref[i+1:])
		b, err := g.remote.get(d)
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		mt, _ := imageMediaType(b)
		return ocispec.Descriptor{MediaType: mt, Digest: d, Size: int64(len(b))}, nil
	}
	desc, ok := g.tags[ref]
	if !ok {
		return ocispec.Descriptor{}, fmt.Errorf("%s: %w", ref, errdefs.ErrNotFound)
	}
	return desc, nil
}

func (g *memRegistry) Fetch(_ context.Context, _ string, desc ocispec.Descriptor) (io.ReadCloser, error) {
	b, err := g.remote.get(desc.Digest)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (g *memRegistry) FetchToStore(ctx context.Context, _, lease string, desc ocispec.Descriptor, tree bool, p Progress) error {
	ds := []digest.Digest{desc.Digest}
	if tree {
		ds = nil
		g.remote.tree(desc, &ds)
	}
	for _, d := range ds {
		b, err := g.remote.get(d)
		if err != nil {
			return err
		}
		if got := digest.FromBytes(b); got != d { // the ingest's check
			return fmt.Errorf("blob %s arrived as %s: %w", d, got, errdefs.ErrFailedPrecondition)
		}
		g.local.put(b)
		p.Add(int64(len(b)))
		if err := g.local.AddToLease(ctx, lease, d); err != nil {
			return err
		}
	}
	return nil
}

func (g *memRegistry) Push(_ context.Context, ref string, desc ocispec.Descriptor, p Progress) error {
	var ds []digest.Digest
	g.local.tree(desc, &ds)
	for _, d := range ds {
		b, err := g.local.get(d)
		if err != nil {
			return err
		}
		g.remote.put(b)
		p.Add(int64(len(b)))
	}
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		if name := ref[:i]; strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
			g.tags[name] = desc // REPO:TAG@digest
		}
	}
	g.pushes = append(g.pushes, ref)
	return nil
}

func (g *memRegistry) Tags(_ context.Context, repo string) ([]string, error) {
	var tags []string
	for name := range g.tags {
		if tag, ok := strings.CutPrefix(name, repo+":"); ok {
			tags = append(tags, tag)
		}
	}
	slices.Sort(tags)
	return tags, nil
}
