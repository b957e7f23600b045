package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// BenchmarkSuspend measures the `sandbox-resume suspend` process on a
// container with 64 MiB and 256 MiB of changed files against
// `tar -c | zstd -1 | sha256sum` over the same files (the container
// snapshot's overlayfs upper directory), timed in the same iteration in
// alternating order (docs/design.md "Performance goals": suspend ≤ 1.25× the
// pipeline). Half of the bytes are pseudo-random (incompressible), half
// generated text; three quarters of the volume is in 1 MiB files, a quarter
// in 16 KiB files. Every iteration starts with a running task (suspend
// pauses, diffs and stops it) and ends with `discard` and its synchronous
// GC, outside the timer. It reports the medians suspend-ms and pipeline-ms,
// their ratio "x-pipeline", the diff blob's size, and daemon-diff-ms: the
// daemon's part alone (rootfs.CreateDiff, zstd, of the stopped container,
// untimed), which shows what the rest of the process (the client's
// read-back of the blob, pause, stop, ingest, signing) adds. Run it with
// -benchtime 3x or more:
//
//	go test -run '^$' -bench BenchmarkSuspend -benchtime 3x ./test/integration
func BenchmarkSuspend(b *testing.B) {
	d := harness.Start(b, "benchsusp")
	im := harness.ImportBusybox(b, d, "busybox:1")
	env := newSuspendEnv(b, "busybox:1")
	for _, mib := range []int{64, 256} {
		// Set up once per size: the function given to b.Run runs more
		// than once.
		ctx := d.Context(b)
		cid := runningContainer(b, d, im.Name, fmt.Sprintf("bench%d", mib))
		upper := upperDir(b, ctx, d, cid)
		writeChanges(b, filepath.Join(upper, "bench"), int64(mib)<<20)
		unix.Sync()
		out := filepath.Join(env.dir, cid+".ref.json")
		n := 0
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			var susp, pipe, daemon []time.Duration
			var diffSize int64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				unsuspend(b, ctx, d, cid)
				startTask(b, ctx, d, cid)
				n++
				run := fmt.Sprintf("bench-%d-%d", mib, n)
				b.StartTimer()
				timeSuspend := func() {
					start := time.Now()
					stdout, code := runCLI(b, d, "--output", "json", "suspend", "--container", cid, "--config", env.cfg,
						"--key", env.key, "--run", run, "--out", out)
					susp = append(susp, time.Since(start))
					if code != 0 {
						b.Fatalf("suspend exit %d", code)
					}
					ref, err := snapshot.OpenRef([]byte(stdout), env.trust)
					if err != nil {
						b.Fatalf("suspend's ref: %v", err)
					}
					diffSize = ref.Layers[0].Size
				}
				timePipe := func() {
					start := time.Now()
					tarZstdSha(b, upper)
					pipe = append(pipe, time.Since(start))
				}
				if i%2 == 0 {
					timeSuspend()
					timePipe()
				} else {
					timePipe()
					timeSuspend()
				}
				b.StopTimer()
				if _, code := runCLI(b, d, "discard", "--run", run, "--force"); code != 0 {
					b.Fatalf("discard exit %d", code)
				}
				daemon = append(daemon, daemonDiff(b, ctx, d, cid))
				b.StartTimer()
			}
			b.StopTimer()
			ms, mp := median(susp), median(pipe)
			b.ReportMetric(float64(ms.Milliseconds()), "suspend-ms")
			b.ReportMetric(float64(mp.Milliseconds()), "pipeline-ms")
			b.ReportMetric(float64(ms)/float64(mp), "x-pipeline")
			b.ReportMetric(float64(median(daemon).Milliseconds()), "daemon-diff-ms")
			b.ReportMetric(float64(diffSize)/(1<<20), "diff-MiB")
			b.Logf("%d MiB, %d runs: suspend %v, tar|zstd -1|sha256sum %v, rootfs.CreateDiff alone %v", mib, len(susp), susp, pipe, daemon)
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// upperDir returns the overlayfs upper directory of the container's active
// snapshot (its key is the container id), where the container's writes
// land.
func upperDir(b testing.TB, ctx context.Context, d *harness.Daemon, key string) string {
	b.Helper()
	ms, err := d.Client.SnapshotService("overlayfs").Mounts(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range ms {
		for _, o := range m.Options {
			if dir, ok := strings.CutPrefix(o, "upperdir="); ok {
				return dir
			}
		}
	}
	b.Fatalf("snapshot %s has no upperdir in %+v", key, ms)
	return ""
}

// writeChanges writes total bytes of files under dir: three quarters in
// 1 MiB files, a quarter in 16 KiB files, alternately pseudo-random and
// text (≈ 3:1 compressible with zstd -1).
func writeChanges(b testing.TB, dir string, total int64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(uint64(total), 1))
	words := strings.Fields("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor " +
		"incididunt ut labore et dolore magna aliqua container snapshot lease digest manifest index " +
		"reference feature namespace content store resume suspend overlay upper lower work")
	fill := func(p []byte, text bool) {
		if !text {
			for i := 0; i+8 <= len(p); i += 8 {
				v := rng.Uint64()
				for k := range 8 {
					p[i+k] = byte(v >> (8 * k))
				}
			}
			return
		}
		var buf bytes.Buffer
		for buf.Len() < len(p) {
			buf.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(12) == 0 {
				fmt.Fprintf(&buf, " %d\n", rng.IntN(100000))
			} else {
				buf.WriteByte(' ')
			}
		}
		copy(p, buf.Bytes())
	}
	write := func(size int64, n int, sub string) {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			b.Fatal(err)
		}
		p := make([]byte, size)
		for i := range n {
			fill(p, i%2 == 1)
			if err := os.WriteFile(filepath.Join(dir, sub, fmt.Sprintf("f%05d", i)), p, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	write(1<<20, int(total*3/4>>20), "large")
	write(16<<10, int(total/4/(16<<10)), "small")
}

// startTask starts a task in the container when it has none (suspend
// deletes it) and waits until it runs.
func startTask(b testing.TB, ctx context.Context, d *harness.Daemon, cid string) {
	b.Helper()
	c, err := d.Client.LoadContainer(ctx, cid)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Task(ctx, nil); err == nil {
		return
	}
	task, err := c.NewTask(ctx, cio.NullIO)
	if err != nil {
		b.Fatal(err)
	}
	if err := task.Start(ctx); err != nil {
		b.Fatal(err)
	}
}

// unsuspend removes the io.sandbox-resume.* labels a suspend left on the
// runtime's own container (suspended, run, manifest, ...), so that a
// benchmark can start its task and suspend it again as a new run.
func unsuspend(b testing.TB, ctx context.Context, d *harness.Daemon, cid string) {
	b.Helper()
	c, err := d.Client.LoadContainer(ctx, cid)
	if err != nil {
		b.Fatal(err)
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		b.Fatal(err)
	}
	clear := map[string]string{}
	for k := range labels {
		if strings.HasPrefix(k, snapshot.LabelPrefix) {
			clear[k] = ""
		}
	}
	if len(clear) > 0 {
		if _, err := c.SetLabels(ctx, clear); err != nil {
			b.Fatal(err)
		}
	}
}

// tarZstdSha runs `tar -c | zstd -1 | sha256sum` over dir.
func tarZstdSha(b testing.TB, dir string) {
	b.Helper()
	cmd := exec.Command("bash", "-o", "pipefail", "-c", `tar -c -C "$1" . | zstd -1 -q | sha256sum`, "bash", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("tar | zstd | sha256sum: %v: %s", err, out)
	}
}

// daemonDiff times rootfs.CreateDiff (zstd) of the container's snapshot
// under a temporary lease, deleted with its GC afterwards.
func daemonDiff(b *testing.B, ctx context.Context, d *harness.Daemon, key string) time.Duration {
	b.Helper()
	ls := d.Client.LeasesService()
	l, err := ls.Create(ctx, leases.WithRandomID())
	if err != nil {
		b.Fatal(err)
	}
	defer ls.Delete(ctx, l, leases.SynchronousDelete)
	start := time.Now()
	_, err = rootfs.CreateDiff(leases.WithLease(ctx, l.ID), key, d.Client.SnapshotService("overlayfs"), d.Client.DiffService(),
		diff.WithMediaType(ocispec.MediaTypeImageLayerZstd))
	if err != nil {
		b.Fatalf("CreateDiff %s: %v", key, err)
	}
	return time.Since(start)
}
