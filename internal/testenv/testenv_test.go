package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how a helper ended the test
// instead of ending it (Skipf and Fatalf stop the helper with a panic, as
// runtime.Goexit would stop the test).
type recorder struct {
	testing.TB
	ended string // "skip: …" or "fatal: …"
	logs  []string
}

type stop struct{}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return "TestX" }
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Skipf(format string, args ...any) {
	r.ended = "skip: " + fmt.Sprintf(format, args...)
	panic(stop{})
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.ended = "fatal: " + fmt.Sprintf(format, args...)
	panic(stop{})
}

// call runs f against a recorder and returns it.
func call(t *testing.T, f func(tb testing.TB)) *recorder {
	t.Helper()
	r := &recorder{TB: t}
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(stop); !ok {
					panic(v)
				}
			}
		}()
		f(r)
	}()
	return r
}

func TestMissingSkipsLocallyFailsUnderCI(t *testing.T) {
	for _, c := range []struct {
		ci, want string
	}{
		{"", "skip: "},
		{"false", "skip: "},
		{"1", "skip: "}, // only "true" counts, as the contract says
		{"true", "fatal: "},
	} {
		t.Setenv(EnvCI, c.ci)
		r := call(t, func(tb testing.TB) { Missing(tb, "the %s tool", "frob") })
		if !strings.HasPrefix(r.ended, c.want) || !strings.Contains(r.ended, "the frob tool") {
			t.Errorf("CI=%q: Missing ended the test with %q, want %q… naming the tool", c.ci, r.ended, c.want)
		}
	}
}

func TestLookPath(t *testing.T) {
	t.Setenv(EnvCI, "true")
	if r := call(t, func(tb testing.TB) { LookPath(tb, "sandbox-resume-no-such-tool", "make deps") }); !strings.HasPrefix(r.ended, "fatal: ") || !strings.Contains(r.ended, "make deps") {
		t.Errorf("missing tool under CI=true: %q", r.ended)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Dir(self))
	var got string
	if r := call(t, func(tb testing.TB) { got = LookPath(tb, filepath.Base(self), "") }); r.ended != "" || got != self {
		t.Errorf("LookPath of a present program: %q, ended %q", got, r.ended)
	}
}

func TestSharedDir(t *testing.T) {
	t.Setenv(EnvCI, "")
	dir := t.TempDir()
	t.Setenv(EnvShared, dir)
	if d, err := SharedDir(); err != nil || d != dir {
		t.Errorf("SharedDir with $%s: %q, %v", EnvShared, d, err)
	}
	t.Setenv(EnvShared, filepath.Join(dir, "none"))
	if _, err := SharedDir(); err == nil {
		t.Error("SharedDir of a missing folder: no error")
	}
	if HasShared() {
		t.Error("HasShared with the folder missing and CI unset")
	}
	if r := call(t, func(tb testing.TB) { Shared(tb) }); !strings.HasPrefix(r.ended, "skip: ") || !strings.Contains(r.ended, EnvShared) {
		t.Errorf("Shared of a missing folder: %q", r.ended)
	}
	t.Setenv(EnvCI, "true")
	if !HasShared() {
		t.Error("HasShared under CI=true: false (Shared must get the chance to fail)")
	}
	if r := call(t, func(tb testing.TB) { Shared(tb) }); !strings.HasPrefix(r.ended, "fatal: ") {
		t.Errorf("Shared of a missing folder under CI=true: %q", r.ended)
	}
}

func TestModuleRoot(t *testing.T) {
	if _, err := os.Stat(filepath.Join(ModuleRoot(), "go.mod")); err != nil {
		t.Fatal(err)
	}
}

func TestSeed(t *testing.T) {
	t.Setenv(EnvSeed, "")
	r := call(t, func(tb testing.TB) {
		if s := Seed(tb, 42); s != 42 {
			t.Errorf("Seed without $%s = %d, want the default 42", EnvSeed, s)
		}
	})
	if len(r.logs) != 1 || !strings.Contains(r.logs[0], "42") || !strings.Contains(r.logs[0], EnvSeed+"=42") {
		t.Errorf("the seed is not logged with how to replay it: %q", r.logs)
	}
	t.Setenv(EnvSeed, "7")
	call(t, func(tb testing.TB) {
		if s := Seed(tb, 42); s != 7 {
			t.Errorf("Seed with $%s=7 = %d", EnvSeed, s)
		}
	})
	t.Setenv(EnvSeed, "x")
	if r := call(t, func(tb testing.TB) { Seed(tb, 42) }); !strings.HasPrefix(r.ended, "fatal: ") {
		t.Errorf("a malformed seed does not fail: %q", r.ended)
	}
}
