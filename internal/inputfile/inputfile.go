// Package inputfile reads the files a user names as input — configs,
// lockfiles, refs, specs, policies, keys, trusted keys — through one
// bounded helper (docs/design.md "Hardening", "Bounded reads"): at most a
// limit per kind of file, so that a path such as /dev/zero, or a huge file,
// fails naming the file instead of exhausting memory. A device file is
// refused; a pipe (a FIFO, `--spec <(jq …)`, /dev/stdin) is read under the
// same cap.
package inputfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Limits in bytes.
const (
	// MaxJSON bounds a JSON (or JSONC) input file: a devcontainer.json, a
	// lockfile, a SnapshotRef file, a runtime spec, a signed manifest. It
	// is strictjson's MaxInputBytes, so a file at the cap still reaches
	// the decoder's own limit message.
	MaxJSON = 1 << 20
	// MaxKey bounds a PEM key file (private or public).
	MaxKey = 64 << 10
	// MaxCertBundle bounds a PEM CA bundle (--ledger-cacert,
	// --registry-cacert); the system bundle is about 200 KiB.
	MaxCertBundle = 1 << 20
	// MaxText bounds a line-oriented text input (a reserved-environment
	// policy file).
	MaxText = 1 << 20
)

// ErrTooLarge is wrapped by the error of a file over its limit.
var ErrTooLarge = errors.New("input file too large")

// ErrNotRegular is wrapped by the error of a path that is a device,
// socket or directory rather than a regular file or a pipe.
var ErrNotRegular = errors.New("input file is not a regular file or a pipe")

// Read returns the content of the file at path, at most limit bytes. It
// opens the file and judges the open file (fstat, so the file judged is
// the file read): a regular file or a named pipe is read, anything else
// (a character or block device such as /dev/zero, a socket, a directory)
// fails wrapping ErrNotRegular; more than limit bytes fails wrapping
// ErrTooLarge. Errors are *fs.PathError naming path (fs.ErrNotExist for a
// missing file).
func Read(path string, limit int64) ([]byte, error) {
	data, _, err := read(path, limit)
	return data, err
}

func read(path string, limit int64) ([]byte, fs.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err // *fs.PathError names the path
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if t := fi.Mode().Type(); t != 0 && t != fs.ModeNamedPipe {
		return nil, 0, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, describe(t))}
	}
	if fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, 0, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, fi.Size(), limit)}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, 0, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, 0, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)}
	}
	return data, fi.Mode().Perm(), nil
}

// ReadMode is Read that also returns the open file's permission bits
// (envelope judges a private key file's mode with them: the mode judged is
// the file read).
func ReadMode(path string, limit int64) ([]byte, fs.FileMode, error) {
	return read(path, limit)
}

func describe(t fs.FileMode) string {
	switch {
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	case t&fs.ModeSocket != 0:
		return "a socket"
	}
	return "type " + t.String()
}
