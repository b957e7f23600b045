package memhost

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// CreateDiff implements host.Differ: a zstd tar of the container's
// files that differ from Lower (all of them for a container without
// Layers), and a whiteout for each file of Lower that is gone, stored under
// the lease. p (nil: none) gets phase-less Adds of the blob's size.
func (h *Machine) CreateDiff(ctx context.Context, leaseID string, sc snapshot.Container, p snapshot.Progress) (snapshot.Layer, error) {
	if err := h.enter(ctx, OpCreateDiff); err != nil {
		return snapshot.Layer{}, err
	}
	defer h.mu.Unlock()
	c, err := h.container(sc.ID)
	if err != nil {
		return snapshot.Layer{}, err
	}
	return h.storeDiff(ctx, leaseID, c.Lower, c.Files, p)
}

// CreateFlatDiff implements host.Differ: every file of the
// container (the image has none), stored under the lease. base must be the
// diffIDs of an image of the host (the only chains it has), else the error
// wraps errdefs.ErrNotFound.
func (h *Machine) CreateFlatDiff(ctx context.Context, leaseID string, sc snapshot.Container, base []digest.Digest, p snapshot.Progress) (snapshot.Layer, error) {
	if err := h.enter(ctx, OpCreateFlatDiff); err != nil {
		return snapshot.Layer{}, err
	}
	defer h.mu.Unlock()
	c, err := h.container(sc.ID)
	if err != nil {
		return snapshot.Layer{}, err
	}
	if !h.chainKnown(base) {
		chain := ""
		if len(base) > 0 {
			chain = identity.ChainID(base).String()
		}
		return snapshot.Layer{}, fmt.Errorf("chain snapshot %q: %w", chain, errdefs.ErrNotFound)
	}
	return h.storeDiff(ctx, leaseID, nil, c.Files, p)
}

// whiteoutPrefix marks a deleted file in an OCI layer (AUFS whiteout).
const whiteoutPrefix = ".wh."

// storeDiff stores the layer that turns lower into files under the lease.
// h.mu is held.
func (h *Machine) storeDiff(ctx context.Context, leaseID string, lower, files map[string][]byte, p snapshot.Progress) (snapshot.Layer, error) {
	l, ok := h.leases[leaseID]
	if !ok {
		return snapshot.Layer{}, fmt.Errorf("lease %s: %w", leaseID, errdefs.ErrNotFound)
	}
	entries := map[string][]byte{} // tar name → content; nil content: a whiteout
	for p, data := range files {
		if old, ok := lower[p]; !ok || !bytes.Equal(old, data) {
			entries[p] = data
		}
	}
	for p := range lower {
		if _, ok := files[p]; !ok {
			dir, base := path.Split(p)
			entries[dir+whiteoutPrefix+base] = nil
		}
	}
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, p := range slices.Sorted(maps.Keys(entries)) {
		hdr := &tar.Header{Name: p, Mode: 0o644, Size: int64(len(entries[p])), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return snapshot.Layer{}, err
		}
		if _, err := tw.Write(entries[p]); err != nil {
			return snapshot.Layer{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return snapshot.Layer{}, err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return snapshot.Layer{}, err
	}
	blob := enc.EncodeAll(raw.Bytes(), nil)
	if p != nil {
		p.Add(int64(len(blob)))
	}
	d := digest.FromBytes(blob)
	h.blobs[d] = blob
	l.resources[d] = true
	return snapshot.Layer{
		MediaType: ocispec.MediaTypeImageLayerZstd, Digest: d, Size: int64(len(blob)),
		DiffID: digest.FromBytes(raw.Bytes()), UncompressedSize: int64(raw.Len()),
	}, nil
}

// Tree applies layers (stored blobs of zstd tars as CreateDiff writes
// them, oldest first) over an empty tree and returns the files they give:
// path → content, whiteouts applied. It checks each blob against its layer
// with snapshot.VerifyDiff; an absent blob wraps errdefs.ErrNotFound.
func (h *Machine) Tree(layers []snapshot.Layer) (map[string][]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tree(layers)
}

// tree is Tree with h.mu held.
func (h *Machine) tree(layers []snapshot.Layer) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, l := range layers {
		blob, ok := h.blobs[l.Digest]
		if !ok {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, errdefs.ErrNotFound)
		}
		if err := snapshot.VerifyDiff(bytes.NewReader(blob), l); err != nil {
			return nil, err
		}
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		raw, err := dec.DecodeAll(blob, nil)
		dec.Close()
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
			}
			dir, base := path.Split(hdr.Name)
			if gone, ok := strings.CutPrefix(base, whiteoutPrefix); ok {
				delete(files, dir+gone)
				continue
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
			}
			files[hdr.Name] = data
		}
	}
	return files, nil
}
