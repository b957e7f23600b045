// Package fake is an in-memory migrate.Store and migrate.Registry for
// tests of the packages that move runs (docs/design.md "Seams, fakes and
// conformance suites"): blobs by digest, leases holding them, OCI layout
// archives in and out, and a registry with a store of its own. Like
// containerd's importer, ImportArchive stores a blob under the digest of
// its bytes whatever its name says, so migrate's verification, not the
// fake, is what refuses a corrupt archive. It imports no containerd
// client: a deciding package (docs/design.md "Dependency direction").
package fake

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// Store is an in-memory migrate.Store. The zero value is not usable; call
// New. It is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	blobs    map[digest.Digest][]byte
	leases   map[string]map[digest.Digest]bool
	labels   map[string]map[string]string
	children map[digest.Digest][]digest.Digest
	temp     int
}

var _ migrate.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{blobs: map[digest.Digest][]byte{}, leases: map[string]map[digest.Digest]bool{},
		labels: map[string]map[string]string{}, children: map[digest.Digest][]digest.Digest{}}
}

// Put stores b outside any lease and returns its descriptor (digest and
// size; no media type).
func (m *Store) Put(b []byte) ocispec.Descriptor {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.putLocked(b)
}

func (m *Store) putLocked(b []byte) ocispec.Descriptor {
	d := digest.FromBytes(b)
	m.blobs[d] = append([]byte(nil), b...)
	return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
}

// Blob returns a copy of the blob d, or false when the store lacks it.
func (m *Store) Blob(d digest.Digest) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blobs[d]
	return slices.Clone(b), ok
}

// Len returns the number of blobs stored.
func (m *Store) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.blobs)
}

// Holds reports whether lease exists and holds the blob d.
func (m *Store) Holds(lease string, d digest.Digest) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leases[lease][d]
}

// Leases returns the ids of the leases, sorted.
func (m *Store) Leases() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.leases))
}

// LeaseLabels returns a copy of the labels lease was created with.
func (m *Store) LeaseLabels(lease string) map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.labels[lease])
}

// Children returns the children SetChildren recorded for parent.
func (m *Store) Children(parent digest.Digest) []digest.Digest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.children[parent])
}

func (m *Store) get(d digest.Digest) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blobs[d]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", d, errdefs.ErrNotFound)
	}
	return b, nil
}

// BlobSize returns the size of blob d; errdefs.ErrNotFound when absent.
func (m *Store) BlobSize(_ context.Context, d digest.Digest) (int64, error) {
	b, err := m.get(d)
	return int64(len(b)), err
}

// ReadBlob returns the bytes of blob d; errdefs.ErrNotFound when absent.
func (m *Store) ReadBlob(_ context.Context, d digest.Digest) ([]byte, error) {
	b, err := m.get(d)
	return slices.Clone(b), err
}

type storedBlob struct{ *bytes.Reader }

func (storedBlob) Close() error { return nil }

// OpenBlob opens blob desc.Digest for reading; errdefs.ErrNotFound when
// absent.
func (m *Store) OpenBlob(_ context.Context, desc ocispec.Descriptor) (migrate.StoredBlob, error) {
	b, err := m.get(desc.Digest)
	if err != nil {
		return nil, err
	}
	return storedBlob{bytes.NewReader(b)}, nil
}

// MissingContent returns the digests among the manifest, its config and
// its layers that are absent (the manifest alone when it is absent).
func (m *Store) MissingContent(_ context.Context, manifest digest.Digest) ([]digest.Digest, error) {
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

func (m *Store) holdLocked(lease string, d digest.Digest) error {
	held, ok := m.leases[lease]
	if !ok {
		return fmt.Errorf("lease %s: %w", lease, errdefs.ErrNotFound)
	}
	held[d] = true
	return nil
}

// WriteBlob stores data under lease (which must exist) and returns its
// descriptor with mediaType.
func (m *Store) WriteBlob(_ context.Context, lease, _, mediaType string, data []byte) (ocispec.Descriptor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	desc := m.putLocked(data)
	desc.MediaType = mediaType
	return desc, m.holdLocked(lease, desc.Digest)
}

// SetChildren records parent's children (Children); errdefs.ErrNotFound
// when parent is absent.
func (m *Store) SetChildren(_ context.Context, parent digest.Digest, children ...digest.Digest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.blobs[parent]; !ok {
		return fmt.Errorf("blob %s: %w", parent, errdefs.ErrNotFound)
	}
	m.children[parent] = children
	return nil
}

// CreateLease creates lease id with labels; errdefs.ErrAlreadyExists when
// it exists.
func (m *Store) CreateLease(_ context.Context, id string, labels map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.leases[id]; ok {
		return fmt.Errorf("lease %s: %w", id, errdefs.ErrAlreadyExists)
	}
	m.leases[id], m.labels[id] = map[digest.Digest]bool{}, maps.Clone(labels)
	return nil
}

// TempLease creates a lease "temp-N"; its release deletes the lease and
// every blob no other lease holds (the garbage collection containerd
// runs).
func (m *Store) TempLease(context.Context) (string, func(), error) {
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

// AddToLease makes lease hold the stored blobs; errdefs.ErrNotFound for an
// absent blob or lease.
func (m *Store) AddToLease(_ context.Context, lease string, blobs ...digest.Digest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range blobs {
		if _, ok := m.blobs[d]; !ok {
			return fmt.Errorf("blob %s: %w", d, errdefs.ErrNotFound)
		}
		if err := m.holdLocked(lease, d); err != nil {
			return err
		}
	}
	return nil
}

// tree appends desc's digest and those of every present blob it
// references, in walk order, to out.
func (m *Store) tree(d ocispec.Descriptor, out *[]digest.Digest) {
	if slices.Contains(*out, d.Digest) {
		return
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
	if !isImageType(d.MediaType) || json.Unmarshal(b, &probe) != nil {
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

// isImageType reports whether mt is an index or image manifest media type
// (OCI, or Docker's schema 2).
func isImageType(mt string) bool {
	switch mt {
	case ocispec.MediaTypeImageIndex, ocispec.MediaTypeImageManifest,
		"application/vnd.docker.distribution.manifest.list.v2+json",
		"application/vnd.docker.distribution.manifest.v2+json":
		return true
	}
	return false
}

// WriteArchive writes an OCI image layout tar of the entries and every
// blob they reference.
func (m *Store) WriteArchive(_ context.Context, w io.Writer, entries ...migrate.ArchiveEntry) error {
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
	ib, err := json.Marshal(idx)
	if err != nil {
		return err
	}
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

// ImportArchive stores every blob of the tar under lease, each under the
// digest of its bytes, and returns the digest of its index.json.
func (m *Store) ImportArchive(_ context.Context, lease string, r io.Reader) (digest.Digest, error) {
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
			m.mu.Lock()
			d := m.putLocked(b)
			err := m.holdLocked(lease, d.Digest)
			m.mu.Unlock()
			if err != nil {
				return "", err
			}
		}
	}
	return index, nil
}

// Delete removes blob d, whatever holds it (content lost under the
// store's feet).
func (m *Store) Delete(d digest.Digest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.blobs, d)
}

// Set stores b under d whatever b's digest is: a store (or registry) that
// serves other bytes under a digest.
func (m *Store) Set(d digest.Digest, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.blobs[d] = slices.Clone(b)
}
