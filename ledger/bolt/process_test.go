package bolt

// Tests across OS processes: the test binary re-executes itself with
// SANDBOX_RESUME_LEDGER_CHILD naming a child mode (see TestMain).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"
	bbolt "go.etcd.io/bbolt"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

const childEnv = "SANDBOX_RESUME_LEDGER_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// Child exit codes.
const (
	childWon      = 0
	childConflict = 8
	childFailed   = 1
)

// child runs one child mode and returns its exit code.
//
//   - "claim": print "ready", wait for a line on stdin, Claim generation 1 of
//     $RUN; print "won FENCE" (exit 0) or "conflict" (exit 8).
//   - "loop": advance the runs loop-0…loop-3 through every transition
//     forever, printing "RUN FENCE GENERATION STATE" after each committed
//     one; with $KILL_AT=K, SIGKILL itself inside the K-th write
//     transaction, after the put and before the commit.
func child(mode string) int {
	ctx := context.Background()
	l := New(os.Getenv("LEDGER"))
	switch mode {
	case "claim":
		fmt.Println("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return childFailed
		}
		c, err := l.Claim(ctx, ledger.ClaimRequest{Run: os.Getenv("RUN"), Generation: 1, Ref: childRef(1), Holder: childHolder()})
		switch {
		case err == nil:
			fmt.Printf("won %d\n", c.Fence())
			return childWon
		case errors.Is(err, errdef.ErrClaimConflict):
			fmt.Println("conflict")
			return childConflict
		}
		fmt.Fprintln(os.Stderr, err)
		return childFailed
	case "loop":
		if k, err := strconv.Atoi(os.Getenv("KILL_AT")); err == nil {
			n := 0
			testHookBeforeCommit = func(string) {
				if n++; n == k {
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {} // the signal is on its way
				}
			}
		}
		for i := 0; ; i++ {
			run := fmt.Sprintf("loop-%d", i%4)
			rec, err := step(ctx, l, run)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", run, err)
				return childFailed
			}
			fmt.Printf("%s %d %d %s\n", run, rec.Fence, rec.Generation, rec.State)
		}
	}
	fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
	return childFailed
}

func childRef(g uint64) digest.Digest { return digest.FromString(fmt.Sprintf("generation %d", g)) }

func childHolder() ledger.Holder {
	return ledger.Holder{
		Container: ledger.Container{Host: "host-a", Namespace: "ns", ID: fmt.Sprintf("inc-%d", os.Getpid())},
		PID:       os.Getpid(), Start: "start", Boot: "boot",
	}
}

// step moves run one transition further along suspend → claim → live →
// suspend … → discard → purge → suspend; a resuming record of another
// (killed) process is claimed over as gone.
func step(ctx context.Context, l *Ledger, run string) (ledger.Record, error) {
	rec, err := l.Get(ctx, run)
	if errors.Is(err, ledger.ErrNotFound) {
		rec, err = ledger.Record{State: ledger.StatePurged}, nil
	}
	if err != nil {
		return ledger.Record{}, err
	}
	me := childHolder()
	switch rec.State {
	case ledger.StatePurged:
		return l.Suspended(ctx, ledger.SuspendRequest{Run: run, Generation: 1, Ref: childRef(1), Container: ledger.Container{Host: "host-a", Namespace: "ns", ID: "runtime"}})
	case ledger.StateSuspended:
		c, err := l.Claim(ctx, ledger.ClaimRequest{Run: run, Generation: rec.Generation, Ref: rec.Ref, Holder: me})
		if err != nil {
			return ledger.Record{}, err
		}
		return c.Record(), nil
	case ledger.StateResuming:
		if rec.Holder.PID != me.PID {
			c, err := l.Claim(ctx, ledger.ClaimRequest{Run: run, Generation: rec.Generation, Ref: rec.Ref, Holder: me, GoneHolder: rec.Holder})
			if err != nil {
				return ledger.Record{}, err
			}
			return c.Record(), nil
		}
		return l.Live(ctx, run, rec.Fence, me.Container)
	case ledger.StateLive:
		if rec.Generation >= 3 {
			return l.Discard(ctx, run, true)
		}
		g := rec.Generation + 1
		return l.Suspended(ctx, ledger.SuspendRequest{Run: run, Generation: g, Ref: childRef(g), Container: rec.Holder.Container, Fence: rec.Fence})
	case ledger.StateDiscarded:
		return l.Purge(ctx, run)
	}
	return ledger.Record{}, fmt.Errorf("state %q", rec.State)
}

func childCmd(t *testing.T, mode, path string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=" + mode, "LEDGER=" + path}, env...)...)
	cmd.Stderr = &strings.Builder{}
	return cmd
}

// TestProcessesRaceClaim: N processes race Claim on one generation, released
// together; exactly one wins, every other one gets claim-conflict.
func TestProcessesRaceClaim(t *testing.T) {
	const procs, rounds = 8, 4
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l := New(path)
	for round := range rounds {
		run := fmt.Sprintf("race-%d", round)
		if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: run, Generation: 1, Ref: childRef(1), Container: ledger.Container{Host: "host-a", Namespace: "ns", ID: "runtime"}}); err != nil {
			t.Fatal(err)
		}
		cmds := make([]*exec.Cmd, procs)
		stdins := make([]io.WriteCloser, procs)
		outs := make([]*bufio.Reader, procs)
		for i := range procs {
			cmd := childCmd(t, "claim", path, "RUN="+run)
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[i], stdins[i], outs[i] = cmd, in, bufio.NewReader(out)
		}
		for i := range procs {
			if line, err := outs[i].ReadString('\n'); line != "ready\n" {
				t.Fatalf("child %d: %q %v; stderr %s", i, line, err, cmds[i].Stderr)
			}
		}
		for i := range procs {
			fmt.Fprintln(stdins[i], "go")
			stdins[i].Close()
		}
		winner := -1
		for i, cmd := range cmds {
			line, _ := outs[i].ReadString('\n')
			err := cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			switch code {
			case childWon:
				if winner >= 0 {
					t.Fatalf("round %d: processes %d and %d both won (%q)", round, winner, i, line)
				}
				winner = i
			case childConflict:
			default:
				t.Fatalf("round %d: child %d: %v, exit %d; stderr %s", round, i, err, code, cmd.Stderr)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no process won", round)
		}
		rec, err := l.Get(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != ledger.StateResuming || rec.Fence != 1 || rec.Holder.PID != cmds[winner].Process.Pid {
			t.Fatalf("round %d: %s, want resuming with fence 1 held by pid %d", round, rec, cmds[winner].Process.Pid)
		}
	}
}

// TestSIGKILLLeavesFileConsistent: a child loops through transitions and is
// SIGKILLed — at a random point of its loop, or inside a write transaction
// after the put and before the commit. After each kill the file passes
// bbolt's consistency check, every record decodes, no fence went back, no
// committed transition is lost and no uncommitted one is visible.
func TestSIGKILLLeavesFileConsistent(t *testing.T) {
	trials := 12
	if testing.Short() {
		trials = 4
	}
	sd := testenv.Seed(t, 20261201)
	rng := rand.New(rand.NewPCG(sd, 1))
	path := filepath.Join(t.TempDir(), "ledger.db")
	committed := map[string]string{} // run → last "FENCE GENERATION STATE" printed
	fences := map[string]uint64{}    // run → fence seen after the last trial
	for trial := range trials {
		selfKill := trial%2 == 1
		k := 1 + rng.IntN(30)
		desc := fmt.Sprintf("seed %d trial %d (kill at %d, inside the transaction %v)", sd, trial, k, selfKill)
		var env []string
		if selfKill {
			env = append(env, fmt.Sprintf("KILL_AT=%d", k))
		}
		cmd := childCmd(t, "loop", path, env...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		lines := 0
		var lastRun string
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), " ", 2)
			committed[f[0]], lastRun = f[1], f[0]
			if lines++; !selfKill && lines == k {
				_ = cmd.Process.Signal(syscall.SIGKILL) // and read what it printed before
			}
		}
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("%s: the child was not killed: %v; stderr %s", desc, cmd.ProcessState, cmd.Stderr)
		}
		if selfKill && lines != k-1 || !selfKill && lines < k {
			t.Fatalf("%s: the child committed %d transitions before the kill, want %d", desc, lines, k-1)
		}

		t.Logf("%s: %d transitions committed", desc, lines)
		checkFile(t, desc, path)
		recs, err := New(path).List(t.Context())
		if err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		stored := map[string]ledger.Record{}
		for _, r := range recs {
			stored[r.Run] = r
			if r.Fence < fences[r.Run] {
				t.Fatalf("%s: run %s: fence went back from %d to %d", desc, r.Run, fences[r.Run], r.Fence)
			}
			fences[r.Run] = r.Fence
		}
		for run, line := range committed {
			r, ok := stored[run]
			var fence uint64
			fmt.Sscan(line, &fence)
			if !ok || r.Fence < fence {
				t.Fatalf("%s: run %s: committed %q, stored %v (present %v)", desc, run, line, r, ok)
			}
			got := fmt.Sprintf("%d %d %s", r.Fence, r.Generation, r.State)
			// Killed inside a transaction: the uncommitted transition is not
			// visible; every record is what was last printed.
			if selfKill && got != line {
				t.Fatalf("%s: run %s: stored %q, last committed %q (the killed transaction is visible)", desc, run, got, line)
			}
			// A kill from outside may land after a commit and before its
			// line: only the run being advanced may be one step ahead.
			if !selfKill && got != line && run != nextRun(lastRun) {
				t.Fatalf("%s: run %s: stored %q, last committed %q", desc, run, got, line)
			}
		}
		// The next trial starts from what is stored: after a kill from
		// outside, the run being advanced may be one step ahead of its
		// last printed line, and a later trial must not read that as a
		// killed transaction made visible.
		for run, r := range stored {
			committed[run] = fmt.Sprintf("%d %d %s", r.Fence, r.Generation, r.State)
		}
	}
}

// nextRun is the run the loop advances after run.
func nextRun(run string) string {
	var i int
	fmt.Sscanf(run, "loop-%d", &i)
	return fmt.Sprintf("loop-%d", (i+1)%4)
}

// checkFile runs bbolt's consistency check on the file and decodes every
// record raw.
func checkFile(t *testing.T, desc, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("%s: reopen: %v", desc, err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return fmt.Errorf("bbolt check: %w", err)
		}
		if err := checkFormat(tx); err != nil {
			return err
		}
		runs := tx.Bucket(bucketRuns)
		if runs == nil {
			return nil
		}
		return runs.ForEach(func(k, v []byte) error {
			_, err := decode(string(k), v)
			return err
		})
	})
	if err != nil {
		t.Fatalf("%s: %v", desc, err)
	}
}
