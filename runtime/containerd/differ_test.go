package containerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/continuity/fs"
	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
)

func TestOverlayDirs(t *testing.T) {
	defaults := map[string]bool{}
	overlayModuleDefault = func(name string) bool { return defaults[name] }
	t.Cleanup(func() { overlayModuleDefault = moduleDefault })
	ov := func(opts ...string) []mount.Mount {
		return []mount.Mount{{Type: "overlay", Source: "overlay", Options: opts}}
	}
	base := []string{"index=off", "workdir=/s/9/work", "upperdir=/s/9/fs", "lowerdir=/s/2/fs:/s/1/fs"}
	for _, tc := range []struct {
		name     string
		ms       []mount.Mount
		defaults map[string]bool
		usable   bool
	}{
		{"overlay", ov(base...), nil, true},
		{"one lower", ov("upperdir=/s/9/fs", "lowerdir=/s/1/fs"), nil, true},
		{"bind (no parent)", []mount.Mount{{Type: "bind", Source: "/s/9/fs", Options: []string{"rw", "rbind"}}}, nil, false},
		{"two mounts", append(ov(base...), ov(base...)...), nil, false},
		{"no upper (a view)", ov("lowerdir=/s/2/fs:/s/1/fs"), nil, false},
		{"metacopy option", ov(append(base, "metacopy=on")...), nil, false},
		{"metacopy default", ov(base...), map[string]bool{"metacopy": true}, false},
		{"metacopy default, off in the options", ov(append(base, "metacopy=off")...), map[string]bool{"metacopy": true}, true},
		{"redirect_dir option", ov(append(base, "redirect_dir=on")...), nil, false},
		{"redirect_dir follow", ov(append(base, "redirect_dir=follow")...), nil, true},
		{"redirect_dir default", ov(base...), map[string]bool{"redirect_dir": true}, false},
		{"redirect_dir default, off in the options", ov(append(base, "redirect_dir=off")...), map[string]bool{"redirect_dir": true}, true},
		{"id-mapped", ov(append(base, "uidmap=0:1000:65536")...), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defaults = tc.defaults
			l, ok := overlayDirs(tc.ms)
			if ok != tc.usable {
				t.Fatalf("usable = %v, want %v (%+v)", ok, tc.usable, l)
			}
			if ok && (l.upper != "/s/9/fs" || len(l.lowers) == 0 || l.lowers[len(l.lowers)-1] != "/s/1/fs") {
				t.Fatalf("layout %+v", l)
			}
		})
	}
}

type recordWriter struct {
	bytes.Buffer
	writes  []int
	failAt  int
	failErr error
}

func (w *recordWriter) Write(p []byte) (int, error) {
	if w.failErr != nil && len(w.writes) == w.failAt {
		return 0, w.failErr
	}
	w.writes = append(w.writes, len(p))
	return w.Buffer.Write(p)
}

// TestChunkWriter: the bytes arrive in order and whole, in chunks of the
// chunk size (the last one shorter); the underlying writer's first error is
// returned by later writes and by Close.
func TestChunkWriter(t *testing.T) {
	var want bytes.Buffer
	w := &recordWriter{}
	c := newChunkWriter(w, 1000, 3)
	for i := range 500 {
		p := bytes.Repeat([]byte{byte(i)}, i*7%1500)
		want.Write(p)
		if n, err := c.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.Bytes(), want.Bytes()) {
		t.Fatalf("got %d bytes, want %d (or different)", w.Len(), want.Len())
	}
	for i, n := range w.writes {
		if n != 1000 && i != len(w.writes)-1 {
			t.Fatalf("write %d of %d is %d bytes", i, len(w.writes), n)
		}
	}

	boom := errors.New("daemon gone")
	f := &recordWriter{failAt: 2, failErr: boom}
	c = newChunkWriter(f, 100, 2)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = c.Write(make([]byte, 70))
	}
	if !errors.Is(err, boom) {
		t.Fatalf("Write after the failure: %v, want %v", err, boom)
	}
	if err := c.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close: %v, want %v", err, boom)
	}
}

// TestOverlayChanges drives overlayChanges with fs.DiffDirChanges over an
// upper directory made by hand (as root: whiteouts are 0/0 character
// devices, opaque directories carry trusted.overlay.opaque) and checks the
// changes it emits: a whiteout of a path the parent has only as a dangling
// absolute symlink is a deletion, a whiteout of a path the parent lacks is
// dropped, and an opaque directory's subtree is all added whatever the
// parent holds there (a file where the upper has a directory would stop
// the plain walk with ENOTDIR).
func TestOverlayChanges(t *testing.T) {
	testenv.RequireRoot(t, "whiteouts and trusted.* xattrs")
	parent, upper := t.TempDir(), t.TempDir()
	mk := func(root, p, content string) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(p, "/"):
			err := os.MkdirAll(full, 0o755)
			if err == nil && content == "opaque" {
				err = unix.Setxattr(full, "trusted.overlay.opaque", []byte("y"), 0)
			}
			if err != nil {
				t.Fatal(err)
			}
		case content == "whiteout":
			if err := unix.Mknod(full, unix.S_IFCHR, 0); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(content, "->"):
			if err := os.Symlink(content[2:], full); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk(parent, "etc/alt", "->/sandbox-resume-test-nowhere/x")
	mk(parent, "etc/real", "real")
	mk(parent, "opq/f", "a file where the upper has a directory")
	mk(parent, "opq/d/", "")
	mk(upper, "etc/alt", "whiteout")
	mk(upper, "etc/real", "whiteout")
	mk(upper, "etc/stray", "whiteout")
	mk(upper, "opq/", "opaque")
	mk(upper, "opq/f/in", "in")
	mk(upper, "opq/d/", "")
	mk(upper, "opq/w", "whiteout")

	var got []string
	emit := func(k fs.ChangeKind, p string, fi os.FileInfo, err error) error {
		got = append(got, fmt.Sprintf("%s %s", k, p))
		return err
	}
	if err := fs.DiffDirChanges(context.Background(), parent, upper, fs.DiffSourceOverlayFS, overlayChanges(context.Background(), parent, upper, emit)); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"delete /etc/alt", "delete /etc/real", "delete /opq/.wh..opq", "add /opq/f", "add /opq/f/in", "add /opq/d"} {
		if !slices.Contains(got, w) {
			t.Errorf("no %q in %q", w, got)
		}
	}
	for _, g := range got {
		if strings.Contains(g, "stray") || strings.Contains(g, "/opq/w") {
			t.Errorf("%q emitted: a whiteout that deletes nothing", g)
		}
	}
}
