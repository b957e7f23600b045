package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// criuMinimum is the oldest CRIU that works on kernels ≥ 6.13 (commit
// 8ee2eba47c0c "vdso: handle vvar_vclock vma-s", first in v4.1).
var criuMinimum = [2]int{4, 1}

var criuVersionRE = regexp.MustCompile(`(?m)^Version: (\d+)\.(\d+)`)

// requireCRIU returns the criu the daemons' shims find on PATH (bin/ first,
// as the harness puts it) after checking that it is ≥ 4.1 and that `criu
// check` passes on this kernel. Not found skips, and fails under CI=true;
// too old or a failing check always fails (`make deps` installs CRIU).
func requireCRIU(t *testing.T) string {
	t.Helper()
	harness.Binaries(t) // puts bin/ first on PATH, as the daemons' PATH has it
	criu := testenv.LookPath(t, "criu", "make deps builds CRIU into bin/")
	out, err := exec.Command(criu, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", criu, err, out)
	}
	m := criuVersionRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s --version printed no version:\n%s", criu, out)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	if major < criuMinimum[0] || major == criuMinimum[0] && minor < criuMinimum[1] {
		t.Fatalf("%s is %d.%d; CRIU ≥ %d.%d is needed on kernel ≥ 6.13 (make deps builds it into bin/)", criu, major, minor, criuMinimum[0], criuMinimum[1])
	}
	out, err = exec.Command(criu, "check").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Looks good") {
		t.Fatalf("%s check: %v\n%s", criu, err, out)
	}
	return criu
}

// TestCRIUCheck: the CRIU that `make deps` installs is ≥ 4.1 and passes
// `criu check` on this host's kernel.
func TestCRIUCheck(t *testing.T) {
	harness.Require(t)
	t.Logf("criu: %s", requireCRIU(t))
}

// readCounter returns the number in path, or -1 when the file is missing or
// being replaced.
func readCounter(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// waitCounter polls path until cond holds for its value, and returns it.
func waitCounter(t *testing.T, path string, what string, cond func(int) bool) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if n := readCounter(path); n >= 0 && cond(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s is %d after 20 s", what, path, readCounter(path))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCRIUCheckpointRestore is the smoke test of the CRIU `make deps`
// installs, through containerd's Go client as DESIGN "Memory" uses it: a
// runc task counting in a shell variable (stdio /dev/null: a task whose
// stdout is a host file does not dump) is checkpointed with its rw layer
// and left running (Container.Checkpoint with WithCheckpointTask and
// WithCheckpointRW), killed with its container, and restored into a new
// container (Client.Restore, NewTask with WithTaskCheckpoint; a new PID
// namespace, so the dumped PIDs are free). The restored process goes on from
// the value it held at the checkpoint instead of starting again at 1.
func TestCRIUCheckpointRestore(t *testing.T) {
	harness.Require(t)
	requireCRIU(t)
	d := harness.Start(t, "criu")
	img := harness.ImportBusybox(t, d, "busybox:criu")
	ctx := d.Context(t)
	image, err := d.Client.GetImage(ctx, img.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := image.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	count := filepath.Join(out, "count")
	// The counter lives only in the shell's variable i; the file is a view.
	script := `i=0; while :; do i=$((i+1)); echo $i >/out/count.tmp && mv /out/count.tmp /out/count; sleep 0.05; done`
	id := d.ID("counter")
	c, err := d.Client.NewContainer(ctx, id,
		client.WithImage(image),
		client.WithSnapshotter("overlayfs"),
		client.WithNewSnapshot(id+"-snap", image),
		client.WithNewSpec(oci.WithImageConfig(image), oci.WithProcessArgs("sh", "-c", script),
			oci.WithMounts([]specs.Mount{{Destination: "/out", Type: "bind", Source: out, Options: []string{"rbind", "rw"}}})))
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.NewTask(ctx, cio.NullIO)
	if err != nil {
		t.Fatal(err)
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatal(err)
	}
	before := waitCounter(t, count, "before the checkpoint", func(n int) bool { return n >= 5 })

	began := time.Now()
	ckpt, err := c.Checkpoint(ctx, "sandbox-resume.test/checkpoint:"+id,
		client.WithCheckpointRuntime, client.WithCheckpointTask, client.WithCheckpointRW)
	if err != nil {
		t.Fatalf("checkpoint: %v\ndaemon log:\n%s", err, d.Log())
	}
	t.Logf("checkpoint (task left running): %s", time.Since(began))
	// The task was left running: the counter goes on.
	waitCounter(t, count, "after the checkpoint", func(n int) bool { return n > before+2 })
	if err := task.Kill(ctx, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if _, err := task.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
		t.Fatal(err)
	}
	last := readCounter(count)
	if err := os.Remove(count); err != nil {
		t.Fatal(err)
	}

	began = time.Now()
	id2 := d.ID("restored")
	c2, err := d.Client.Restore(ctx, id2, ckpt,
		client.WithRestoreImage, client.WithRestoreSpec, client.WithRestoreRuntime, client.WithRestoreRW)
	if err != nil {
		t.Fatalf("restore container: %v", err)
	}
	task2, err := c2.NewTask(ctx, cio.NullIO, client.WithTaskCheckpoint(ckpt))
	if err != nil {
		t.Fatalf("restore task: %v\ndaemon log:\n%s", err, d.Log())
	}
	defer task2.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
	if err := task2.Start(ctx); err != nil {
		t.Fatalf("start restored task: %v\ndaemon log:\n%s", err, d.Log())
	}
	// The first value written after the restore is the checkpointed i + 1:
	// more than the value seen before the checkpoint began, at most one more
	// than the last value of the killed task. A restart would write 1.
	first := waitCounter(t, count, "after the restore", func(int) bool { return true })
	t.Logf("restore to the first write: %s; counter %d before the checkpoint, %d at the kill, %d first after the restore", time.Since(began), before, last, first)
	if first <= before || first > last+1 {
		t.Fatalf("the restored task wrote %d first; want a value in (%d, %d] (its memory at the checkpoint + 1)", first, before, last+1)
	}
	waitCounter(t, count, "the restored task counting on", func(n int) bool { return n > first+2 })
	st, err := task2.Status(ctx)
	if err != nil || st.Status != client.Running {
		t.Fatalf("restored task status %v, %v; want running", st.Status, err)
	}
}
