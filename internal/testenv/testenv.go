// Package testenv decides, in one place, what a test does when something
// it needs is not there: root, a containerd daemon, a tool on PATH, the
// shared/ folder beside the repository (docs/design.md "Build and test
// environment"). Locally the test is skipped and says what is missing;
// under CI=true it fails, so that CI never passes by skipping.
//
// It also gives the random trials their seed (SANDBOX_RESUME_TEST_SEED),
// logged so that a failure can be replayed.
//
// It is imported by tests only (of any package; nothing may import test/).
package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// EnvCI is the variable that turns a missing prerequisite from a skip into
// a failure when it holds "true" (as CI systems set it).
const EnvCI = "CI"

// EnvShared names the shared/ folder when it is not beside the module root.
const EnvShared = "SANDBOX_RESUME_SHARED"

// EnvSeed sets the seed of the random trials (a decimal uint64).
const EnvSeed = "SANDBOX_RESUME_TEST_SEED"

// CI reports whether CI=true: a missing prerequisite then fails the test.
func CI() bool { return os.Getenv(EnvCI) == "true" }

// Missing reports a missing prerequisite of t: t.Skipf locally, t.Fatalf
// under CI=true. The message says what is missing and how to get it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("CI=true, and a prerequisite is missing: %s", msg)
	}
	t.Skipf("skipped, a prerequisite is missing (under CI=true this fails): %s", msg)
}

// RequireRoot skips t (fails it under CI=true) unless the test runs as
// root; why says what needs it.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root: %s", why)
	}
}

// LookPath returns the path of the program name on PATH, or reports it
// missing (Missing) with hint saying how to install it ("make deps").
func LookPath(t testing.TB, name, hint string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s is not on PATH (%s)", name, hint)
	}
	return p
}

// ModuleRoot returns the directory of this module's go.mod, found from
// this source file (tests run with their package directory as working
// directory, at any depth).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// SharedDir returns the shared/ folder: $SANDBOX_RESUME_SHARED when set,
// else "shared" beside the module root. It is an error when that is not a
// directory.
func SharedDir() (string, error) {
	d := os.Getenv(EnvShared)
	if d == "" {
		d = filepath.Clean(filepath.Join(ModuleRoot(), "..", "shared"))
	}
	fi, err := os.Stat(d)
	if err != nil {
		return "", fmt.Errorf("shared/ folder: %w (set $%s, or lay it beside the repository)", err, EnvShared)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("shared/ folder: %s is not a directory", d)
	}
	return d, nil
}

// Shared returns SharedDir, or reports it missing (Missing).
func Shared(t testing.TB) string {
	t.Helper()
	d, err := SharedDir()
	if err != nil {
		Missing(t, "%v", err)
	}
	return d
}

// HasShared reports whether the shared/ folder is there, or CI=true (where
// Shared then fails the test): tests that run a part without it use it to
// choose.
func HasShared() bool {
	_, err := SharedDir()
	return err == nil || CI()
}

// Seed returns the seed of t's random choices: $SANDBOX_RESUME_TEST_SEED
// when set (a value that is not a decimal uint64 fails t), else def. It
// logs the seed and how to replay it.
func Seed(t testing.TB, def uint64) uint64 {
	t.Helper()
	seed := def
	if v := os.Getenv(EnvSeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvSeed, v, errors.Unwrap(err))
		}
		seed = n
	}
	t.Logf("random seed %d (replay: %s=%d go test -run '^%s$')", seed, EnvSeed, seed, t.Name())
	return seed
}

// RandomSeed returns a fresh seed (for Seed's def when each run should
// try new choices).
func RandomSeed() uint64 { return rand.Uint64() }

// optionalLogged holds the test name and tool pairs OptionalPath logged.
var optionalLogged sync.Map

// OptionalPath is LookPath for a tool that only part of a test needs: when
// it is missing it returns "" locally (logged once per test, and the test
// runs without that part) and fails t under CI=true.
func OptionalPath(t testing.TB, name, hint string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if CI() {
			t.Fatalf("CI=true, and a prerequisite is missing: %s is not on PATH (%s)", name, hint)
		}
		if _, logged := optionalLogged.LoadOrStore(t.Name()+"\x00"+name, true); !logged {
			t.Logf("%s is not on PATH (%s): the parts that need it are left out; under CI=true this fails", name, hint)
		}
		return ""
	}
	return p
}
