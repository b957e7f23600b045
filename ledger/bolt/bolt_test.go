package bolt

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	bbolt "go.etcd.io/bbolt"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/ledger/ledgertest"
)

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Backend {
		l := New(filepath.Join(t.TempDir(), "ledger.db"))
		t.Cleanup(func() { _ = l.Close() })
		return ledgertest.CallerJudged(l)
	})
}

var (
	ref1 = digest.FromString("generation 1")
	ctr  = ledger.Container{Host: "host-a", Namespace: "ns", ID: "c1"}
)

// TestMissingFileIsEmpty: reads and transitions that write nothing create
// nothing; the first write creates the directory 0700 and the file 0600.
func TestMissingFileIsEmpty(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "var", "lib", "sandbox-resume")
	path := filepath.Join(dir, "ledger.db")
	l := New(path)
	if _, err := l.Get(ctx, "r"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Get: want ErrNotFound, got %v", err)
	}
	if recs, err := l.List(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("List: %v %v", recs, err)
	}
	if _, err := l.Release(ctx, "r", 1); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, err := l.Purge(ctx, "r"); !errors.Is(err, errdef.ErrClaimConflict) {
		t.Fatalf("Purge: want claim-conflict, got %v", err)
	}
	if _, err := l.Live(ctx, "r", 1, ctr); !errors.Is(err, errdef.ErrClaimConflict) {
		t.Fatalf("Live: want claim-conflict, got %v", err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a read or a refused transition created %s: %v", filepath.Dir(dir), err)
	}
	if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: "r", Generation: 1, Ref: ref1, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{dir: 0o700 | fs.ModeDir, filepath.Dir(dir): 0o700 | fs.ModeDir, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	// A zero-size file is not an empty ledger (docs/design.md "Hardening":
	// every record and tombstone would be gone): every call fails naming
	// it and nothing writes into it. The new ledger above never passed
	// through a zero-size file at its path (TestCreateExclusive).
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	le := New(empty)
	if _, err := le.List(ctx); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), empty) {
		t.Fatalf("List of a zero-size file: want ErrCorrupt naming it, got %v", err)
	}
	if _, err := le.Discard(ctx, "r", false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Discard into a zero-size file: want ErrCorrupt, got %v", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Fatalf("the zero-size file was written: %v %v", fi, err)
	}
}

// TestLocked: a transition waits for the file lock at most the timeout,
// then fails naming the file; a read waits for it too.
func TestLocked(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l := New(path, WithTimeout(200*time.Millisecond))
	if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: "r", Generation: 1, Ref: ref1, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	// Another holder of the lock: an open bbolt DB (flock conflicts between
	// open file descriptions, in one process as across processes).
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Discard(ctx, "r", false)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Discard while locked: want ErrLocked naming %s, got %v", path, err)
	}
	if errdef.Class(err) != nil {
		t.Fatalf("a locked ledger is not a refusal: %v", err)
	}
	if _, err := l.Get(ctx, "r"); !errors.Is(err, ErrLocked) {
		t.Fatalf("Get while locked for writing: want ErrLocked, got %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Get(ctx, "r")
	if err != nil || rec.State != ledger.StateSuspended {
		t.Fatalf("after the lock: %v %v (the refused Discard must not have written)", rec, err)
	}
	// A reader does not block readers: a read-only DB open, Get works.
	ro, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := l.Get(ctx, "r"); err != nil {
		t.Fatalf("Get beside another reader: %v", err)
	}
}

// TestCorruptRecordFailsClosed: a record that does not decode fails every
// call on it, naming the file and the run, and is never overwritten.
func TestCorruptRecordFailsClosed(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l := New(path)
	if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: "r", Generation: 1, Ref: ref1, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"run":"r","state":"suspended","fence":1,"updated":"2026-01-01T00:00:00Z","extra":1}`, `{"run":"other","state":"suspended","fence":1,"updated":"2026-01-01T00:00:00Z"}`, `{"run":"r","state":"gone","fence":1,"updated":"2026-01-01T00:00:00Z"}`, `{`} {
		db, err := bbolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketRuns).Put([]byte("r"), []byte(bad)) }); err != nil {
			t.Fatal(err)
		}
		db.Close()
		for name, call := range map[string]func() error{
			"Get":     func() error { _, err := l.Get(ctx, "r"); return err },
			"List":    func() error { _, err := l.List(ctx); return err },
			"Discard": func() error { _, err := l.Discard(ctx, "r", true); return err },
			"Claim": func() error {
				_, err := l.Claim(ctx, ledger.ClaimRequest{Run: "r", Generation: 1, Ref: ref1, Holder: ledger.Holder{Container: ctr}})
				return err
			},
		} {
			err := call()
			if err == nil || errdef.Class(err) != nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"r"`) && name != "List" {
				t.Errorf("%s of %s: want a storage error naming the file and the run, got %v", name, bad, err)
			}
		}
	}
}
