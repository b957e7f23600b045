package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/ledger/bolt"
)

// runReal runs the CLI over the real app (newApp: the real ledger
// backends), as the binary does, and returns the exit code and streams.
func runReal(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// jsonErrorOf decodes the {"error": …} object of a failed command.
func jsonErrorOf(t *testing.T, stdout string) jsonError {
	t.Helper()
	var out struct {
		Error jsonError `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("stdout is not one JSON error object: %v\n%s", err, stdout)
	}
	return out.Error
}

// TestLedgerFileRefusals: docs/design.md "Hardening", "Ledger file": a
// 0-byte or corrupt ledger file is exit 1 naming the file with one JSON
// error (never a fresh ledger, never a panic); a file writable by others
// is 1 unless --ledger-insecure-mode.
func TestLedgerFileRefusals(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"runs", "--ledger", empty, "--output", "json"},
		{"runs", "--run", "r", "--ledger", empty, "--output", "json"},
	} {
		code, stdout, stderr := runReal(t, args...)
		if code != 1 {
			t.Errorf("%q: exit %d, want 1\n%s%s", args, code, stdout, stderr)
			continue
		}
		if je := jsonErrorOf(t, stdout); je.Class != "internal" || !strings.Contains(je.Message, empty) {
			t.Errorf("%q: error %+v, want class internal naming %s", args, je, empty)
		}
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Errorf("the 0-byte ledger was written: %v %v", fi, err)
	}

	path := filepath.Join(dir, "ledger.db")
	if _, err := bolt.New(path).Suspended(context.Background(), ledger.SuspendRequest{Run: "r", Generation: 1,
		Ref: digest.FromString("g1"), Container: ledger.Container{Host: "h", Namespace: "n", ID: "c"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runReal(t, "runs", "--ledger", path, "--output", "json")
	if je := jsonErrorOf(t, stdout); code != 1 || !strings.Contains(je.Message, "0666") || !strings.Contains(je.Message, "--ledger-insecure-mode") {
		t.Errorf("runs on a 0666 ledger: exit %d, %+v, want 1 naming the mode and the flag (%s)", code, je, stderr)
	}
	code, stdout, stderr = runReal(t, "runs", "--ledger", path, "--ledger-insecure-mode", "--output", "json")
	if code != 0 || !strings.Contains(stdout, `"run": "r"`) {
		t.Errorf("runs --ledger-insecure-mode: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestBoundedReads: docs/design.md "Hardening", "Bounded reads": every
// input file named on the command line — --config, --ref, --spec, --key,
// --trust, manifest PATH — is read through internal/inputfile: /dev/zero
// (read to exhaustion before) and a file over the cap are exit 2 naming
// the file, at once.
func TestBoundedReads(t *testing.T) {
	ref, cfg, pub := resumeFiles(t)
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, bytes.Repeat([]byte(" "), 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"/dev/zero", big} {
		for _, args := range [][]string{
			{"manifest", bad},
			{"lint", bad},
			{"resume", "--check", "--ref", bad, "--config", cfg, "--trust", pub},
			{"resume", "--check", "--ref", ref, "--config", bad, "--trust", pub},
			{"resume", "--check", "--ref", ref, "--config", cfg, "--trust", bad},
			{"resume", "--ref", ref, "--config", cfg, "--trust", pub, "--spec", bad},
			{"sign", "--key", bad, cfg},
			{"verify", "--trust", bad, ref},
			{"inspect", bad},
		} {
			args := append(args, "--output", "json")
			type res struct {
				code           int
				stdout, stderr string
			}
			done := make(chan res, 1)
			go func() {
				code, stdout, stderr := resumeRun(t, args...)
				done <- res{code, stdout, stderr}
			}()
			select {
			case r := <-done:
				if r.code != 2 || !strings.Contains(r.stdout, bad) {
					t.Errorf("%q: exit %d, want 2 naming %s\n%s%s", args, r.code, bad, r.stdout, r.stderr)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%q: still reading after 20 s", args)
			}
		}
	}
}

// TestKeyModeRefused: docs/design.md "Hardening", "Key files": a private
// key group or other may read is refused (2, as ssh does), naming the mode
// and the chmod 600 fix; after chmod 600 it signs.
func TestKeyModeRefused(t *testing.T) {
	_, cfg, pub := resumeFiles(t)
	key := strings.TrimSuffix(pub, ".pub") + ".key"
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := resumeRun(t, "sign", "--key", key, cfg)
		if want := fmt.Sprintf("mode %04o", mode); code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "chmod 600") || stdout != "" {
			t.Errorf("sign with a %04o key: exit %d, stdout %q, stderr %q; want 2 naming %q and chmod 600", mode, code, stdout, stderr, want)
		}
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := resumeRun(t, "sign", "--key", key, cfg); code != 0 {
		t.Errorf("sign with a 0600 key: exit %d: %s", code, stderr)
	}
}

// TestOutputErrorIsOne: docs/design.md "Hardening": an output write error
// (stdout on /dev/full, or closed) is exit 1 naming it on stderr, never
// the command's exit 0 with its result lost.
func TestOutputErrorIsOne(t *testing.T) {
	_, cfg, _ := resumeFiles(t)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	closed, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	for name, stdout := range map[string]io.Writer{"/dev/full": full, "a closed file": closed} {
		for _, args := range [][]string{
			{"manifest", cfg},
			{"manifest", "--output", "json", cfg},
			{"--version"},
			{"manifest", "/nonexistent.json", "--output", "json"}, // the error object is lost too
		} {
			var stderr bytes.Buffer
			code := run(context.Background(), args, strings.NewReader(""), stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), "write output") {
				t.Errorf("%q with stdout %s: exit %d, stderr %q; want 1 naming the write error", args, name, code, stderr.String())
			}
		}
	}
}

// TestLedgerCorruptPageIsOne: a corrupt bbolt page made `runs` panic (exit
// 2, no JSON); now every corruption is exit 0 or 1 with one JSON object,
// and a bbolt panic is exit 1 naming the file.
func TestLedgerCorruptPageIsOne(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	l := bolt.New(good)
	for _, run := range []string{"a", "b", "c"} {
		if _, err := l.Suspended(context.Background(), ledger.SuspendRequest{Run: run, Generation: 1,
			Ref: digest.FromString(run), Container: ledger.Container{Host: "h", Namespace: "n", ID: run}}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	panicked := 0
	for pg := 2; pg*4096 < len(b); pg++ {
		bad := append([]byte(nil), b...)
		for i := range 8 {
			bad[pg*4096+8+i] = 0xff // the page's flags and count
		}
		path := filepath.Join(dir, fmt.Sprintf("p%d.db", pg))
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runReal(t, "runs", "--ledger", path, "--output", "json")
		switch code {
		case 0:
		case 1:
			je := jsonErrorOf(t, stdout)
			if !strings.Contains(je.Message, path) {
				t.Errorf("page %d: error %q does not name %s", pg, je.Message, path)
			}
			if strings.Contains(je.Message, "panicked") {
				panicked++
			}
		default:
			t.Errorf("page %d corrupt: exit %d\n%s%s", pg, code, stdout, stderr)
		}
	}
	if panicked == 0 {
		t.Fatal("no corrupt page reached a bbolt panic: the test proves nothing")
	}
}
