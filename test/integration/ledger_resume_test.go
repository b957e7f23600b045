package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// runsJSON is `runs --output json`.
type runsJSON struct {
	Runs []ledger.Record `json:"runs"`
}

// TestLedgerResumeTwice: resuming one generation twice is 8 naming the
// incarnation (its container and host), on the CLI with the bolt ledger;
// `runs` shows the record live with its fence; discarding the live run
// needs --force, deletes the stopped incarnation and the run lease, and
// `runs` then shows the tombstone (an unknown run: an empty list).
func TestLedgerResumeTwice(t *testing.T) {
	d := harness.Start(t, "ltwice")
	s := suspendRun(t, d, "twice-1")
	code, v := resumeCLI(t, s, "--container", "twice-a")
	if code != 0 || v.Run != s.run || v.Generation != 1 || v.Fence != 1 || v.Container != "twice-a" {
		t.Fatalf("first resume: exit %d run %q generation %d fence %d container %q: %s", code, v.Run, v.Generation, v.Fence, v.Container, failDetail(v))
	}
	host, err := d.Connect(t, "").Host(d.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	code, v = resumeCLI(t, s, "--container", "twice-b")
	if code != 8 || v.Class != resume.ClassClaimConflict || !strings.Contains(failDetail(v), `container "twice-a"`) || !strings.Contains(failDetail(v), host.ID) {
		t.Errorf("second resume: exit %d %s; want 8 naming twice-a and host %s", code, failDetail(v), host.ID)
	}
	if n := incarnations(t, d, s.run); n != 1 {
		t.Errorf("%d incarnations, want 1", n)
	}

	var runs runsJSON
	mustCLI(t, d, "", &runs, "runs", "--run", s.run)
	if len(runs.Runs) != 1 || runs.Runs[0].State != ledger.StateLive || runs.Runs[0].Fence != 1 ||
		runs.Runs[0].Holder == nil || runs.Runs[0].Holder.ID != "twice-a" || runs.Runs[0].Holder.Host != host.ID {
		t.Errorf("runs --run %s: %+v", s.run, runs)
	}
	mustCLI(t, d, "", &runs, "runs", "--run", "no-such-run")
	if runs.Runs == nil || len(runs.Runs) != 0 {
		t.Errorf("runs of an unknown run: %+v, want an empty list", runs)
	}

	if code, out, _ := srcli(t, d, "", "discard", "--run", s.run); code != 8 {
		t.Errorf("discard of a live run without --force: exit %d %s, want 8", code, out)
	}
	var res resume.DiscardResult
	mustCLI(t, d, "", &res, "discard", "--run", s.run, "--force")
	if res.State != ledger.StateDiscarded || strings.Join(res.Deleted, ",") != "twice-a,"+snapshot.RunLease(s.run) {
		t.Errorf("discard --force: %+v; want discarded, the incarnation and the run lease deleted", res)
	}
	mustCLI(t, d, "", &runs, "runs")
	if len(runs.Runs) != 1 || runs.Runs[0].State != ledger.StateDiscarded || runs.Runs[0].Fence != 1 {
		t.Errorf("runs after discard: %+v", runs)
	}
	mustCLI(t, d, "", &res, "discard", "--run", s.run, "--purge")
	mustCLI(t, d, "", &runs, "runs")
	if res.State != ledger.StatePurged || len(runs.Runs) != 0 {
		t.Errorf("after --purge: %+v, runs %+v", res, runs)
	}
}

// TestLedgerDiscardedArchive: a run exported before `discard` and imported
// after it does not resume: 9, superseded, naming the discard.
func TestLedgerDiscardedArchive(t *testing.T) {
	d := harness.Start(t, "ldisc")
	s := suspendRun(t, d, "disc-1")
	archive := filepath.Join(t.TempDir(), "run.tar")
	mustCLI(t, d, "", nil, "export", "--ref", s.ref, "--out", archive)
	var res resume.DiscardResult
	mustCLI(t, d, "", &res, "discard", "--run", s.run)
	if res.State != ledger.StateDiscarded {
		t.Fatalf("discard: %+v", res)
	}
	imported := filepath.Join(t.TempDir(), "imported.json")
	mustCLI(t, d, "", nil, "import", archive, "--trust", s.pub, "--out", imported)
	s2 := *s
	s2.ref = imported
	code, v := resumeCLI(t, &s2)
	if code != 9 || v.Class != resume.ClassSuperseded || !strings.Contains(failDetail(v), "discarded") {
		t.Fatalf("resume of the discarded run's archive: exit %d %s; want 9", code, failDetail(v))
	}
	if c := v.Check(resume.CheckSnapshot); c == nil || c.Result != resume.ResultPass {
		t.Errorf("snapshot check %+v: the import brought the content back, the ledger refuses", c)
	}
	if n := incarnations(t, d, s.run); n != 0 {
		t.Errorf("%d incarnations", n)
	}
}

// TestLedgerLocked: a ledger file locked by another process makes resume
// (and resume --check, and runs) fail with exit 1 within --ledger-timeout,
// naming the file; nothing is created in containerd.
func TestLedgerLocked(t *testing.T) {
	d := harness.Start(t, "llock")
	s := suspendRun(t, d, "lock-1")
	path := ledgerPath(d.Address, d.Namespace)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, args := range [][]string{
		{"--ledger-timeout", "1s", "--container", "lock-a"},
		{"--ledger-timeout", "1s", "--check"},
	} {
		start := time.Now()
		code, v := resumeCLI(t, s, args...)
		took := time.Since(start)
		if code != 1 || v.Class != resume.ClassInternal || !strings.Contains(failDetail(v), path) || !strings.Contains(failDetail(v), "locked") {
			t.Errorf("%v: exit %d %s; want 1 naming %s as locked", args, code, failDetail(v), path)
		}
		if took > 8*time.Second {
			t.Errorf("%v took %s with --ledger-timeout 1s", args, took)
		}
	}
	if n := incarnations(t, d, s.run); n != 0 {
		t.Errorf("%d incarnations made while the ledger was locked", n)
	}
	// runs opens the file read-only: a writer's lock blocks it too.
	code, out, _ := srcli(t, d, "", "runs", "--ledger-timeout", "1s")
	var je struct {
		Error struct{ Class, Message string } `json:"error"`
	}
	if err := json.Unmarshal(out, &je); code != 1 || err != nil || je.Error.Class != "internal" || !strings.Contains(je.Error.Message, path) {
		t.Errorf("runs under a lock: exit %d %s", code, out)
	}
}
