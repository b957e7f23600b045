package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
)

// TestNoProcessSurvivesCleanup: a daemon SIGKILLed while a container runs
// leaves its shim (parent 1) and the container's process running, as a
// crash or a killed test would; once the test that started it has ended,
// no process names the daemon's directory or namespaces, runs in its
// cgroups, or carries the container's marker.
func TestNoProcessSurvivesCleanup(t *testing.T) {
	var d *Daemon
	marker := ""
	t.Run("daemon", func(t *testing.T) {
		d = Start(t, "survive")
		marker = "sr-survive-marker-" + filepath.Base(d.Dir)
		bb := ImportBusybox(t, d, "busybox:1")
		ctx := d.Context(t)
		img, err := d.Client.GetImage(ctx, bb.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := img.Unpack(ctx, "overlayfs"); err != nil {
			t.Fatal(err)
		}
		cid := d.ID("sleeper")
		c, err := d.Client.NewContainer(ctx, cid, client.WithImage(img), client.WithSnapshotter("overlayfs"),
			client.WithNewSnapshot(cid, img), client.WithNewSpec(oci.WithImageConfig(img),
				oci.WithProcessArgs("/bin/sh", "-c", "sleep 3600; : "+marker)))
		if err != nil {
			t.Fatal(err)
		}
		task, err := c.NewTask(ctx, cio.NullIO)
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Start(ctx); err != nil {
			t.Fatal(err)
		}
		// Start returns once runc has started the process; its command line
		// is the workload's only after runc init execs it, so look again
		// for a while before calling it missing.
		var shim, workload bool
		for i := 0; i < 100 && !(shim && workload); i++ {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			for _, p := range d.Processes() {
				shim = shim || strings.Contains(p.Cmdline, "containerd-shim-runc-v2")
				workload = workload || strings.Contains(p.Cmdline, marker)
			}
		}
		if !shim || !workload {
			t.Fatalf("Processes does not list the shim (%t) and the container's process (%t): %v", shim, workload, d.Processes())
		}
		d.Kill(t) // no daemon left to delete the task: the shim stays
		shim = false
		for _, p := range d.Processes() {
			shim = shim || strings.Contains(p.Cmdline, "containerd-shim-runc-v2")
		}
		if !shim {
			t.Fatalf("the shim did not outlive its SIGKILLed daemon: %v", d.Processes())
		}
	})
	if d == nil {
		return
	}
	if left := d.Processes(); len(left) != 0 {
		t.Fatalf("processes of daemon %s survived its cleanup:\n  %s", d.Name, strings.Join(strs(left), "\n  "))
	}
	if left := withMarker(marker); len(left) != 0 {
		t.Fatalf("the container's process survived its daemon's cleanup: %v", left)
	}
	if _, err := os.Stat(d.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after cleanup (%v)", d.Dir, err)
	}
}

// withMarker lists the processes whose command line contains marker.
func withMarker(marker string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(raw), marker) && e.Name() != "self" {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(raw), "\x00", " "))
		}
	}
	return out
}
