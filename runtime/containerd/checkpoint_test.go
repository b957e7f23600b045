package containerd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/host"
)

// TestEstablishedTCP: an established connection (state 01) in a
// /proc/net/tcp-format file is refused with host.ErrCannotCheckpoint,
// naming it; listeners (0A), other states and absent files pass.
func TestEstablishedTCP(t *testing.T) {
	dir := t.TempDir()
	head := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	listen := filepath.Join(dir, "listen")
	est := filepath.Join(dir, "est")
	if err := os.WriteFile(listen, []byte(head+"   0: 00000000:1388 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0\n   1: 0100007F:1388 0100007F:A1B2 06 00000000:00000000 00:00000000 00000000     0        0 0 1 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(est, []byte(head+"   0: 0100007F:1388 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := establishedTCP(listen, filepath.Join(dir, "absent")); err != nil {
		t.Fatalf("a listener and a TIME_WAIT entry: %v", err)
	}
	err := establishedTCP(listen, est)
	if !errors.Is(err, host.ErrCannotCheckpoint) || !strings.Contains(err.Error(), "0100007F:1388 → 0100007F:A1B2") {
		t.Fatalf("an established connection: %v, want host.ErrCannotCheckpoint naming it", err)
	}
}
