package memhost

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
)

// get returns the stored bytes of d, or errdefs.ErrNotFound.
func (h *Machine) get(d digest.Digest) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.blobs[d]
	if !ok {
		return nil, notFound("blob %s", d)
	}
	return b, nil
}

// treeOf appends d and every blob it references (an index's manifests, a
// manifest's config and layers) that the store has, each once.
func (h *Machine) treeOf(d ocispec.Descriptor, out *[]digest.Digest) {
	if slices.Contains(*out, d.Digest) {
		return
	}
	b, err := h.get(d.Digest)
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
		h.treeOf(c, out)
	}
	if probe.Config != nil {
		h.treeOf(*probe.Config, out)
	}
	for _, l := range probe.Layers {
		h.treeOf(l, out)
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

// WriteArchive implements host.Archiver: index.json lists the entries
// (with their names as org.opencontainers.image.ref.name), and every blob
// they reference is in blobs/sha256/.
func (h *Machine) WriteArchive(ctx context.Context, w io.Writer, entries ...host.ArchiveEntry) error {
	if err := h.enter(ctx, OpWriteArchive); err != nil {
		return err
	}
	h.mu.Unlock()
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	var all []digest.Digest
	for _, e := range entries {
		d := e.Desc
		if e.Name != "" {
			d.Annotations = map[string]string{ocispec.AnnotationRefName: e.Name}
		}
		idx.Manifests = append(idx.Manifests, d)
		h.treeOf(e.Desc, &all)
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
		b, err := h.get(d)
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

// ImportArchive implements host.Archiver: every blob under blobs/sha256/
// is stored under its own digest and held by the lease.
func (h *Machine) ImportArchive(ctx context.Context, lease string, r io.Reader) (digest.Digest, error) {
	if err := h.enter(ctx, OpImportArchive); err != nil {
		return "", err
	}
	h.mu.Unlock()
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
			h.mu.Lock()
			d := h.putLocked(b)
			err := h.addToLease(lease, d)
			h.mu.Unlock()
			if err != nil {
				return "", err
			}
		}
	}
	return index, nil
}
