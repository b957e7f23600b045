package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDirectorySyncError: a failed fsync of the directory is returned,
// naming the path (docs/design.md "Hardening", "Nothing half-stored"); it
// was ignored.
func TestDirectorySyncError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	boom := errors.New("EIO")
	old := syncDir
	syncDir = func(string) error { return boom }
	t.Cleanup(func() { syncDir = old })
	err := WriteFile(p, []byte("x"), 0o600)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), p) {
		t.Fatalf("WriteFile with a failing directory fsync: %v, want the error naming %s", err, p)
	}
}

// TestSweepsStaleTemporaries: temporary files of the path that a killed
// writer left (no lock held, older than staleAge) are removed by the next
// write; one a live writer holds, one too young, and those of other paths
// are kept.
func TestSweepsStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ref.json")
	long := time.Now().Add(-time.Hour)
	mk := func(name string, mtime time.Time) string {
		full := filepath.Join(dir, name)
		if err := os.WriteFile(full, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(full, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return full
	}
	stale := mk(".ref.json.tmp-111", long)
	young := mk(".ref.json.tmp-222", time.Now())
	other := mk(".other.json.tmp-333", long)
	held := mk(".ref.json.tmp-444", long)
	hf, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	if err := syscall.Flock(int(hf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("whole"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale temporary file of a killed writer is still there: %v", err)
	}
	for _, keep := range []string{young, other, held} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}
}
