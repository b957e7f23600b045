package containerd

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

func connectErr(t *testing.T, address, namespace string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := Connect(ctx, address, namespace, WithTimeout(300*time.Millisecond))
	if err == nil {
		r.Close()
		t.Fatalf("Connect(%q, %q) succeeded", address, namespace)
	}
	return err
}

func TestConnectAbsentSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "absent.sock")
	err := connectErr(t, sock, "sandbox-resume")
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("error %v: want unavailable, naming %s, saying it does not exist", err, sock)
	}
	// unix:// prefix and a relative path name the same absolute socket.
	dir := filepath.Dir(sock)
	t.Chdir(dir)
	err = connectErr(t, "unix://absent.sock", "sandbox-resume")
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), sock) {
		t.Fatalf("relative address: error %v, want it to name %s", err, sock)
	}
}

func TestConnectNotASocket(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := connectErr(t, f, "sandbox-resume")
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("error %v: want unavailable, not a socket", err)
	}
}

func TestConnectNotContainerd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "http.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()
	start := time.Now()
	err = connectErr(t, sock, "sandbox-resume")
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "not containerd") {
		t.Fatalf("error %v: want unavailable naming %s and saying it may not be containerd", err, sock)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Connect took %s with a 300ms timeout", d)
	}
}

func TestConnectInvalidArguments(t *testing.T) {
	if err := connectErr(t, "/run/x.sock", "bad namespace!"); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "bad namespace!") {
		t.Fatalf("invalid namespace: %v", err)
	}
	if err := connectErr(t, "", "sandbox-resume"); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("empty address: %v", err)
	}
}
