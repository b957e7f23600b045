package ledgerlin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sandbox-resume/sandbox-resume/ledger/bolt"
)

// childEnv marks a re-executed test binary as one bolt client process.
const childEnv = "LEDGERLIN_BOLT_CLIENT"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(boltClient(v))
	}
	os.Exit(m.Run())
}

// boltClient is one client process: the workload on the bolt ledger file
// $LEDGERLIN_LEDGER, its history appended to $LEDGERLIN_HISTORY.
func boltClient(client string) int {
	i, err := strconv.Atoi(client)
	n, err2 := strconv.Atoi(os.Getenv("LEDGERLIN_TRANSITIONS"))
	if err != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "ledgerlin client: bad environment")
		return 2
	}
	f, err := os.OpenFile(os.Getenv("LEDGERLIN_HISTORY"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	l := bolt.New(os.Getenv("LEDGERLIN_LEDGER"))
	defer l.Close()
	Workload{Client: i, Runs: []string{"lin-0", "lin-1", "lin-2"}, Transitions: n, Seed: 20261201}.Run(context.Background(), l, NewHistory(f))
	return 0
}

// TestBoltProcessesLinearizable runs the workload from 8 client processes
// on one bolt ledger file — client 0 SIGKILLed mid-run, its call in flight
// then an unknown outcome — and checks the merged history (issue 17 item
// 5, bolt's half).
func TestBoltProcessesLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: client processes")
	}
	const clients, transitions = 8, 150
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.db")
	var cmds []*exec.Cmd
	var files []string
	for i := range clients {
		hist := filepath.Join(dir, fmt.Sprintf("history-%d.jsonl", i))
		files = append(files, hist)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			childEnv+"="+strconv.Itoa(i),
			"LEDGERLIN_LEDGER="+ledgerPath,
			"LEDGERLIN_HISTORY="+hist,
			"LEDGERLIN_TRANSITIONS="+strconv.Itoa(transitions),
		)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
		}
	})
	// Kill client 0 once it has made about a third of its calls.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(files[0])
		if bytes.Count(b, []byte("\n")) >= transitions || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	killed := Now()
	_ = cmds[0].Process.Signal(syscall.SIGKILL)
	for i, cmd := range cmds {
		err := cmd.Wait()
		if i == 0 {
			continue
		}
		if err != nil {
			t.Fatalf("client %d: %v\n%s", i, err, cmd.Stderr)
		}
	}
	var ops []Op
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		o, err := ReadOps(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		ops = append(ops, o...)
	}
	if n := InFlight(ops, killed, killed); n == 0 {
		t.Fatal("no call was in flight when client 0 was killed: the history says nothing about the kill")
	} else {
		t.Logf("%d calls in flight at the kill", n)
	}
	st := Count(ops)
	if st.Transitions < 1000 || st.Succeeded < 200 || st.Refused < 100 {
		t.Fatalf("the workload is too thin: %s", st)
	}
	start := time.Now()
	keep, _ := os.MkdirTemp("", "ledgerlin-bolt-")
	res, path, err := Check(ops, 2*time.Minute, keep)
	t.Logf("bolt, %d processes (client 0 killed): %s: %s in %s", clients, st, res, time.Since(start).Round(time.Millisecond))
	if res != porcupine.Ok {
		t.Fatalf("the bolt ledger's history is %s (visualization %s %v)", res, path, err)
	}
	os.RemoveAll(keep)
}
