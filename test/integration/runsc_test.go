package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// gvisorVersion returns the gvisor.dev/gvisor pseudo-version pinned in
// hack/tools/gvisor/go.mod, which `make deps` stamps into runsc.
func gvisorVersion(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "hack", "tools", "gvisor", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == "gvisor.dev/gvisor" {
			return fs[1]
		}
	}
	t.Fatalf("hack/tools/gvisor/go.mod requires no gvisor.dev/gvisor")
	return ""
}

// requireRunsc returns bin/runsc after checking that it and bin/'s
// containerd-shim-runsc-v1 exist (missing skips, and fails under CI=true)
// and that `runsc --version` names the pinned pseudo-version.
func requireRunsc(t *testing.T) string {
	t.Helper()
	bin := harness.Binaries(t)
	runsc := filepath.Join(bin, "runsc")
	for _, p := range []string{runsc, filepath.Join(bin, "containerd-shim-runsc-v1")} {
		if _, err := os.Stat(p); err != nil {
			testenv.Missing(t, "%v (make deps builds gVisor into bin/)", err)
		}
	}
	out, err := exec.Command(runsc, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", runsc, err, out)
	}
	if want := "runsc version " + gvisorVersion(t); !strings.Contains(string(out), want+"\n") {
		t.Fatalf("%s --version:\n%s\nwant a line %q (the stamped pseudo-version)", runsc, out, want)
	}
	return runsc
}

// runscLogs returns the debug logs runsc wrote into dir (its boot, gofer
// and command logs), for a failed test.
func runscLogs(dir string) string {
	var b strings.Builder
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(&b, "== %s (last %d lines)\n%s\n", filepath.Base(n), len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}

// TestRunscVersion: the runsc `make deps` built reports the pinned
// pseudo-version (stamped; an unstamped build says VERSION_MISSING).
func TestRunscVersion(t *testing.T) {
	harness.Require(t)
	requireRunsc(t)
}

// TestRunscRun is the smoke test of gVisor under the harness daemon: a
// busybox container under io.containerd.runsc.v1 (the shim from bin/, which
// must start without CAP_SYS_RESOURCE; runsc at bin/runsc with a root of its
// own in the daemon's directory; platform systrap, no KVM needed) runs,
// sees gVisor's kernel release rather than the host's, and its exit status
// (7) reaches containerd.
func TestRunscRun(t *testing.T) {
	harness.Require(t)
	runsc := requireRunsc(t)
	d := harness.Start(t, "runsc")
	img := harness.ImportBusybox(t, d, "busybox:runsc")
	ctx := d.Context(t)
	image, err := d.Client.GetImage(ctx, img.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := image.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(d.Dir, "runsc.toml")
	logs := filepath.Join(d.Dir, "runsc-logs")
	toml := fmt.Sprintf("binary_name = %q\nroot = %q\n\n[runsc_config]\n  platform = \"systrap\"\n  debug = \"true\"\n  debug-log = %q\n",
		runsc, filepath.Join(d.Dir, "runsc"), logs+"/")
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	id := d.ID("gvisor")
	d.AllowShimProtocol2(id)
	c, err := d.Client.NewContainer(ctx, id,
		client.WithImage(image),
		client.WithSnapshotter("overlayfs"),
		client.WithNewSnapshot(id+"-snap", image),
		client.WithRuntime("io.containerd.runsc.v1", &runtimeoptions.Options{ConfigPath: cfg}),
		client.WithNewSpec(oci.WithImageConfig(image),
			// It waits for the test's stop file, so that its exit status
			// reaches the shim through `runsc wait` (a sandbox that exits
			// before `runsc wait` connects reports 128 here).
			oci.WithProcessArgs("sh", "-c", "uname -r >/out/release.tmp && mv /out/release.tmp /out/release; while [ ! -e /out/stop ]; do sleep 0.05; done; exit 7"),
			// Without it a container made by the Go client hangs in
			// `runsc create` (notes/memory-checkpoints.md).
			oci.WithAnnotations(map[string]string{"io.kubernetes.cri.container-type": "sandbox"}),
			oci.WithMounts([]specs.Mount{{Destination: "/out", Type: "bind", Source: out, Options: []string{"rbind", "rw"}}})))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, client.WithSnapshotCleanup)
	began := time.Now()
	task, err := c.NewTask(ctx, cio.NullIO)
	if err != nil {
		t.Fatalf("new task under runsc: %v\ndaemon log:\n%s", err, d.Log())
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("start under runsc: %v\ndaemon log:\n%s", err, d.Log())
	}
	release := filepath.Join(out, "release")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(release); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runsc task wrote no %s within 60 s\ndaemon log:\n%s\nrunsc logs:\n%s", release, d.Log(), runscLogs(logs))
		}
	}
	t.Logf("runsc container: create to running %s", time.Since(began))
	if err := os.WriteFile(filepath.Join(out, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var code uint32
	select {
	case st := <-exited:
		code = st.ExitCode()
	case <-time.After(60 * time.Second):
		t.Fatalf("the runsc task did not exit within 60 s\ndaemon log:\n%s", d.Log())
	}

	if _, err := task.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if code != 7 {
		t.Fatalf("the runsc task exited %d, want 7\ndaemon log:\n%s\nrunsc logs:\n%s", code, d.Log(), runscLogs(logs))
	}
	b, err := os.ReadFile(release)
	if err != nil {
		t.Fatal(err)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	host := unix.ByteSliceToString(u.Release[:])
	got := strings.TrimSpace(string(b))
	if got == "" || got == host {
		t.Fatalf("uname -r in the container is %q, the host's is %q: want gVisor's own", got, host)
	}
	t.Logf("kernel release inside gVisor %q (host %q)", got, host)
}
