// Package atomicfile writes files so that a reader, or a crash, sees either
// the old file (or none) or the complete new one, never a part: the bytes go
// to a temporary file in the same directory, which is fsynced, then renamed
// (or linked) over the path, and the directory is fsynced.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
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
