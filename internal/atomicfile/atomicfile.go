// Package atomicfile writes files so that a reader, or a crash, sees either
// the old file (or none) or the complete new one, never a part: the bytes go
// to a temporary file in the same directory, which is fsynced, then renamed
// (or linked) over the path, and the directory is fsynced. A failed
// directory fsync is an error (the rename may not survive a crash). Each
// writer holds an exclusive flock on its temporary file; temporary files of
// path that no writer holds (a writer that was killed) are removed by the
// next write of path.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Options tunes Create. The zero value replaces an existing file.
type Options struct {
	// NoReplace links the temporary file to path instead of renaming it,
	// so an existing path (also one created meanwhile) is never replaced;
	// the error then wraps fs.ErrExist.
	NoReplace bool
}

// Create writes path through fill, atomically, with permission bits mode.
// fill writes the whole content to w; an error from fill (or from any
// step) removes the temporary file and leaves path as it was. Errors name
// path.
func Create(path string, mode os.FileMode, opts Options, fill func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	// The lock tells sweep that this temporary file is being written.
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		_ = os.Remove(tmp) // after a rename it is gone; after a link, the extra name goes
	}()
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fill(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: fsync: %w", path, err)
	}
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return fmt.Errorf("write %s: %w", path, cerr)
	}
	if opts.NoReplace {
		err = os.Link(tmp, path) // EEXIST rather than replacing a file that appeared meanwhile
	} else {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("write %s: %w", path, fs.ErrExist)
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: fsync of directory %s: %w", path, dir, err)
	}
	sweep(dir, filepath.Base(path), tmp)
	return nil
}

// syncDir fsyncs the directory dir (a variable: tests make it fail).
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// staleAge is how old a temporary file must be before sweep may remove it:
// a writer locks its file right after creating it, and this covers that
// moment.
const staleAge = 10 * time.Second

// sweep removes the temporary files of base in dir ("." + base + ".tmp-*")
// other than own that no writer holds locked and that are older than
// staleAge: what a killed writer left. It is best effort: a file it cannot
// judge or remove is left.
func sweep(dir, base, own string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "."+escapeGlob(base)+".tmp-*"))
	for _, m := range matches {
		if m == own {
			continue
		}
		fi, err := os.Lstat(m)
		if err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) < staleAge {
			continue
		}
		f, err := os.Open(m)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.Remove(m)
		}
		_ = f.Close()
	}
}

// escapeGlob escapes the pattern characters of filepath.Match in s.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// WriteFile is Create of data, replacing an existing file.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	return Create(path, mode, Options{}, func(w io.Writer) error {
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	})
}
