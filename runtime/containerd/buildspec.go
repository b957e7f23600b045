package containerd

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// userFiles are the files oci.WithImageConfig reads in a container's root
// file system to resolve the image config's user and its groups.
var userFiles = []string{"etc/passwd", "etc/group"}

// maxUserFile bounds how much of /etc/passwd or /etc/group BuildSpec keeps.
const maxUserFile = 4 << 20

// BuildSpec implements host.Containers: the spec the previous release created
// a resumed container with, built without a snapshot — containerd's
// default spec for container id in this namespace (oci.GenerateSpec), then
// oci.WithImageConfig of the base image (its platform manifest
// base.ManifestDigest and config) and oci.WithEnv(env), as JSON; root.path
// is host.BundleRootfs. The image config's user and groups are looked up
// in /etc/passwd and /etc/group as the base layers plus layers hold them
// (read from the layer blobs, newest first, whiteouts honoured), written
// to a temporary directory that stands in for the root file system.
func (r *Runtime) BuildSpec(ctx context.Context, id string, base snapshot.Base, layers []snapshot.Layer, env []string) ([]byte, error) {
	ctx = namespaces.WithNamespace(ctx, r.namespace)
	cs := r.client.ContentStore()
	info, err := cs.Info(ctx, base.ManifestDigest)
	if err != nil {
		return nil, fmt.Errorf("base manifest %s: %w", base.ManifestDigest, native(err))
	}
	mdesc := ocispec.Descriptor{Digest: base.ManifestDigest, Size: info.Size}
	mb, err := r.readBlob(ctx, cs, mdesc)
	if err != nil {
		return nil, fmt.Errorf("base manifest: %w", err)
	}
	if mdesc.MediaType, err = detectMediaType(mb); err != nil {
		return nil, fmt.Errorf("base manifest %s: %w", base.ManifestDigest, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, fmt.Errorf("base manifest %s: %w", base.ManifestDigest, err)
	}
	blobs := append([]ocispec.Descriptor{}, m.Layers...)
	for _, l := range layers {
		blobs = append(blobs, ocispec.Descriptor{MediaType: l.MediaType, Digest: l.Digest, Size: l.Size})
	}
	files, err := r.lookupFiles(ctx, blobs, userFiles)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "sandbox-resume-spec-")
	if err != nil {
		return nil, fmt.Errorf("spec of container %s: %w", id, err)
	}
	defer os.RemoveAll(tmp)
	for name, data := range files {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("spec of container %s: %w", id, err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, fmt.Errorf("spec of container %s: %w", id, err)
		}
	}
	img := client.NewImageWithPlatform(r.client, images.Image{Name: base.Name, Target: mdesc}, platforms.Only(r.platform))
	s, err := oci.GenerateSpec(ctx, r.client, &containers.Container{ID: id},
		oci.WithRootFSPath(tmp), oci.WithImageConfig(img), oci.WithEnv(env), oci.WithRootFSPath(host.BundleRootfs))
	if err != nil {
		return nil, fmt.Errorf("spec of container %s from image config %s: %w", id, base.ConfigDigest, native(err))
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("spec of container %s: %w", id, err)
	}
	return b, nil
}

// lookupFiles returns the regular files among names (relative, "etc/passwd")
// as the layer blobs, applied in order, leave them: the blobs are read
// newest first, a file's newest version wins, and a whiteout of the file
// or an opaque or replaced parent directory hides older versions. A file
// none holds is absent from the result.
func (r *Runtime) lookupFiles(ctx context.Context, blobs []ocispec.Descriptor, names []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	settled := map[string]bool{}
	for i := len(blobs) - 1; i >= 0 && len(settled) < len(names); i-- {
		if err := r.scanLayer(ctx, blobs[i], names, settled, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanLayer reads one layer blob and settles the names it decides.
func (r *Runtime) scanLayer(ctx context.Context, desc ocispec.Descriptor, names []string, settled map[string]bool, out map[string][]byte) error {
	ra, err := r.client.ContentStore().ReaderAt(ctx, desc)
	if err != nil {
		return fmt.Errorf("layer %s: %w", desc.Digest, native(err))
	}
	defer ra.Close()
	ds, err := compression.DecompressStream(io.NewSectionReader(ra, 0, ra.Size()))
	if err != nil {
		return fmt.Errorf("layer %s: %w", desc.Digest, err)
	}
	defer ds.Close()
	if err := scanTar(ds, names, settled, out); err != nil {
		return fmt.Errorf("layer %s: %w", desc.Digest, err)
	}
	return nil
}

// scanTar reads one uncompressed layer tar and settles the names it
// decides: a regular file's content, or its absence (a whiteout of it, an
// opaque parent, a parent replaced by a non-directory or whited out).
func scanTar(r io.Reader, names []string, settled map[string]bool, out map[string][]byte) error {
	tr := tar.NewReader(r)
	hidden := map[string]bool{} // settled by this layer, applied after it is read
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		dir, base := path.Split(name)
		dir = strings.TrimSuffix(dir, "/")
		for _, want := range names {
			if settled[want] {
				continue
			}
			wdir := path.Dir(want)
			switch {
			case name == want:
				if hdr.Typeflag == tar.TypeReg {
					b, err := io.ReadAll(io.LimitReader(tr, maxUserFile))
					if err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					out[want] = b
				}
				hidden[want] = true
			case dir == wdir && base == ".wh."+path.Base(want),
				dir == wdir && base == ".wh..wh..opq",
				isParent(name, want) && hdr.Typeflag != tar.TypeDir,
				strings.HasPrefix(base, ".wh.") && isParent(path.Join(dir, strings.TrimPrefix(base, ".wh.")), want):
				hidden[want] = true
			}
		}
	}
	for n := range hidden {
		settled[n] = true
	}
	return nil
}

// isParent reports whether dir is a proper parent directory of name.
func isParent(dir, name string) bool { return strings.HasPrefix(name, dir+"/") }
