package integration

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// progressLog is a containerd.Progress that records its calls.
type progressLog struct {
	mu     sync.Mutex
	phases []string
	totals []int64
	bytes  []int64 // bytes added per phase
}

func (p *progressLog) Phase(what string, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phases = append(p.phases, what)
	p.totals = append(p.totals, total)
	p.bytes = append(p.bytes, 0)
}

func (p *progressLog) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bytes) == 0 {
		p.phases, p.totals, p.bytes = append(p.phases, "(none)"), append(p.totals, 0), append(p.bytes, 0)
	}
	p.bytes[len(p.bytes)-1] += n
}

func (p *progressLog) String() string {
	var b strings.Builder
	for i := range p.phases {
		fmt.Fprintf(&b, "%s %d/%d; ", p.phases[i], p.bytes[i], p.totals[i])
	}
	return b.String()
}

// TestMoveProgress: with migrate.WithProgress, Export reports exactly the
// archive's bytes, Import reads the archive twice (scan, import), Push and
// Pull report the bytes they move; the CLI's export, import, push and pull
// with stderr not a terminal (a pipe) write nothing to stderr, and export
// with stderr on a pseudo-terminal draws its progress there.
func TestMoveProgress(t *testing.T) {
	a := harness.Start(t, "pga")
	b := harness.Start(t, "pgb")
	c := harness.Start(t, "pgc") // its content store stays empty until the library pull
	reg := harness.StartRegistry(t)
	bb := harness.ImportBusybox(t, a, "busybox:1")
	s := suspendReal(t, a, pinnedConfig(bb), nil)
	dir := t.TempDir()
	refFile, err := os.ReadFile(s.refPath)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := envelope.LoadTrust(s.pub)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("library", func(t *testing.T) {
		ra, rb := a.Connect(t, ""), b.Connect(t, b.NewNamespace())
		run := filepath.Join(dir, "lib.tar")
		var exp progressLog
		res, err := migrate.ExportFile(ctx(t), ra, refFile, run, true, migrate.WithProgress(&exp))
		if err != nil {
			t.Fatal(err)
		}
		if len(exp.phases) != 1 || exp.phases[0] != "export" || exp.bytes[0] != res.Size || exp.totals[0] <= 0 || exp.totals[0] > res.Size {
			t.Errorf("export progress %s; archive %d bytes", &exp, res.Size)
		}
		var imp progressLog
		if _, err := migrate.ImportFile(ctx(t), rb, run, trust, "", migrate.WithProgress(&imp)); err != nil {
			t.Fatal(err)
		}
		if len(imp.phases) != 3 || imp.phases[0] != "scan" || imp.phases[1] != "import" || imp.phases[2] != "verify diff" ||
			imp.totals[0] != res.Size || imp.totals[1] != res.Size || imp.bytes[0] > res.Size || imp.bytes[1] > res.Size || imp.bytes[1] == 0 {
			t.Errorf("import progress %s; archive %d bytes", &imp, res.Size)
		}

		target, err := migrate.ParseRemoteRef(reg.Host+"/runs/progress:"+s.ref.Run, false)
		if err != nil {
			t.Fatal(err)
		}
		var push progressLog
		if _, err := migrate.Push(ctx(t), ra, ra.Registry(plainTransport(t)), refFile, target, migrate.WithProgress(&push)); err != nil {
			t.Fatal(err)
		}
		if len(push.phases) != 2 || push.phases[0] != "push base" || push.phases[1] != "push" ||
			push.bytes[0] == 0 || push.bytes[1] < s.ref.Layers[0].Size {
			t.Errorf("push progress %s; layer %d bytes", &push, s.ref.Layers[0].Size)
		}
		var pull progressLog
		rc := c.Connect(t, "") // nothing there: the layer and the base are fetched
		if _, err := migrate.Pull(ctx(t), rc, rc.Registry(plainTransport(t)), target, trust, migrate.WithProgress(&pull)); err != nil {
			t.Fatal(err)
		}
		// The artifact's layers: the layer and the spec blob.
		if len(pull.phases) != 3 || pull.phases[0] != "pull" || pull.bytes[0] != s.ref.Layers[0].Size+s.ref.Spec.Size ||
			pull.phases[2] != "pull base" || pull.bytes[2] == 0 {
			t.Errorf("pull progress %s; layer %d bytes, spec %d bytes", &pull, s.ref.Layers[0].Size, s.ref.Spec.Size)
		}
	})

	t.Run("cli quiet when piped", func(t *testing.T) {
		run := filepath.Join(dir, "cli.tar")
		target := reg.Host + "/runs/quiet:" + s.ref.Run
		ns := b.NewNamespace()
		for _, c := range []struct {
			d    *harness.Daemon
			ns   string
			args []string
		}{
			{a, "", []string{"export", "--ref", s.refPath, "--out", run, "--with-base"}},
			{b, ns, []string{"import", run, "--trust", s.pub, "--out", filepath.Join(dir, "imported.json")}},
			{a, "", []string{"push", "--plain-http", "--ref", s.refPath, target}},
			{b, b.NewNamespace(), []string{"pull", "--plain-http", "--trust", s.pub, target, "--out", filepath.Join(dir, "pulled.json")}},
		} {
			for _, out := range []string{"json", "text"} {
				args := append([]string{"--address", c.d.Address, "--namespace", c.ns, "--output", out}, c.args...)
				if c.ns == "" {
					args[3] = c.d.Namespace
				}
				cmd := exec.Command(cli(t), args...)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s (-o %s): %v\n%s", c.args[0], out, err, stderr.String())
				}
				if stderr.Len() != 0 {
					t.Errorf("%s -o %s wrote %d bytes to a non-terminal stderr: %q", c.args[0], out, stderr.Len(), stderr.String())
				}
				if stdout.Len() == 0 {
					t.Errorf("%s -o %s printed no result", c.args[0], out)
				}
			}
		}
	})

	t.Run("cli draws on a terminal", func(t *testing.T) {
		master, slave := openPTY(t)
		run := filepath.Join(dir, "tty.tar")
		cmd := exec.Command(cli(t), "--address", a.Address, "--namespace", a.Namespace, "export", "--ref", s.refPath, "--out", run)
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, slave
		var drawn bytes.Buffer
		copied := make(chan struct{})
		go func() {
			io.Copy(&drawn, master) // ends with EIO once the slave is closed
			close(copied)
		}()
		err := cmd.Run()
		slave.Close()
		<-copied
		if err != nil {
			t.Fatalf("export on a terminal: %v", err)
		}
		if !strings.Contains(drawn.String(), "export") || !strings.Contains(drawn.String(), "100%") {
			t.Errorf("export drew no progress on the terminal: %q", drawn.String())
		}
		t.Logf("drawn on the terminal: %q", drawn.String())
		if strings.Contains(stdout.String(), "100%") {
			t.Errorf("progress went to stdout: %q", stdout.String())
		}
	})
}

// openPTY opens a pseudo-terminal pair (/dev/ptmx, unlockpt, /dev/pts/N).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testenv.Missing(t, "pseudo-terminals (/dev/ptmx: %v)", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/pts/%d: %v", n, err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}
