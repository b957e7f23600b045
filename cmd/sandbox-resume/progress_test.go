package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
)

// TestMoveProgressNotTerminal: with stderr a buffer, a regular file or a
// pipe, moveProgress gives no option and its finish writes nothing.
func TestMoveProgressNotTerminal(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var buf bytes.Buffer
	for name, w := range map[string]interface{ Write([]byte) (int, error) }{"buffer": &buf, "file": file, "pipe": pw} {
		cmd := &cobra.Command{}
		cmd.SetErr(w)
		opts, done := moveProgress(cmd)
		done()
		if len(opts) != 0 {
			t.Errorf("%s: %d progress options for a non-terminal stderr", name, len(opts))
		}
	}
	pw.Close()
	var piped bytes.Buffer
	if _, err := piped.ReadFrom(pr); err != nil {
		t.Fatal(err)
	}
	if fi, err := file.Stat(); err != nil || fi.Size() != 0 || buf.Len() != 0 || piped.Len() != 0 {
		t.Errorf("non-terminal stderr written: file %v %v, buffer %q, pipe %q", fi.Size(), err, buf.String(), piped.String())
	}
}

// TestBarProgress: the bar draws each phase's name and its byte count, a
// total exceeded by the bytes added grows (export's tar headers), and an
// unknown total draws without failing.
func TestBarProgress(t *testing.T) {
	var buf bytes.Buffer
	p := &barProgress{w: &buf}
	p.Phase("scan", 2<<20)
	p.Add(1 << 20)
	p.Add(1<<20 + 4096) // beyond the total
	p.Phase("verify diff", -1)
	p.Add(10)
	p.Phase("import", 0)
	p.finish()
	out := buf.String()
	for _, want := range []string{"scan", "verify diff", "import", "100%", "2.0/2.0 MiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar output lacks %q:\n%q", want, out)
		}
	}
	if p.total != 0 && p.total != -1 {
		t.Errorf("last phase total %d, want -1 for an unknown (0) total", p.total)
	}
	if n := strings.Count(out, "\n"); n != 3 {
		t.Errorf("%d lines ended, want one per phase (3):\n%q", n, out)
	}
}

// guardWriter fails the test when written outside the calls the test
// makes (open false): a bar drawing from a goroutine of its own.
type guardWriter struct {
	t    *testing.T
	mu   sync.Mutex
	open bool
	buf  bytes.Buffer
}

func (w *guardWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.open {
		w.t.Errorf("progress written outside Phase/Add/finish: %q", b)
	}
	return w.buf.Write(b)
}

func (w *guardWriter) set(open bool) {
	w.mu.Lock()
	w.open = open
	w.mu.Unlock()
}

// progressGoroutines returns the stacks of live goroutines running
// progressbar code.
func progressGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "schollz/progressbar") {
			found = append(found, g)
		}
	}
	return found
}

// TestBarProgressNoGoroutine: phases with an unknown total (spinners),
// one left unfinished by the next Phase, leave no goroutine behind once
// finish returns, and nothing is drawn outside the calls (under -race, a
// drawing goroutine is also a data race on the writer).
func TestBarProgressNoGoroutine(t *testing.T) {
	if g := progressGoroutines(); len(g) != 0 {
		t.Fatalf("progressbar goroutines before the test:\n%s", strings.Join(g, "\n\n"))
	}
	w := &guardWriter{t: t}
	p := &barProgress{w: w}
	call := func(f func()) {
		w.set(true)
		defer w.set(false)
		f()
	}
	call(func() { p.Phase("verify diff", -1) })
	call(func() { p.Add(10) })
	call(func() { p.Phase("import", 0) })
	call(func() { p.Add(1 << 20) })
	call(func() { p.Phase("scan", 4096) })
	call(func() { p.Add(4096) })
	call(func() { p.finish() })
	if g := progressGoroutines(); len(g) != 0 {
		t.Fatalf("%d progressbar goroutines left after finish:\n%s", len(g), strings.Join(g, "\n\n"))
	}
	if out := w.buf.String(); !strings.Contains(out, "verify diff") || !strings.Contains(out, "import") || strings.Count(out, "\n") != 3 {
		t.Errorf("bar output:\n%q", out)
	}
}
