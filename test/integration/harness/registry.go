package harness

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
)

// RegistryBinary is Debian's docker-registry (distribution 2.8), installed by
// `make deps`.
const RegistryBinary = "/usr/bin/docker-registry"

// Registry is a docker-registry on 127.0.0.1 with its storage in a
// temporary directory, started by StartRegistry (plain HTTP, open) or
// StartRegistryWith (htpasswd auth, TLS).
type Registry struct {
	Host string // "127.0.0.1:<port>"
	Dir  string // storage root, config and log
	// CAFile is the PEM CA certificate the registry's TLS certificate
	// chains to ("" for plain HTTP); CertDir holds it as ca.crt (skopeo's
	// --src-cert-dir).
	CAFile, CertDir string
	cmd             *exec.Cmd
	done            chan struct{}
}

// StartRegistry starts docker-registry on 127.0.0.1 at a free port, waits
// until GET /v2/ answers 200 (at most StartTimeout), and stops it (SIGTERM,
// then SIGKILL after 5 s) and removes its storage when the test ends. The
// log is printed when the test failed. It skips (fails under CI=true) when
// the binary is not installed.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	return StartRegistryWith(t, RegistryConfig{})
}

// StartRegistryWith is StartRegistry with htpasswd users and TLS as cfg
// says (registry_auth.go); it waits until GET /v2/ answers 200, or 401
// when users are set.
func StartRegistryWith(t testing.TB, cfg RegistryConfig) *Registry {
	t.Helper()
	if _, err := os.Stat(RegistryBinary); err != nil {
		testenv.Missing(t, "harness: %s (apt-get install docker-registry, or `make deps`): %v", RegistryBinary, err)
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("harness: registry port: %v", err)
	}
	host := l.Addr().String()
	l.Close()
	yml := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, filepath.Join(dir, "storage"), host)
	r := &Registry{Host: host, Dir: dir, done: make(chan struct{})}
	yml += cfg.configure(t, r)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "registry.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(RegistryBinary, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("harness: start %s: %v", RegistryBinary, err)
	}
	r.cmd = cmd
	go func() { cmd.Wait(); logf.Close(); close(r.done) }()
	t.Cleanup(func() {
		r.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("harness: registry %s log:\n%s", host, b)
		}
	})

	client := r.Client(250 * time.Millisecond)
	ready := http.StatusOK
	if len(cfg.Users) > 0 {
		ready = http.StatusUnauthorized
	}
	deadline := time.Now().Add(StartTimeout)
	for {
		select {
		case <-r.done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("harness: registry exited during start (%v); log:\n%s", cmd.ProcessState, b)
		default:
		}
		resp, err := client.Get(r.URL() + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == ready {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("harness: registry on %s did not answer GET /v2/ within %s: %v", host, StartTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *Registry) stop(t testing.TB) {
	select {
	case <-r.done:
		return
	default:
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		t.Errorf("harness: registry pid %d ignored SIGTERM for 5 s; killing it", r.cmd.Process.Pid)
		r.cmd.Process.Kill()
		<-r.done
	}
}
