package inputfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.json")
	if err := os.WriteFile(ok, []byte("12345678"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(ok, 8); err != nil || string(b) != "12345678" {
		t.Fatalf("a file at the limit: %q %v", b, err)
	}
	if _, err := Read(ok, 7); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), ok) {
		t.Fatalf("a file over the limit: %v, want ErrTooLarge naming it", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 8); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	for _, p := range []string{"/dev/zero", "/dev/null", dir} {
		if _, err := Read(p, MaxJSON); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want ErrNotRegular naming it", p, err)
		}
	}
	// A FIFO is read under the same cap.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		buf := make([]byte, 4096)
		for i := 0; i < 64; i++ { // 256 KiB, then the reader stops at the cap
			if _, err := f.Write(buf); err != nil {
				return
			}
		}
	}()
	if _, err := Read(fifo, 1024); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fifo) {
		t.Fatalf("a FIFO over the cap: %v, want ErrTooLarge naming it", err)
	}
}
