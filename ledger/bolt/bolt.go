// Package bolt is the default run ledger (docs/design.md "The run
// ledger"): one go.etcd.io/bbolt file per host, default
// ledger.DefaultPath (/var/lib/sandbox-resume/ledger.db).
//
// bbolt holds an exclusive file lock while a database is open for writing,
// so the ledger never keeps it open: every transition opens the file, runs
// one bbolt Update — read the record, ledger.Apply, write it if it changed —
// and closes it. Nothing is held between calls, in particular never across
// materialization. Opening waits for the lock at most the ledger's timeout
// (--ledger-timeout, default ledger.DefaultTimeout) and then fails with an
// error matching ErrLocked that names the file. Get and List open the file
// read-only (a shared lock); a missing file is an empty ledger, and nothing
// is created until a transition writes: then the file is created with mode
// 0600, and its directory, when missing, with mode 0700.
//
// Records are stored as their JSON form (ledger.Record, encoding/json) in
// the bucket "runs" under the run id; a bucket "meta" holds the format,
// "sandbox.ledger/1". A record that does not decode fails the transition
// (fail closed), naming the file and the run.
//
// The ledger never looks at processes or containers: the caller judges a
// resuming holder gone and passes it as ledger.ClaimRequest.GoneHolder; the
// claim succeeds only if the record still names exactly that holder,
// compared inside the transaction. A Claim's Lost channel is never closed:
// a claim lost to an operator's Discard with force or to another claim over
// a holder judged gone shows when its Live fails with
// ledger.ErrClaimConflict.
package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// Format is the value of the "format" key of the "meta" bucket of a ledger
// file this package writes; a file with another format is refused.
const Format = "sandbox.ledger/1"

var (
	bucketRuns = []byte("runs")
	bucketMeta = []byte("meta")
	keyFormat  = []byte("format")
)

// ErrLocked is matched by the error of a call that could not get the
// ledger file's lock within the timeout (another process holds it).
var ErrLocked = errors.New("ledger file locked")

// Option configures a Ledger.
type Option func(*Ledger)

// WithTimeout sets how long a call waits for the ledger file's lock (and
// for other calls of this process on the same file): --ledger-timeout.
// The default is ledger.DefaultTimeout (10 s); d ≤ 0 keeps the default. A
// context deadline that ends sooner wins.
func WithTimeout(d time.Duration) Option {
	return func(l *Ledger) {
		if d > 0 {
			l.timeout = d
		}
	}
}

// WithClock sets the clock stamping each record's Updated; the default is
// time.Now.
func WithClock(now func() time.Time) Option {
	return func(l *Ledger) { l.now = now }
}

// Ledger is the bbolt run ledger on one file. It is safe for concurrent
// use, within a process (calls on one file are serialized in-process
// before they take the file lock) and across processes (the file lock).
type Ledger struct {
	path    string
	timeout time.Duration
	now     func() time.Time
	sem     chan struct{} // this process's turn on path

	mu     sync.Mutex
	closed bool
}

var _ ledger.Ledger = (*Ledger)(nil)

// sems holds one semaphore per cleaned absolute path, so that Ledgers of
// one process on one file wait for each other without polling the lock.
var sems sync.Map // string → chan struct{}

// New returns the ledger on the file at path ("" is ledger.DefaultPath).
// It opens nothing: each call opens and closes the file.
func New(path string, opts ...Option) *Ledger {
	if path == "" {
		path = ledger.DefaultPath
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	path = filepath.Clean(path)
	sem, _ := sems.LoadOrStore(path, make(chan struct{}, 1))
	l := &Ledger{path: path, timeout: ledger.DefaultTimeout, now: time.Now, sem: sem.(chan struct{})}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Path returns the ledger file's path (absolute).
func (l *Ledger) Path() string { return l.path }

// Close makes every later call fail. It holds nothing open.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return nil
}

func (l *Ledger) errorf(format string, args ...any) error {
	return fmt.Errorf("ledger %s: "+format, append([]any{l.path}, args...)...)
}

// deadline returns how long this call may wait: the timeout, or less when
// ctx ends sooner.
func (l *Ledger) deadline(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, l.errorf("%w", err)
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return time.Time{}, l.errorf("closed")
	}
	end := time.Now().Add(l.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	return end, nil
}

// open opens the file, waiting for its lock until end. readOnly opens it
// with a shared lock and never creates it; otherwise the file and its
// directory are created when missing.
func (l *Ledger) open(end time.Time, readOnly bool) (*bbolt.DB, error) {
	wait := time.Until(end)
	if wait <= 0 {
		return nil, l.errorf("%w: no time left to wait for the lock", ErrLocked)
	}
	if !readOnly {
		if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
			return nil, l.errorf("creating its directory: %w", err)
		}
	}
	db, err := bbolt.Open(l.path, 0o600, &bbolt.Options{Timeout: wait, ReadOnly: readOnly})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, l.errorf("%w by another process (waited %s)", ErrLocked, wait.Round(time.Millisecond))
	}
	if err != nil {
		return nil, l.errorf("%w", err)
	}
	return db, nil
}

// turn takes this process's turn on the file, waiting until end or ctx.
func (l *Ledger) turn(ctx context.Context, end time.Time) (release func(), err error) {
	wait := time.Until(end)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case l.sem <- struct{}{}:
		return func() { <-l.sem }, nil
	case <-ctx.Done():
		return nil, l.errorf("%w", ctx.Err())
	case <-timer.C:
		return nil, l.errorf("%w by this process (waited %s)", ErrLocked, wait.Round(time.Millisecond))
	}
}

// exists reports whether the file exists with content (a file bbolt
// created but never initialized, size 0, is an empty ledger).
func (l *Ledger) exists() (bool, error) {
	fi, err := os.Stat(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, l.errorf("%w", err)
	}
	return fi.Size() > 0, nil
}

func checkFormat(tx *bbolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if tx.Bucket(bucketRuns) != nil {
			return fmt.Errorf("no %q in bucket %q", keyFormat, bucketMeta)
		}
		return nil
	}
	if f := meta.Get(keyFormat); !bytes.Equal(f, []byte(Format)) {
		return fmt.Errorf("format %q, this ledger reads %q", f, Format)
	}
	return nil
}

// decode decodes the stored record of run.
func decode(run string, v []byte) (ledger.Record, error) {
	var rec ledger.Record
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return ledger.Record{}, fmt.Errorf("record of run %q does not decode: %w", run, err)
	}
	if dec.More() {
		return ledger.Record{}, fmt.Errorf("record of run %q: data after the record", run)
	}
	if rec.Run != run {
		return ledger.Record{}, fmt.Errorf("record under run %q names run %q", run, rec.Run)
	}
	if !rec.State.Valid() {
		return ledger.Record{}, fmt.Errorf("record of run %q: state %q", run, rec.State)
	}
	return rec, nil
}

// view runs fn in a read-only transaction; fn is not called when the file
// does not exist (an empty ledger).
func (l *Ledger) view(ctx context.Context, fn func(runs *bbolt.Bucket) error) error {
	end, err := l.deadline(ctx)
	if err != nil {
		return err
	}
	if ok, err := l.exists(); err != nil || !ok {
		return err
	}
	db, err := l.open(end, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed since the Stat
	}
	if err != nil {
		return err
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		if err := checkFormat(tx); err != nil {
			return err
		}
		return fn(tx.Bucket(bucketRuns))
	})
	if err != nil {
		return l.errorf("%w", err)
	}
	return nil
}

// Get returns run's record, a purged one included; a run without a record
// (or a missing file) is ledger.ErrNotFound. It opens the file read-only.
func (l *Ledger) Get(ctx context.Context, run string) (ledger.Record, error) {
	var rec ledger.Record
	found := false
	err := l.view(ctx, func(runs *bbolt.Bucket) error {
		if runs == nil {
			return nil
		}
		v := runs.Get([]byte(run))
		if v == nil {
			return nil
		}
		var err error
		rec, err = decode(run, v)
		found = err == nil
		return err
	})
	if err != nil {
		return ledger.Record{}, err
	}
	if !found {
		return ledger.Record{}, l.errorf("run %q: %w", run, ledger.ErrNotFound)
	}
	return rec, nil
}

// List returns every record, purged ones included, sorted by run id; a
// missing file is an empty ledger. It opens the file read-only.
func (l *Ledger) List(ctx context.Context) ([]ledger.Record, error) {
	var out []ledger.Record
	err := l.view(ctx, func(runs *bbolt.Bucket) error {
		if runs == nil {
			return nil
		}
		return runs.ForEach(func(k, v []byte) error {
			rec, err := decode(string(k), v)
			if err != nil {
				return err
			}
			out = append(out, rec)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ledger.Record) int { return strings.Compare(a.Run, b.Run) })
	return out, nil
}

// testHookBeforeCommit, when set (tests only), runs inside the write
// transaction after the record is put and before the commit.
var testHookBeforeCommit func(run string)

// update runs one transition: open, one Update (read, Apply with the
// ClaimOp's judgement when op is a claim, put), close. It returns the record
// found before and the record after. When the file does not exist and the
// transition would not write, nothing is created.
func (l *Ledger) update(ctx context.Context, op ledger.Op) (before *ledger.Record, after ledger.Record, err error) {
	end, err := l.deadline(ctx)
	if err != nil {
		return nil, ledger.Record{}, err
	}
	ok, err := l.exists()
	if err != nil {
		return nil, ledger.Record{}, err
	}
	if !ok {
		// No record anywhere: decide before creating anything.
		next, changed, err := ledger.Apply(nil, withJudgement(op, nil), l.now())
		if err != nil || !changed {
			return nil, next, err
		}
	}
	release, err := l.turn(ctx, end)
	if err != nil {
		return nil, ledger.Record{}, err
	}
	defer release()
	db, err := l.open(end, false)
	if err != nil {
		return nil, ledger.Record{}, err
	}
	var refusal error
	txErr := db.Update(func(tx *bbolt.Tx) error {
		if err := checkFormat(tx); err != nil {
			return err
		}
		runs := tx.Bucket(bucketRuns)
		run := op.RunID()
		if runs != nil {
			if v := runs.Get([]byte(run)); v != nil {
				rec, err := decode(run, v)
				if err != nil {
					return err
				}
				before = &rec
			}
		}
		next, changed, err := ledger.Apply(before, withJudgement(op, before), l.now())
		after = next
		if err != nil {
			refusal = err
			return err // roll back: nothing to write
		}
		if !changed {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keyFormat, []byte(Format)); err != nil {
			return err
		}
		if runs, err = tx.CreateBucketIfNotExists(bucketRuns); err != nil {
			return err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return err
		}
		if err := runs.Put([]byte(run), b); err != nil {
			return err
		}
		if testHookBeforeCommit != nil {
			testHookBeforeCommit(run)
		}
		return nil
	})
	closeErr := db.Close()
	switch {
	case refusal != nil:
		return before, after, refusal
	case txErr != nil:
		return nil, ledger.Record{}, l.errorf("%s of run %q: %w", ledger.OpName(op), op.RunID(), txErr)
	case closeErr != nil:
		return nil, ledger.Record{}, l.errorf("closing after %s of run %q: %w", ledger.OpName(op), op.RunID(), closeErr)
	}
	return before, after, nil
}

// withJudgement fills in a claim's HolderGone: the caller's judgement,
// compared with the record inside the transaction.
func withJudgement(op ledger.Op, cur *ledger.Record) ledger.Op {
	if c, ok := op.(ledger.ClaimOp); ok {
		c.HolderGone = ledger.JudgedGone(c.GoneHolder, cur)
		return c
	}
	return op
}

// Suspended is ledger.Ledger.Suspended, in one transaction.
func (l *Ledger) Suspended(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
	_, rec, err := l.update(ctx, req)
	return rec, err
}

// Claim is ledger.Ledger.Claim, in one transaction; req.GoneHolder is the
// caller's judgement, compared with the record's holder inside it. The
// claim's Lost channel is never closed.
func (l *Ledger) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	before, rec, err := l.update(ctx, ledger.ClaimOp{ClaimRequest: req})
	if err != nil {
		return nil, err
	}
	return ledger.NewClaim(l, rec, ledger.Replaced(before), nil), nil
}

// Live is ledger.Ledger.Live, in one transaction.
func (l *Ledger) Live(ctx context.Context, run string, fence uint64, container ledger.Container) (ledger.Record, error) {
	_, rec, err := l.update(ctx, ledger.LiveOp{Run: run, Fence: fence, Container: container})
	return rec, err
}

// Release is ledger.Ledger.Release, in one transaction.
func (l *Ledger) Release(ctx context.Context, run string, fence uint64) (ledger.Record, error) {
	_, rec, err := l.update(ctx, ledger.ReleaseOp{Run: run, Fence: fence})
	return rec, err
}

// Discard is ledger.Ledger.Discard, in one transaction.
func (l *Ledger) Discard(ctx context.Context, run string, force bool) (ledger.Record, error) {
	_, rec, err := l.update(ctx, ledger.DiscardOp{Run: run, Force: force})
	return rec, err
}

// Purge is ledger.Ledger.Purge, in one transaction.
func (l *Ledger) Purge(ctx context.Context, run string) (ledger.Record, error) {
	_, rec, err := l.update(ctx, ledger.PurgeOp{Run: run})
	return rec, err
}

// HandedOff is ledger.Ledger.HandedOff, in one transaction.
func (l *Ledger) HandedOff(ctx context.Context, req ledger.HandOffRequest) (ledger.Record, error) {
	_, rec, err := l.update(ctx, req)
	return rec, err
}

// Received is ledger.Ledger.Received, in one transaction.
func (l *Ledger) Received(ctx context.Context, req ledger.ReceiveRequest) (ledger.Record, error) {
	_, rec, err := l.update(ctx, req)
	return rec, err
}

// Recalled is ledger.Ledger.Recalled, in one transaction.
func (l *Ledger) Recalled(ctx context.Context, req ledger.RecallRequest) (ledger.Record, error) {
	_, rec, err := l.update(ctx, req)
	return rec, err
}

// Unwound is ledger.Ledger.Unwound, in one transaction.
func (l *Ledger) Unwound(ctx context.Context, req ledger.UnwindRequest) (ledger.Record, error) {
	_, rec, err := l.update(ctx, req)
	return rec, err
}

// Repinned is ledger.Ledger.Repinned, in one transaction.
func (l *Ledger) Repinned(ctx context.Context, req ledger.RepinRequest) (ledger.Record, error) {
	_, rec, err := l.update(ctx, req)
	return rec, err
}
