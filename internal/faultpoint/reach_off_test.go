//go:build !faultpoint

package faultpoint

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestReachIgnoredWithoutTag: in a build without the tag faultpoint (the
// shipped binary) Reach neither writes nor holds, even with Env naming the
// step. A child process (this test binary again) reaches the step with
// its stderr captured and must end normally, having written only its own
// "went on" line.
func TestReachIgnoredWithoutTag(t *testing.T) {
	if os.Getenv("FAULTPOINT_CHILD") == "1" {
		Reach("held-step")
		os.Stderr.WriteString("went on\n")
		os.Exit(0)
	}
	if Enabled {
		t.Fatal("built without the tag faultpoint, but Enabled is true")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReachIgnoredWithoutTag$")
	cmd.Env = append(os.Environ(), "FAULTPOINT_CHILD=1", Env+"=held-step")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	if got := stderr.String(); got != "went on\n" || strings.Contains(got, "fault point") {
		t.Fatalf("child stderr %q, want only %q", got, "went on\n")
	}
}
