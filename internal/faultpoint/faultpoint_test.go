package faultpoint

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestReachOtherStep: a step other than the one named returns at once.
func TestReachOtherStep(t *testing.T) {
	t.Setenv(Env, "some-other-step")
	start := time.Now()
	Reach("a-step")
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Reach of a step not named held the process for %s", d)
	}
}

// TestReachHolds runs this test binary as a child that reaches the named
// step: it must print Line on stderr and then still be running (held).
func TestReachHolds(t *testing.T) {
	if os.Getenv("FAULTPOINT_CHILD") == "1" {
		Reach("held-step")
		os.Exit(3) // only after Sleep: the parent kills it before
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReachHolds$")
	cmd.Env = append(os.Environ(), "FAULTPOINT_CHILD=1", Env+"=held-step")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "fault point") {
				line <- sc.Text()
				return
			}
		}
		line <- ""
	}()
	select {
	case got := <-line:
		if want := Line("held-step", cmd.Process.Pid); got != want {
			t.Fatalf("stderr line %q, want %q", got, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the child never reported the fault point")
	}
	// Held: the child has not exited.
	done := make(chan struct{})
	go func() { cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
		t.Fatal("the child went on past the fault point instead of holding")
	case <-time.After(200 * time.Millisecond):
	}
}
