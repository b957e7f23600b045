package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// BenchmarkSameHostResume times `resume --start` of generation 1 on the
// host that suspended it (docs/design.md "Resume on the same host without
// extracting", "Performance goals": 1 GiB ≤ 1.3× 256 MiB and ≤ 2× `ctr
// run -d` of the bare base image, medians of 5 interleaved runs), beside
// `ctr run -d` of the base image on the same warm daemon. Each size in
// SR_BENCH_FAST_SIZES (MiB, comma-separated; default "256,1024") gets one
// runtime container with that much of writeChanges' mix, suspended once;
// then SR_BENCH_FAST_RUNS (default 5) rounds each time, in an order that
// rotates, every size's resume and one `ctr run -d`. Between timings,
// untimed, the incarnation is removed and the run made resumable again
// (resumeAgain: record purged and generation 1 recorded again, a
// synchronous garbage collection, which leaves the chain snapshot the run
// lease holds). Metrics: running-<MiB>-ms, ctr-run-ms and the ratios.
func BenchmarkSameHostResume(b *testing.B) {
	sizes := []int{256, 1024}
	if s := os.Getenv("SR_BENCH_FAST_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("SR_BENCH_FAST_SIZES: %q is not a size in MiB", f)
			}
			sizes = append(sizes, n)
		}
	}
	runs := 5
	if s := os.Getenv("SR_BENCH_FAST_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("SR_BENCH_FAST_RUNS: %q", s)
		}
		runs = n
	}
	d := harness.Start(b, "benchfast")
	im := harness.ImportBusybox(b, d, "busybox:1")
	ctx := d.Context(b)
	img, err := d.Client.GetImage(ctx, im.Name)
	if err != nil {
		b.Fatal(err)
	}
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(`{"image": "busybox:1@`+im.Index.String()+`", "name": "bench"}`), 0o644); err != nil {
		b.Fatal(err)
	}
	pub, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
	if err != nil {
		b.Fatal(err)
	}
	cliRun := func(args ...string) {
		b.Helper()
		args = append([]string{"--address", d.Address, "--namespace", d.Namespace}, args...)
		cmd := exec.Command(cli(b), args...)
		cmd.Env = cliEnv(args)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("sandbox-resume %s: %v: %s", strings.Join(args, " "), err, out.String())
		}
	}
	ctrBin := filepath.Join(harness.Binaries(b), "ctr")
	remove := func(ctx context.Context, id string) {
		b.Helper()
		c, err := d.Client.LoadContainer(ctx, id)
		if err != nil {
			return
		}
		if t, err := c.Task(ctx, nil); err == nil {
			if _, err := t.Delete(ctx, client.WithProcessKill); err != nil {
				b.Fatalf("delete task %s: %v", id, err)
			}
		}
		if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
			b.Fatalf("delete %s: %v", id, err)
		}
	}
	type sized struct {
		mib      int
		run, ref string
	}
	var runsBySize []sized
	for _, mib := range sizes {
		cid := runningContainer(b, d, im.Name, fmt.Sprintf("fast%d", mib))
		writeChanges(b, filepath.Join(upperDir(b, ctx, d, cid), "bench"), int64(mib)<<20)
		unix.Sync()
		s := sized{mib: mib, run: fmt.Sprintf("fast-%d", mib), ref: filepath.Join(dir, fmt.Sprintf("fast-%d.json", mib))}
		cliRun("suspend", "--container", cid, "--config", cfg, "--key", key, "--run", s.run, "--out", s.ref)
		runsBySize = append(runsBySize, s)
	}
	cli(b)
	times := map[string][]time.Duration{}
	timed := func(op string, f func()) {
		unix.Sync()
		start := time.Now()
		f()
		times[op] = append(times[op], time.Since(start))
	}
	b.ResetTimer()
	for range b.N {
		for i := range runs {
			var ops []func()
			for _, s := range runsBySize {
				ops = append(ops, func() {
					inc := fmt.Sprintf("inc-%d", s.mib)
					resumeAgain(b, d, inc, s.run, s.ref)
					timed(fmt.Sprintf("running-%d", s.mib), func() {
						cliRun("resume", "--ref", s.ref, "--config", cfg, "--trust", pub, "--container", inc, "--start")
					})
				})
			}
			ops = append(ops, func() {
				id := fmt.Sprintf("ctr-%d", i)
				timed("ctr-run", func() {
					cmd := exec.Command(ctrBin, "-a", d.Address, "-n", d.Namespace, "run", "-d", "--snapshotter", "overlayfs", im.Name, id)
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("ctr run -d: %v: %s", err, out)
					}
				})
				remove(ctx, id)
			})
			for k := range ops {
				ops[(i+k)%len(ops)]()
			}
		}
	}
	b.StopTimer()
	ctrRun := median(times["ctr-run"])
	b.ReportMetric(float64(ctrRun.Microseconds())/1000, "ctr-run-ms")
	first := median(times[fmt.Sprintf("running-%d", sizes[0])])
	for _, mib := range sizes {
		m := median(times[fmt.Sprintf("running-%d", mib)])
		b.ReportMetric(float64(m.Microseconds())/1000, fmt.Sprintf("running-%dMiB-ms", mib))
		b.ReportMetric(float64(m)/float64(ctrRun), fmt.Sprintf("running-%dMiB-x-ctr", mib))
		b.ReportMetric(float64(m)/float64(first), fmt.Sprintf("running-%dMiB-x-%dMiB", mib, sizes[0]))
		b.Logf("resume --start %d MiB: %v (runs %v)", mib, m, times[fmt.Sprintf("running-%d", mib)])
	}
	b.Logf("ctr run -d: %v (runs %v)", ctrRun, times["ctr-run"])
}
