package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	cfs "github.com/containerd/continuity/fs"
	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ContainerFile implements host.Containers: the container's snapshot
// (c.SnapshotKey on c.Snapshotter) mounted read-only in a temporary
// directory, name resolved in it with continuity's fs.RootPath (symlinks
// stay inside the root), and at most limit bytes read of the regular file
// it names.
func (r *Runtime) ContainerFile(ctx context.Context, c snapshot.Container, name string, limit int64) ([]byte, error) {
	ctx = namespaces.WithNamespace(ctx, r.namespace)
	ms, err := r.client.SnapshotService(c.Snapshotter).Mounts(ctx, c.SnapshotKey)
	if err != nil {
		return nil, fmt.Errorf("container %s: snapshot %s/%s: mounts: %w", c.ID, c.Snapshotter, c.SnapshotKey, native(err))
	}
	var out []byte
	err = mount.WithReadonlyTempMount(ctx, ms, func(root string) error {
		p, err := cfs.RootPath(root, name)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("container %s: file %s: %w", c.ID, name, errdefs.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("container %s: file %s: %w", c.ID, name, err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("container %s: file %s: %w", c.ID, name, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("container %s: file %s is not a regular file (mode %s)", c.ID, name, fi.Mode())
		}
		b, err := io.ReadAll(io.LimitReader(f, limit+1))
		if err != nil {
			return fmt.Errorf("container %s: file %s: %w", c.ID, name, err)
		}
		if int64(len(b)) > limit {
			return fmt.Errorf("container %s: file %s is larger than %d bytes", c.ID, name, limit)
		}
		out = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
