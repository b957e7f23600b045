package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// calls are the ledger calls TestFileRules and TestCorruptPageRecovered
// make on a bad file: reads and a transition.
func calls(ctx context.Context, l *Ledger) map[string]func() error {
	return map[string]func() error{
		"Get":  func() error { _, err := l.Get(ctx, "r0"); return err },
		"List": func() error { _, err := l.List(ctx); return err },
		"Discard": func() error {
			_, err := l.Discard(ctx, "r0", true)
			return err
		},
		"Suspended": func() error {
			_, err := l.Suspended(ctx, ledger.SuspendRequest{Run: "new", Generation: 1, Ref: ref1, Container: ctr})
			return err
		},
	}
}

// noPanic runs call and turns a panic into a test failure.
func noPanic(t *testing.T, name string, call func() error) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s panicked: %v", name, p)
			err = errors.New("panicked")
		}
	}()
	return call()
}

// TestCorruptPageRecovered: a corrupt page (here: every page after the two
// meta pages in turn, bytes of its header overwritten) never panics a call;
// a panic inside bbolt comes back as an error matching ErrCorrupt that
// names the file. A panic inside a transaction leaves no lock behind (the
// file works again once it is good); one inside bbolt.Open keeps failing
// that Ledger with ErrCorrupt, not ErrLocked.
func TestCorruptPageRecovered(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	goodPath := filepath.Join(dir, "good.db")
	l := New(goodPath)
	for i := 0; i < 3; i++ {
		if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: fmt.Sprintf("r%d", i), Generation: 1, Ref: ref1, Container: ctr}); err != nil {
			t.Fatal(err)
		}
	}
	good, err := os.ReadFile(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	recovered := 0
	for pg := 2; pg*page < len(good); pg++ {
		for _, off := range []int{0, 8, 16} {
			for _, name := range []string{"Get", "List", "Discard", "Suspended"} {
				path := filepath.Join(dir, fmt.Sprintf("p%d-%d-%s.db", pg, off, name))
				bad := append([]byte(nil), good...)
				for i := range 8 {
					bad[pg*page+off+i] = 0xff
				}
				if err := os.WriteFile(path, bad, 0o600); err != nil {
					t.Fatal(err)
				}
				lb := New(path, WithTimeout(time.Second)) // a lock left behind fails fast
				err := noPanic(t, fmt.Sprintf("%s with page %d corrupt at %d", name, pg, off), calls(ctx, lb)[name])
				if err == nil || !errors.Is(err, ErrCorrupt) {
					continue
				}
				recovered++
				if !strings.Contains(err.Error(), path) {
					t.Errorf("%s: the error does not name %s: %v", name, path, err)
				}
				if err := os.WriteFile(path, good, 0o600); err != nil {
					t.Fatal(err)
				}
				_, err = lb.List(ctx)
				switch {
				case strings.Contains(err0(err), "panicked opening"):
					// the mapping of the panicking open holds the lock
				case err != nil:
					t.Errorf("%s, page %d at %d: after the file is good again: %v", name, pg, off, err)
				}
			}
		}
	}
	if recovered == 0 {
		t.Fatal("no corruption reached a bbolt panic: the test proves nothing")
	}
}

func err0(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestFileRules: an existing file smaller than two pages (0 bytes included)
// or one bbolt cannot open is an error naming it, never a fresh ledger and
// never rewritten; a file writable by group or other, or owned by another
// uid, is refused unless WithInsecureMode.
func TestFileRules(t *testing.T) {
	ctx := t.Context()
	for name, content := range map[string][]byte{
		"empty":   nil,
		"short":   []byte("not a ledger"),
		"garbage": []byte(strings.Repeat("x", 5*4096)),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			l := New(path)
			for call, fn := range calls(ctx, l) {
				err := noPanic(t, call, fn)
				if err == nil || !strings.Contains(err.Error(), path) || errdef.Class(err) != nil {
					t.Errorf("%s on a %s file: want a storage error naming %s, got %v", call, name, path, err)
				}
			}
			if b, _ := os.ReadFile(path); string(b) != string(content) {
				t.Errorf("the %s file was rewritten (%d bytes, was %d)", name, len(b), len(content))
			}
		})
	}

	t.Run("modes", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ledger.db")
		l := New(path)
		if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: "r0", Generation: 1, Ref: ref1, Container: ctr}); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []os.FileMode{0o620, 0o602, 0o666} {
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			for call, fn := range calls(ctx, l) {
				err := noPanic(t, call, fn)
				if !errors.Is(err, ErrInsecureFile) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("%04o", mode)) {
					t.Errorf("%s on a %04o file: want ErrInsecureFile naming the file and mode, got %v", call, mode, err)
				}
			}
			li := New(path, WithInsecureMode())
			if _, err := li.Get(ctx, "r0"); err != nil {
				t.Errorf("WithInsecureMode, mode %04o: %v", mode, err)
			}
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Get(ctx, "r0"); err != nil {
			t.Errorf("a 0644 file (readable, not writable, by others): %v", err)
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(path, 1000, 1000); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Get(ctx, "r0"); !errors.Is(err, ErrInsecureFile) || !strings.Contains(err.Error(), "uid 1000") {
				t.Errorf("a file owned by uid 1000: want ErrInsecureFile naming the owner, got %v", err)
			}
			if _, err := New(path, WithInsecureMode()).Get(ctx, "r0"); err != nil {
				t.Errorf("WithInsecureMode, owned by uid 1000: %v", err)
			}
		}
	})
}

// TestCreateExclusive: a new ledger appears whole (the file is initialized
// under a temporary name and linked into place, which fails rather than
// replace a file that appeared meanwhile); no temporary file is left.
func TestCreateExclusive(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	l := New(path)
	if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: "r0", Generation: 1, Ref: ref1, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "ledger.db" {
		t.Fatalf("directory holds %v, want only ledger.db", ents)
	}
	// An existing file is never replaced or rewritten by create (one that
	// appears between its check and its link is kept too: os.Link fails
	// with EEXIST rather than replace it).
	other := filepath.Join(dir, "other.db")
	if err := os.WriteFile(other, []byte("someone else's"), 0o600); err != nil {
		t.Fatal(err)
	}
	lo := New(other)
	if err := lo.create(); err != nil {
		t.Fatalf("create over an existing file: %v (want nil: the existing file is then opened and judged)", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "someone else's" {
		t.Fatalf("create replaced an existing file")
	}
}
