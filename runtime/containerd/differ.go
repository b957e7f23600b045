package containerd

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/archive"
	"github.com/containerd/containerd/v2/pkg/labels"
	"github.com/containerd/continuity/fs"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// This file is suspend's fast differ (docs/design.md "Performance goals", "SnapshotRef"
// layers: any differ whose layer, applied over the parent, gives the same
// tree may produce it). For an active overlayfs snapshot whose directories
// this process can read (root, on the daemon's host), the layer is computed
// here instead of by the daemon's diff service:
//
//   - the walk follows the change: continuity's fs.DiffDirChanges over the
//     snapshot's upper directory (fs.DiffSourceOverlayFS: overlay whiteouts
//     become ".wh." entries, opaque directories ".wh..wh..opq") against the
//     parent view, as containerd's erofs differ does; archive.ChangeWriter
//     writes the tar stream;
//   - one pass, in three stages that overlap like `tar -c | zstd -1 |
//     sha256sum`: the walk hashes (diffID) and counts (uncompressedSize)
//     the tar stream and hands it, in chunks, to the encoder's goroutine,
//     which compresses it (klauspost's SpeedFastest by default, libzstd
//     level 1 through cgo with -tags libzstd: zstdenc_*.go; the
//     diff service uses klauspost's default level, and its gRPC request
//     carries none); the compressed stream is hashed (digest) and counted
//     while it is written into the content store under the run lease, in
//     chunks, by a third goroutine;
//   - what was stored is verified as it is stored: the content writer's
//     commit names the expected size and digest, and the daemon, which
//     hashes the bytes it writes, refuses a blob that differs (no
//     half-written blob ever gets a digest). The blob carries the
//     "containerd.io/uncompressed" label like the diff service's.
//
// Anything else (another snapshotter, an overlay mount with metacopy,
// redirect_dir or id-mapping, a daemon whose directories are not visible
// here, not root) goes through the diff service's double walk
// (rootfs.CreateDiff), as does every diff with WithDiffService.

// diffChunkSize is how many compressed bytes go to the daemon per Write
// (one gRPC round trip each), and diffChunks how many chunks are in flight.
// encodeChunkSize and encodeChunks are the same for the uncompressed tar
// stream on its way to the encoder's goroutine.
const (
	diffChunkSize   = 2 << 20
	diffChunks      = 4
	encodeChunkSize = 1 << 20
	encodeChunks    = 4
)

// Differ names how CreateDiff computes a container's layer.
type Differ int

const (
	// DifferAuto computes the layer in this process for an overlayfs
	// snapshot it can read (the upper directory against the parent view),
	// and with the daemon's diff service otherwise. The default.
	DifferAuto Differ = iota
	// DifferService always uses the daemon's diff service
	// (rootfs.CreateDiff).
	DifferService
)

// WithDiffer chooses how CreateDiff computes layers (default DifferAuto).
func WithDiffer(d Differ) Option { return func(o *options) { o.differ = d } }

// diffLayer is a layer blob stored by a differ: its descriptor, diffID and
// uncompressed size in bytes.
type diffLayer struct {
	Desc             ocispec.Descriptor
	DiffID           digest.Digest
	UncompressedSize int64
}

// overlayLayout is what the in-process differ needs of an overlayfs
// snapshot: its upper directory and its lower directories (top first).
type overlayLayout struct {
	upper  string
	lowers []string
}

// overlayDiff computes the layer of an active overlayfs snapshot in this
// process (see the top of this file). ok is false, with no error, when the
// snapshot is not one it can diff, and the caller uses the diff service.
func (r *Runtime) overlayDiff(ctx context.Context, lease string, c snapshot.Container) (_ diffLayer, ok bool, _ error) {
	if r.differ == DifferService || c.SnapshotKind != "active" || os.Geteuid() != 0 {
		return diffLayer{}, false, nil
	}
	ms, err := r.client.SnapshotService(c.Snapshotter).Mounts(ctx, c.SnapshotKey)
	if err != nil {
		return diffLayer{}, true, fmt.Errorf("snapshot %s/%s: mounts: %w", c.Snapshotter, c.SnapshotKey, native(err))
	}
	layout, usable := overlayDirs(ms)
	if !usable || !layout.visible() {
		return diffLayer{}, false, nil
	}
	l, err := r.writeOverlayLayer(ctx, lease, layout)
	var werr *walkError
	if errors.As(err, &werr) && !errors.Is(err, snapshot.ErrWhiteoutName) {
		// Nothing is stored (the ingest was aborted): the diff service
		// walks both trees instead.
		return diffLayer{}, false, nil
	}
	if err != nil {
		return diffLayer{}, true, fmt.Errorf("diff snapshot %s/%s (upper directory %s): %w", c.Snapshotter, c.SnapshotKey, layout.upper, err)
	}
	return l, true, nil
}

// overlayDirs reads the upper and lower directories from the mounts of an
// active overlayfs snapshot. usable is false unless the mounts are one
// overlay mount with both, and nothing that makes the upper directory
// alone an incomplete account of the change: metadata-only copy-up
// (metacopy), renamed directories (redirect_dir), id-mapping — asked for
// in the options or on by the overlay module's defaults.
func overlayDirs(ms []mount.Mount) (overlayLayout, bool) {
	if len(ms) != 1 || ms[0].Type != "overlay" {
		return overlayLayout{}, false
	}
	var l overlayLayout
	metacopy, redirect := overlayModuleDefault("metacopy"), overlayModuleDefault("redirect_dir")
	for _, o := range ms[0].Options {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "upperdir":
			l.upper = v
		case "lowerdir":
			l.lowers = strings.Split(v, ":")
		case "metacopy":
			metacopy = v != "off"
		case "redirect_dir":
			// "follow" only follows redirects in the lower layers, which
			// come from tar layers and hold none.
			redirect = v == "on"
		case "uidmap", "gidmap", "X-containerd.idmap":
			return overlayLayout{}, false
		}
	}
	if l.upper == "" || len(l.lowers) == 0 || metacopy || redirect {
		return overlayLayout{}, false
	}
	return l, true
}

// overlayModuleDefault reports whether the overlay module parameter name
// is on by default (a variable for tests).
var overlayModuleDefault = moduleDefault

// moduleDefault reads /sys/module/overlay/parameters/<name>: Y, or "on"
// for redirect_dir, is on. An unreadable parameter counts as on.
func moduleDefault(name string) bool {
	b, err := os.ReadFile("/sys/module/overlay/parameters/" + name)
	if err != nil {
		return true
	}
	v := strings.TrimSpace(string(b))
	return v == "Y" || v == "on"
}

// visible reports whether the directories exist here as directories: the
// daemon runs on this host and in a mount namespace that shows them.
func (l overlayLayout) visible() bool {
	for _, d := range append([]string{l.upper}, l.lowers...) {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// withParentView calls f with the root of the parent's view: the lower
// directory itself when there is one, else a read-only overlay of the
// lower directories. That mount is detached as soon as it is made and
// reached through /proc/self/fd, so it disappears with this process
// however it ends.
func (l overlayLayout) withParentView(f func(root string) error) error {
	if len(l.lowers) == 1 {
		return f(l.lowers[0])
	}
	dir, err := os.MkdirTemp("", "sandbox-resume-parent-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	m := mount.Mount{Type: "overlay", Source: "overlay", Options: []string{"ro", "lowerdir=" + strings.Join(l.lowers, ":")}}
	if err := m.Mount(dir); err != nil {
		return fmt.Errorf("mount the parent view (%d lower directories): %w", len(l.lowers), err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	uerr := unix.Unmount(dir, unix.MNT_DETACH)
	if err != nil {
		return fmt.Errorf("open the parent view: %w", errors.Join(err, uerr))
	}
	defer unix.Close(fd)
	if uerr != nil {
		return fmt.Errorf("detach the parent view: %w", uerr)
	}
	return f(fmt.Sprintf("/proc/self/fd/%d", fd))
}

// writeOverlayLayer writes the layer of the change in l.upper against the
// parent view into the content store under the lease.
func (r *Runtime) writeOverlayLayer(ctx context.Context, lease string, l overlayLayout) (diffLayer, error) {
	return r.storeLayer(ctx, lease, func(w io.Writer) error {
		return l.withParentView(func(parent string) error {
			cw := archive.NewChangeWriter(w, l.upper)
			if err := fs.DiffDirChanges(ctx, parent, l.upper, fs.DiffSourceOverlayFS, overlayChanges(ctx, parent, l.upper, cw.HandleChange)); err != nil {
				return err
			}
			return cw.Close()
		})
	})
}

// overlayChanges passes fs.DiffDirChanges' changes on to emit, correcting
// what it gets wrong about the parent, which it consults with os.Stat
// (following symlinks, possibly out of the parent view):
//
//   - an opaque directory (its ".wh..opq" deletion): everything below it in
//     the upper directory is new, whatever the parent holds at those paths
//     (a file the directory replaced — ENOTDIR —, a symlink, a directory
//     with the same times, which would be skipped as unchanged). Its
//     subtree is emitted here as added (fs.Changes with no base) and the
//     walk skips it;
//   - a whiteout (a 0/0 character device) reported as added because Stat
//     of the deleted path in the parent failed: a deletion when the parent
//     has the path (a symlink whose target is not in the view), else
//     dropped (it deletes nothing; as an entry it would be a device node).
//
// A change that adds or modifies a file, directory or link whose base name
// starts with ".wh." (a workload file, not a whiteout: those are character
// devices here, and opaque directories an xattr) fails wrapping
// snapshot.ErrWhiteoutName, naming the path: in the layer it would be a
// whiteout.
func overlayChanges(ctx context.Context, parent, upper string, emit fs.ChangeFunc) fs.ChangeFunc {
	return func(k fs.ChangeKind, p string, fi os.FileInfo, err error) error {
		switch {
		case err != nil:
			return err
		case k != fs.ChangeKindDelete && strings.HasPrefix(filepath.Base(p), snapshot.WhiteoutPrefix) && !isWhiteout(fi):
			return whiteoutName(p)
		case k == fs.ChangeKindDelete && filepath.Base(p) == opaqueMarker:
			if err := emit(k, p, nil, nil); err != nil {
				return err
			}
			dir := filepath.Dir(p)
			err := fs.Changes(ctx, "", filepath.Join(upper, dir), func(_ fs.ChangeKind, sub string, fi os.FileInfo, err error) error {
				if err != nil || isWhiteout(fi) {
					return err
				}
				if strings.HasPrefix(filepath.Base(sub), snapshot.WhiteoutPrefix) {
					return whiteoutName(filepath.Join(dir, sub))
				}
				return emit(fs.ChangeKindAdd, filepath.Join(dir, sub), fi, nil)
			})
			if err != nil {
				return err
			}
			return filepath.SkipDir
		case k == fs.ChangeKindAdd && isWhiteout(fi):
			_, err := os.Lstat(filepath.Join(parent, p))
			switch {
			case err == nil:
				return emit(fs.ChangeKindDelete, p, nil, nil)
			case errors.Is(err, iofs.ErrNotExist) || errors.Is(err, unix.ENOTDIR):
				return nil
			default:
				return err
			}
		}
		return emit(k, p, fi, nil)
	}
}

// whiteoutName is the refusal of a workload file named like a whiteout.
func whiteoutName(p string) error {
	return fmt.Errorf("%s: %w", p, snapshot.ErrWhiteoutName)
}

// checkWhiteoutEntries reads an uncompressed layer tar the diff service
// wrote and refuses (snapshot.ErrWhiteoutName, naming the entry) an entry
// whose base name starts with ".wh." unless it is what containerd's
// archive.ChangeWriter writes for a whiteout or an opaque marker: a
// regular file of 0 bytes, mode 0, owned by 0:0, with the time 0
// (containerd 2). A workload file of that very shape is indistinguishable
// in the tar; the in-process differ, which sees the upper directory,
// tells them apart exactly.
func checkWhiteoutEntries(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the layer tar: %w", err)
		}
		if !strings.HasPrefix(path.Base(hdr.Name), snapshot.WhiteoutPrefix) {
			continue
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Size != 0 || hdr.Mode&0o7777 != 0 || hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(time.Unix(0, 0)) {
			return whiteoutName("/" + strings.TrimPrefix(hdr.Name, "/"))
		}
	}
}

// opaqueMarker is the name fs.DiffDirChanges reports deleted in an opaque
// directory (archive.ChangeWriter writes it as ".wh..wh..opq").
const opaqueMarker = ".wh..opq"

// isWhiteout reports whether fi is an overlay whiteout: a character device
// 0/0.
func isWhiteout(fi os.FileInfo) bool {
	if fi == nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// storeLayer runs tarStream (which writes an uncompressed layer tar) and
// stores it zstd-compressed as one blob under the lease, in one pass (an
// error of tarStream is a *walkError, and nothing is stored): the
// tar bytes are hashed and counted on their way into the encoder, the
// compressed bytes on their way to the content store. The ingest is named
// "<lease>/diff" (a rerun truncates what an interrupted one left), the
// commit names the expected size and digest, and the blob is added to the
// lease.
func (r *Runtime) storeLayer(ctx context.Context, lease string, tarStream func(io.Writer) error) (diffLayer, error) {
	lctx := leases.WithLease(ctx, lease)
	cs := r.client.ContentStore()
	ref := lease + "/diff"
	cw, err := content.OpenWriter(lctx, cs, content.WithRef(ref),
		content.WithDescriptor(ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerZstd}))
	if err != nil {
		return diffLayer{}, fmt.Errorf("open ingest %s: %w", ref, native(err))
	}
	committed := false
	defer func() {
		if !committed {
			cw.Close()
			// The ingest is named by us, so containerd keeps a failed one
			// (it would hold the disk space): abort it.
			_ = cs.Abort(context.WithoutCancel(ctx), ref)
		}
	}()
	if err := cw.Truncate(0); err != nil {
		return diffLayer{}, fmt.Errorf("ingest %s: truncate: %w", ref, native(err))
	}

	compressed, uncompressed := digest.SHA256.Digester(), digest.SHA256.Digester()
	var csize, usize countWriter
	// The compressed bytes are hashed by the goroutine that sends them, not
	// by the encoder's.
	sink := newChunkWriter(io.MultiWriter(compressed.Hash(), &csize, cw), diffChunkSize, diffChunks)
	// klauspost's SpeedFastest, or libzstd level 1 with -tags libzstd
	// (zstdenc_*.go); no frame checksum either way.
	zw, err := newLayerEncoder(sink)
	if err != nil {
		sink.Close()
		return diffLayer{}, err
	}
	// The encoder runs on a goroutine of its own too: the walk (file
	// reads, tar, the diffID's hash) and the compression overlap, as
	// `tar -c | zstd -1` do.
	enc := newChunkWriter(zw, encodeChunkSize, encodeChunks)
	werr := tarStream(io.MultiWriter(uncompressed.Hash(), &usize, enc))
	eerr := enc.Close()
	zerr := zw.Close()
	serr := sink.Close()
	if serr != nil {
		return diffLayer{}, fmt.Errorf("write ingest %s: %w", ref, native(serr))
	}
	if eerr != nil {
		return diffLayer{}, fmt.Errorf("compress layer: %w", eerr)
	}
	if werr != nil {
		return diffLayer{}, &walkError{werr}
	}
	if zerr != nil {
		return diffLayer{}, fmt.Errorf("compress layer: %w", zerr)
	}

	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: compressed.Digest(), Size: int64(csize)}
	diffID := uncompressed.Digest()
	err = cw.Commit(lctx, desc.Size, desc.Digest, content.WithLabels(map[string]string{labels.LabelUncompressed: diffID.String()}))
	switch {
	case err == nil:
		committed = true
	case errdefs.IsAlreadyExists(native(err)):
		// The same bytes were stored before (a rerun): they carry the
		// label unless another writer stored them.
		committed = true
		if err := r.labelUncompressed(ctx, desc.Digest, diffID); err != nil {
			return diffLayer{}, err
		}
	default:
		return diffLayer{}, fmt.Errorf("commit layer %s (%d bytes): %w", desc.Digest, desc.Size, native(err))
	}
	if err := r.addContent(ctx, lease, desc.Digest); err != nil {
		return diffLayer{}, err
	}
	return diffLayer{Desc: desc, DiffID: diffID, UncompressedSize: int64(usize)}, nil
}

// walkError is a failure of the walk that makes a layer's tar stream (as
// opposed to storing it).
type walkError struct{ err error }

func (e *walkError) Error() string { return "walk the change: " + e.err.Error() }
func (e *walkError) Unwrap() error { return e.err }

// labelUncompressed sets the "containerd.io/uncompressed" label of a
// stored layer blob when it lacks it; a different value is an error.
func (r *Runtime) labelUncompressed(ctx context.Context, d, diffID digest.Digest) error {
	cs := r.client.ContentStore()
	info, err := cs.Info(ctx, d)
	if err != nil {
		return fmt.Errorf("layer %s: %w", d, native(err))
	}
	switch v := info.Labels[labels.LabelUncompressed]; v {
	case diffID.String():
		return nil
	case "":
		if _, err := cs.Update(ctx, content.Info{Digest: d, Labels: map[string]string{labels.LabelUncompressed: diffID.String()}},
			"labels."+labels.LabelUncompressed); err != nil {
			return fmt.Errorf("layer %s: label its diffID: %w", d, native(err))
		}
		return nil
	default:
		return fmt.Errorf("layer %s is labelled with diffID %s, but its content is %s: %w", d, v, diffID, errdefs.ErrDataLoss)
	}
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// chunkWriter gathers writes into chunks and writes each chunk to w from a
// goroutine of its own, at most n chunks ahead of it: the producer (the
// compressor) does not wait for each round trip to the daemon. The first
// error of w is returned by every later Write and by Close.
type chunkWriter struct {
	w    io.Writer
	cur  []byte
	free chan []byte
	full chan []byte
	done chan struct{}

	mu  sync.Mutex
	err error
}

func newChunkWriter(w io.Writer, size, n int) *chunkWriter {
	c := &chunkWriter{w: w, free: make(chan []byte, n), full: make(chan []byte, n), done: make(chan struct{})}
	for range n {
		c.free <- make([]byte, 0, size)
	}
	c.cur = <-c.free
	go c.run()
	return c
}

func (c *chunkWriter) run() {
	defer close(c.done)
	for b := range c.full {
		if c.failed() == nil {
			if _, err := c.w.Write(b); err != nil {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
			}
		}
		c.free <- b[:0]
	}
}

func (c *chunkWriter) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := c.failed(); err != nil {
			return n, err
		}
		k := copy(c.cur[len(c.cur):cap(c.cur)], p)
		c.cur = c.cur[:len(c.cur)+k]
		p, n = p[k:], n+k
		if len(c.cur) == cap(c.cur) {
			c.full <- c.cur
			c.cur = <-c.free
		}
	}
	return n, nil
}

// Close writes what is left, waits for the goroutine and returns the
// first error.
func (c *chunkWriter) Close() error {
	if len(c.cur) > 0 {
		c.full <- c.cur
	}
	close(c.full)
	<-c.done
	return c.failed()
}
