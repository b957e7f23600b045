package integration

import (
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
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// perfSizes parses SR_BENCH_SIZES, "MIB:RUNS,..." (default "256:5"): the
// sizes of changed files BenchmarkMoveLifecycle writes and how many
// lifecycles it times at each.
func perfSizes(b *testing.B) [][2]int {
	spec := os.Getenv("SR_BENCH_SIZES")
	if spec == "" {
		spec = "256:5"
	}
	var out [][2]int
	for _, f := range strings.Split(spec, ",") {
		m, r, ok := strings.Cut(strings.TrimSpace(f), ":")
		mib, err1 := strconv.Atoi(m)
		runs, err2 := strconv.Atoi(r)
		if !ok || err1 != nil || err2 != nil || mib <= 0 || runs <= 0 {
			b.Fatalf("SR_BENCH_SIZES: %q is not MIB:RUNS", f)
		}
		out = append(out, [2]int{mib, runs})
	}
	return out
}

// BenchmarkMoveLifecycle times a run's whole life through the CLI, each
// step beside its baseline on the same bytes, in alternating order
// (DESIGN "Performance goals"; bench/run.sh reads the rows):
//
//	suspend      `suspend` of a running task    tar -c | zstd -1 | sha256sum of the upper dir
//	export       `export --ref --out run.tar`    tar -cf files.tar of the upper dir
//	import       `import run.tar` on a 2nd host tar -xf files.tar && sha256sum files.tar && sync
//	materialize  `resume` (no --check)          zstd -d < the diff blob | tar -x
//
// The changed files are writeChanges' mix (BenchmarkSuspend), of the sizes
// in SR_BENCH_SIZES ("MIB:RUNS,...", default "256:5"); each size runs its
// RUNS lifecycles inside one b.N iteration (use -benchtime 1x). Caches are
// flushed to disk (sync) before every timed step, never dropped. With
// SR_BENCH_OUT set, every timing is appended to that file as a
// tab-separated row "MiB op run ms" (op: suspend, suspend-base, export,
// export-base, import, import-base, materialize, materialize-base); the
// medians and ratios are also reported as metrics.
func BenchmarkMoveLifecycle(b *testing.B) {
	a := harness.Start(b, "benchlifea")
	h2 := harness.Start(b, "benchlifeb")
	im := harness.ImportBusybox(b, a, "busybox:1")
	dir := b.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(`{"image": "busybox:1", "name": "bench"}`), 0o644); err != nil {
		b.Fatal(err)
	}
	pub, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
	if err != nil {
		b.Fatal(err)
	}
	trust, err := envelope.LoadTrust(pub)
	if err != nil {
		b.Fatal(err)
	}
	var rows *os.File
	if p := os.Getenv("SR_BENCH_OUT"); p != "" {
		if rows, err = os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
	}
	sh := func(script string, args ...string) {
		b.Helper()
		cmd := exec.Command("bash", append([]string{"-o", "pipefail", "-c", script, "bash"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", script, err, out)
		}
	}
	cli2 := func(d *harness.Daemon, args ...string) string {
		b.Helper()
		stdout, code := runCLI(b, d, args...)
		if code != 0 {
			b.Fatalf("sandbox-resume %s: exit %d", args[0], code)
		}
		return stdout
	}
	ctxA := a.Context(b)
	for _, sz := range perfSizes(b) {
		mib, runs := sz[0], sz[1]
		cid := runningContainer(b, a, im.Name, fmt.Sprintf("life%d", mib))
		upper := upperDir(b, ctxA, a, cid)
		writeChanges(b, filepath.Join(upper, "bench"), int64(mib)<<20)
		unix.Sync()
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			times := map[string][]time.Duration{}
			timed := func(op string, run int, f func()) {
				unix.Sync()
				start := time.Now()
				f()
				d := time.Since(start)
				times[op] = append(times[op], d)
				if rows != nil {
					fmt.Fprintf(rows, "%d\t%s\t%d\t%.1f\n", mib, op, run, float64(d.Microseconds())/1000)
				}
			}
			pair := func(i int, op string, ours, base func()) {
				if i%2 == 0 {
					timed(op, i, ours)
					timed(op+"-base", i, base)
				} else {
					timed(op+"-base", i, base)
					timed(op, i, ours)
				}
			}
			for range b.N {
				for i := range runs {
					w := filepath.Join(dir, fmt.Sprintf("w%d-%d", mib, i))
					if err := os.MkdirAll(w, 0o755); err != nil {
						b.Fatal(err)
					}
					run := fmt.Sprintf("life-%d-%d-%d", mib, i, time.Now().UnixNano())
					refPath := filepath.Join(w, "ref.json")
					startTask(b, ctxA, a, cid)
					pair(i, "suspend", func() {
						cli2(a, "suspend", "--container", cid, "--config", cfg, "--key", key, "--run", run, "--out", refPath)
					}, func() { tarZstdSha(b, upper) })
					refFile, err := os.ReadFile(refPath)
					if err != nil {
						b.Fatal(err)
					}
					ref, err := snapshot.OpenRef(refFile, trust)
					if err != nil {
						b.Fatal(err)
					}
					runTar, filesTar := filepath.Join(w, "run.tar"), filepath.Join(w, "files.tar")
					pair(i, "export", func() {
						cli2(a, "export", "--ref", refPath, "--out", runTar)
					}, func() { sh(`tar -cf "$1" -C "$2" .`, filesTar, upper) })
					layer := filepath.Join(w, "layer.zst")
					sh(`tar -xOf "$1" "blobs/sha256/$2" > "$3"`, runTar, ref.Layers[0].Digest.Encoded(), layer)
					dstI := filepath.Join(w, "import-base")
					pair(i, "import", func() {
						cli2(h2, "import", runTar, "--trust", pub, "--out", filepath.Join(w, "imported.json"))
					}, func() {
						sh(`mkdir -p "$2" && tar -xf "$1" -C "$2" && sha256sum "$1" >/dev/null && sync`, filesTar, dstI)
					})
					dstM := filepath.Join(w, "materialize-base")
					mat := "mat-" + run
					pair(i, "materialize", func() {
						cli2(a, "resume", "--ref", refPath, "--config", cfg, "--trust", pub, "--container", mat)
					}, func() {
						sh(`mkdir -p "$2" && zstd -d -q -c "$1" | tar -x -C "$2"`, layer, dstM)
					})
					// Clean up outside the timings: the materialized
					// container and its snapshot, both runs (synchronous
					// GC), the files.
					if c, err := a.Client.LoadContainer(ctxA, mat); err == nil {
						if err := c.Delete(ctxA, client.WithSnapshotCleanup); err != nil {
							b.Fatalf("delete %s: %v", mat, err)
						}
					}
					cli2(a, "discard", "--run", run)
					cli2(h2, "discard", "--run", run)
					if err := os.RemoveAll(w); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			for _, op := range []string{"suspend", "export", "import", "materialize"} {
				ours, base := median(times[op]), median(times[op+"-base"])
				b.ReportMetric(float64(ours.Milliseconds()), op+"-ms")
				b.ReportMetric(float64(base.Milliseconds()), op+"-base-ms")
				b.ReportMetric(float64(ours)/float64(base), op+"-x")
			}
		})
	}
}
