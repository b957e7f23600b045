package containerd

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/continuity/fs"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// TestOverlayChangesRefusesWhiteoutNames: docs/design.md "Hardening",
// "Workload file names": a regular file, directory or link the workload
// named ".wh.*" (in the upper directory, also inside an opaque directory)
// fails the in-process differ with snapshot.ErrWhiteoutName naming the
// path — before, it went into the layer as it was and deleted its target
// on resume — while the differ's own whiteouts still pass.
func TestOverlayChangesRefusesWhiteoutNames(t *testing.T) {
	testenv.RequireRoot(t, "whiteouts and trusted.* xattrs")
	for name, mk := range map[string]func(upper string) error{
		"/.wh.etc": func(u string) error { return os.WriteFile(filepath.Join(u, ".wh.etc"), []byte("x"), 0o644) },
		"/d/.wh.d": func(u string) error { return os.MkdirAll(filepath.Join(u, "d", ".wh.d"), 0o755) },
		"/.wh.l":   func(u string) error { return os.Symlink("/etc", filepath.Join(u, ".wh.l")) },
		"/opq/.wh.x": func(u string) error {
			if err := os.MkdirAll(filepath.Join(u, "opq"), 0o755); err != nil {
				return err
			}
			if err := unix.Setxattr(filepath.Join(u, "opq"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(u, "opq", ".wh.x"), nil, 0o644)
		},
	} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			parent, upper := t.TempDir(), t.TempDir()
			if err := os.MkdirAll(filepath.Join(parent, "etc"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(parent, "opq"), 0o755); err != nil {
				t.Fatal(err)
			}
			// A whiteout of the differ's own: passes.
			if err := unix.Mknod(filepath.Join(upper, "gone"), unix.S_IFCHR, 0); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(parent, "gone"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := mk(upper); err != nil {
				t.Fatal(err)
			}
			emit := func(fs.ChangeKind, string, os.FileInfo, error) error { return nil }
			err := fs.DiffDirChanges(context.Background(), parent, upper, fs.DiffSourceOverlayFS, overlayChanges(context.Background(), parent, upper, emit))
			if !errors.Is(err, snapshot.ErrWhiteoutName) || !strings.Contains(err.Error(), name) {
				t.Fatalf("upper with %s: %v, want ErrWhiteoutName naming it", name, err)
			}
		})
	}
}

// TestCheckWhiteoutEntries: the diff service's tar (and the flattened
// diff's) is judged entry by entry: the whiteouts and opaque markers
// containerd's ChangeWriter writes pass; any other ".wh.*" entry is
// refused, named.
func TestCheckWhiteoutEntries(t *testing.T) {
	epoch := time.Unix(0, 0).UTC()
	whiteout := func(name string) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, ModTime: epoch, AccessTime: epoch, ChangeTime: epoch}
	}
	build := func(hs ...*tar.Header) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range hs {
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
		tw.Close()
		return buf.Bytes()
	}
	dir := &tar.Header{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755, ModTime: time.Now()}
	file := &tar.Header{Typeflag: tar.TypeReg, Name: "etc/hosts", Mode: 0o644, Size: 3, ModTime: time.Now()}
	if err := checkWhiteoutEntries(bytes.NewReader(build(dir, file, whiteout("etc/.wh.passwd"), whiteout("opq/.wh..wh..opq")))); err != nil {
		t.Fatalf("the differ's own whiteouts: %v", err)
	}
	for name, h := range map[string]*tar.Header{
		"/.wh.etc":        {Typeflag: tar.TypeReg, Name: ".wh.etc", Mode: 0o644, ModTime: time.Now()},
		"/etc/.wh.shadow": {Typeflag: tar.TypeReg, Name: "etc/.wh.shadow", Mode: 0, Size: 4, ModTime: epoch},
		"/.wh.d":          {Typeflag: tar.TypeDir, Name: ".wh.d/", Mode: 0o755, ModTime: epoch},
		"/.wh.l":          {Typeflag: tar.TypeSymlink, Name: ".wh.l", Linkname: "/etc", ModTime: epoch},
		"/.wh.u":          {Typeflag: tar.TypeReg, Name: ".wh.u", Uid: 1000, ModTime: epoch},
		"/.wh.t":          {Typeflag: tar.TypeReg, Name: ".wh.t", ModTime: time.Unix(1700000000, 0)},
	} {
		err := checkWhiteoutEntries(bytes.NewReader(build(dir, h)))
		if !errors.Is(err, snapshot.ErrWhiteoutName) || !strings.Contains(err.Error(), name) {
			t.Errorf("entry %s: %v, want ErrWhiteoutName naming it", name, err)
		}
	}
}

// TestExtractionRefusedIsCorrupt: docs/design.md "Hardening": an error of
// the daemon's applier over a verified layer (a tar entry it will not
// write) is content corruption (7), not an internal error an orchestrator
// retries forever; an unavailable daemon, a cancelled call, absent
// content and a full disk stay what they are.
func TestExtractionRefusedIsCorrupt(t *testing.T) {
	ctx := context.Background()
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want bool
	}{
		{ctx, errors.New("failed to extract layer sha256:ab: link /var/lib/x/hard: no such file or directory: unknown"), true},
		{ctx, fmt.Errorf("apply: %w", errdefs.ErrUnknown), true},
		{ctx, fmt.Errorf("apply: %w", errdefs.ErrInvalidArgument), true},
		{ctx, fmt.Errorf("dial: %w", errdefs.ErrUnavailable), false},
		{ctx, fmt.Errorf("blob: %w", errdefs.ErrNotFound), false},
		{ctx, fmt.Errorf("snapshot: %w", errdefs.ErrAlreadyExists), false},
		{ctx, errors.New("write /var/lib/x/f: no space left on device: unknown"), false},
		{ctx, context.DeadlineExceeded, false},
		{ended, errors.New("anything"), false},
		{ctx, nil, false},
	} {
		if got := extractionRefused(tc.ctx, tc.err); got != tc.want {
			t.Errorf("extractionRefused(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}
