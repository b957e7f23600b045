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
// The file rules (docs/design.md "Hardening", "Ledger file"): a new ledger
// is initialized under a temporary name created with O_EXCL and linked into
// place (a link never replaces a file that appeared meanwhile), so the path
// never holds a partial file; an existing file that is not a regular file,
// is smaller than two bbolt pages (a 0-byte file included) or that bbolt
// cannot open fails every call naming it — it is never taken for a fresh
// ledger; a panic inside bbolt (a corrupt page) is recovered into an error
// matching ErrCorrupt that names the file; a file writable by group or
// other, or owned by another uid than the process's effective uid, fails
// with ErrInsecureFile unless WithInsecureMode.
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
// errdef.ErrClaimConflict.
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
	"syscall"
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

// ErrCorrupt is matched by the error of a call on a ledger file bbolt
// cannot read: smaller than two pages, not a bbolt file, or a corrupt page
// (bbolt panicked; the panic is recovered). The error names the file.
var ErrCorrupt = errors.New("ledger file corrupt")

// ErrInsecureFile is matched by the error of a call on a ledger file that
// is writable by group or other, owned by another uid, or not a regular
// file (WithInsecureMode accepts the first two). The error names the file,
// its mode and its owner.
var ErrInsecureFile = errors.New("ledger file insecure")

// minFileSize is the size below which an existing file is refused: two
// pages of bbolt's default page size (the two meta pages every bbolt file
// starts with; a file this package creates has four pages at least).
const minFileSize = 2 * 4096

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

// WithInsecureMode accepts a ledger file writable by group or other, or
// owned by another uid (--ledger-insecure-mode); without it such a file
// fails every call with ErrInsecureFile.
func WithInsecureMode() Option {
	return func(l *Ledger) { l.insecureMode = true }
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
	// insecureMode accepts a file writable by others or owned by another
	// uid (WithInsecureMode).
	insecureMode bool

	mu     sync.Mutex
	closed bool
	// broken is the error of a panic inside bbolt.Open: every later call
	// returns it (the panicking open's mapping still holds the lock).
	broken error
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
	closed, broken := l.closed, l.broken
	l.mu.Unlock()
	if closed {
		return time.Time{}, l.errorf("closed")
	}
	if broken != nil {
		return time.Time{}, broken
	}
	end := time.Now().Add(l.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	return end, nil
}

// open opens the file, waiting for its lock until end. readOnly opens it
// with a shared lock; otherwise a missing file (and its directory) is
// created first (create). bbolt itself never creates the file: its
// OpenFile drops O_CREATE and judges the opened file (checkFile) before
// bbolt reads a byte. A panic inside bbolt.Open is recovered (ErrCorrupt).
func (l *Ledger) open(end time.Time, readOnly bool) (db *bbolt.DB, err error) {
	wait := time.Until(end)
	if wait <= 0 {
		return nil, l.errorf("%w: no time left to wait for the lock", ErrLocked)
	}
	if !readOnly {
		if err := l.create(); err != nil {
			return nil, err
		}
	}
	var opened *os.File
	defer func() {
		if p := recover(); p != nil {
			if opened != nil {
				_ = opened.Close()
			}
			// bbolt's mapping of the file outlives the panic and holds
			// the file lock with it: this Ledger fails from now on.
			db, err = nil, l.errorf("%w: bbolt panicked opening it: %v (this process keeps the file locked until it exits)", ErrCorrupt, p)
			l.mu.Lock()
			l.broken = err
			l.mu.Unlock()
		}
	}()
	openFile := func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag&^os.O_CREATE, mode)
		if err != nil {
			return nil, err
		}
		if err := l.checkFile(f); err != nil {
			_ = f.Close()
			return nil, err
		}
		opened = f
		return f, nil
	}
	db, err = bbolt.Open(l.path, 0o600, &bbolt.Options{Timeout: wait, ReadOnly: readOnly, OpenFile: openFile})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, l.errorf("%w by another process (waited %s)", ErrLocked, wait.Round(time.Millisecond))
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrInsecureFile), errors.Is(err, fs.ErrNotExist):
		return nil, l.errorf("%w", err)
	case err != nil:
		return nil, l.errorf("%w: bbolt cannot open it: %w", ErrCorrupt, err)
	}
	return db, nil
}

// checkFile judges an opened ledger file: a regular file of at least
// minFileSize bytes (ErrCorrupt otherwise), not writable by group or
// other and owned by this process's effective uid (ErrInsecureFile
// otherwise, unless WithInsecureMode). It stats the open file, so the file
// judged is the file bbolt reads.
func (l *Ledger) checkFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file (%s)", ErrInsecureFile, fi.Mode().Type())
	}
	if fi.Size() < minFileSize {
		return fmt.Errorf("%w: %d bytes, less than two bbolt pages (%d): not a ledger; it is never taken for an empty one (move it away to start a new ledger)", ErrCorrupt, fi.Size(), minFileSize)
	}
	if l.insecureMode {
		return nil
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: mode %04o is writable by group or other (chmod 600 it, or accept it with --ledger-insecure-mode)", ErrInsecureFile, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: owned by uid %d, this process runs as uid %d (chown it, or accept it with --ledger-insecure-mode)", ErrInsecureFile, st.Uid, os.Geteuid())
	}
	return nil
}

// create makes a new ledger file at the path when none exists: its
// directory (0700) when missing, then a bbolt file initialized under a
// temporary name in that directory (created with O_EXCL, mode 0600), fsynced
// by bbolt, linked to the path — a link fails rather than replace a file
// that appeared meanwhile, which is then opened and judged like any
// existing file — and the temporary name removed, the directory fsynced.
// Temporary files of a creator that was killed ("." + base + ".new-*") are
// removed on the way.
func (l *Ledger) create() error {
	if _, err := os.Lstat(l.path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return l.errorf("%w", err)
	}
	dir, base := filepath.Split(l.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return l.errorf("creating its directory: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+base+".new-*")
	if err != nil {
		return l.errorf("creating it: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Close(); err != nil {
		return l.errorf("creating it: %w", err)
	}
	db, err := bbolt.Open(tmp, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return l.errorf("initializing %s: %w", tmp, err)
	}
	if err := db.Close(); err != nil {
		return l.errorf("initializing %s: %w", tmp, err)
	}
	if err := os.Link(tmp, l.path); err != nil && !errors.Is(err, fs.ErrExist) {
		return l.errorf("creating it: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		_ = d.Close()
		if err != nil {
			return l.errorf("fsync of its directory: %w", err)
		}
	}
	return nil
}

// recovered turns a panic inside bbolt during a call on an open file (a
// corrupt page: bbolt asserts and panics) into an error matching
// ErrCorrupt that names the file, closing db so that no lock is left
// behind. It is deferred by view and update.
func (l *Ledger) recovered(db **bbolt.DB, err *error) {
	p := recover()
	if p == nil {
		return
	}
	if *db != nil {
		func() {
			defer func() { _ = recover() }()
			_ = (*db).Close()
		}()
	}
	*err = l.errorf("%w: bbolt panicked reading it: %v", ErrCorrupt, p)
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

// exists reports whether something exists at the path; whether it is a
// ledger is judged when it is opened (checkFile): a 0-byte file is not an
// empty ledger.
func (l *Ledger) exists() (bool, error) {
	_, err := os.Lstat(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, l.errorf("%w", err)
	}
	return true, nil
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
func (l *Ledger) view(ctx context.Context, fn func(runs *bbolt.Bucket) error) (err error) {
	var db *bbolt.DB
	defer l.recovered(&db, &err)
	end, err := l.deadline(ctx)
	if err != nil {
		return err
	}
	if ok, err := l.exists(); err != nil || !ok {
		return err
	}
	db, err = l.open(end, true)
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
	var db *bbolt.DB
	defer l.recovered(&db, &err)
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
	db, err = l.open(end, false)
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
