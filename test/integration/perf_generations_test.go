package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// chainsRun numbers BenchmarkGenerationChain's chains across the calls go
// test makes of it (b.N = 1, then the -benchtime count): the rows of
// SR_BENCH_OUT name each chain once.
var chainsRun int

// chainChangedBytes is what changes before every suspend of
// BenchmarkGenerationChain: 8 MiB of 16 KiB files, half of them rewriting
// the same 256 files every generation, half new files.
const chainChangedBytes = 8 << 20

// BenchmarkGenerationChain follows one run through its generations, each
// with the same change, through the CLI only (docs/design.md "Performance
// goals": a later generation costs what changed, not the run; bench/run.sh
// plots its rows):
//
//	suspend      `suspend` of generation g     tar -c | zstd -1 | sha256sum of the
//	             (g = 1 the runtime's          container's upper directory (the
//	             container, then incarnations)  8 MiB changed since the last resume)
//	materialize  `resume` (no --check) of the  zstd -d < layer | tar -x of the ref's
//	             ref of generation g: g layers  g layers in order into one directory
//
// Generation 1 is a runtime container's suspend; every later generation
// resumes the previous ref into a new incarnation (timed: the
// materialization of a ref with g layers), starts its task (untimed),
// writes the 8 MiB (256 rewritten files, 256 new ones; half pseudo-random,
// half text) into its upper directory and suspends it (timed). The chain
// stops at SR_BENCH_GENERATIONS generations (default snapshot.MaxLayers,
// 16: the last generation with one layer per generation, never
// flattened). Each op is timed beside its baseline in an order that
// rotates with the generation (suspend: its baseline first, since the
// suspend deletes an incarnation's upper directory), with sync before
// every timing. One b.N
// iteration runs SR_BENCH_CHAINS chains (default 1), each a new run;
// use -benchtime 1x (go test runs a benchmark with b.N = 1 before any
// larger -benchtime Nx, so Nx would time 1 + N iterations).
//
// With SR_BENCH_OUT set, every timing is appended to that file as a
// tab-separated row "generation op chain ms" (op: suspend, suspend-base,
// materialize, materialize-base; for materialize the generation is the
// layer count). It reports the medians of the first and last generation
// as metrics; nothing is asserted about time.
func BenchmarkGenerationChain(b *testing.B) {
	gens, chains := snapshot.MaxLayers, 1
	if s := os.Getenv("SR_BENCH_CHAINS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("SR_BENCH_CHAINS=%q: want a count ≥ 1", s)
		}
		chains = n
	}
	if s := os.Getenv("SR_BENCH_GENERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > snapshot.MaxLayers {
			b.Fatalf("SR_BENCH_GENERATIONS=%q: want 1 to %d", s, snapshot.MaxLayers)
		}
		gens = n
	}
	r := &genRig{d: harness.Start(b, "benchchain")}
	r.im = harness.ImportBusybox(b, r.d, "busybox:1")
	r.env = newSuspendEnv(b, "busybox:1")
	d := r.d
	ctx := d.Context(b)
	var rows *os.File
	if p := os.Getenv("SR_BENCH_OUT"); p != "" {
		var err error
		if rows, err = os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
	}
	times := map[string][]time.Duration{} // "op/g" → timings
	record := func(op string, g, chain int, took time.Duration) {
		k := fmt.Sprintf("%s/%d", op, g)
		times[k] = append(times[k], took)
		if rows != nil {
			fmt.Fprintf(rows, "%d\t%s\t%d\t%.1f\n", g, op, chain, float64(took.Microseconds())/1000)
		}
	}
	timed := func(f func()) time.Duration {
		unix.Sync()
		start := time.Now()
		f()
		return time.Since(start)
	}
	// both runs ours and base in an order that rotates with k.
	both := func(k int, ours, base func()) {
		if k%2 == 0 {
			ours()
			base()
		} else {
			base()
			ours()
		}
	}
	change := func(upper string, g int) {
		half := chainChangedBytes / 2 / benchFileBytes
		writeGenFiles(b, filepath.Join(upper, "run"), "f", half, uint64(1000+g))
		writeGenFiles(b, filepath.Join(upper, "new"), fmt.Sprintf("g%d-", g), half, uint64(2000+g))
		unix.Sync()
	}
	dir := b.TempDir()
	cli(b) // built before the first timing
	b.ResetTimer()
	for range b.N * chains {
		b.StopTimer()
		chain := chainsRun
		chainsRun++
		run := fmt.Sprintf("bench-chain-%d-%d", chain, time.Now().UnixNano())
		layerDir := filepath.Join(dir, run)
		if err := os.MkdirAll(layerDir, 0o755); err != nil {
			b.Fatal(err)
		}
		var layerFiles []string
		cid := scriptContainer(b, d, r.im.Name, fmt.Sprintf("bc%d", chain), idle)
		holder, latest := cid, ""
		for g := 1; g <= gens; g++ {
			upper := upperDir(b, ctx, d, holder)
			change(upper, g)
			out := filepath.Join(layerDir, fmt.Sprintf("g%d.json", g))
			// The baseline first: suspending an incarnation deletes it
			// with its snapshot, upper directory included.
			record("suspend-base", g, chain, timed(func() { tarZstdSha(b, upper) }))
			var ref *snapshot.Ref
			record("suspend", g, chain, timed(func() {
				if g == 1 {
					_, ref = r.suspend(b, holder, run, out)
				} else {
					_, ref = r.suspend(b, holder, "", out)
				}
			}))
			if len(ref.Layers) != g {
				b.Fatalf("generation %d of %s has %d layers, want %d (flattened?)", g, run, len(ref.Layers), g)
			}
			latest = out
			// The new layer's blob, for the baseline (untimed).
			l := ref.Layers[g-1]
			blob, err := content.ReadBlob(ctx, d.Client.ContentStore(), ocispec.Descriptor{MediaType: l.MediaType, Digest: l.Digest, Size: l.Size})
			if err != nil {
				b.Fatalf("layer %d of %s: %v", g, run, err)
			}
			lf := filepath.Join(layerDir, fmt.Sprintf("layer%02d.zst", g))
			if err := os.WriteFile(lf, blob, 0o644); err != nil {
				b.Fatal(err)
			}
			layerFiles = append(layerFiles, lf)

			inc := d.ID(fmt.Sprintf("bc%d-g%d", chain, g))
			dst := filepath.Join(layerDir, fmt.Sprintf("base%d", g))
			both(g+chain, func() {
				record("materialize", g, chain, timed(func() { r.resume(b, latest, inc) }))
			}, func() {
				record("materialize-base", g, chain, timed(func() { untarLayers(b, dst, layerFiles) }))
			})
			if err := os.RemoveAll(dst); err != nil {
				b.Fatal(err)
			}
			startWaiting(b, d, inc)
			holder = inc
		}
		// The chain's end (untimed): its last incarnation and the run go.
		deleteContainer(b, ctx, d, holder)
		if _, code := runCLI(b, d, "discard", "--run", run, "--force"); code != 0 {
			b.Fatalf("discard %s: exit %d", run, code)
		}
		if err := os.RemoveAll(layerDir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	for _, op := range []string{"suspend", "materialize"} {
		for _, g := range []int{1, gens} {
			ours, base := median(times[fmt.Sprintf("%s/%d", op, g)]), median(times[fmt.Sprintf("%s-base/%d", op, g)])
			b.ReportMetric(float64(ours.Milliseconds()), fmt.Sprintf("%s-g%d-ms", op, g))
			b.ReportMetric(float64(ours)/float64(base), fmt.Sprintf("%s-g%d-x", op, g))
		}
	}
}

// untarLayers applies zstd-compressed tar layers in order into dst with
// `zstd -d | tar -x` (whiteouts stay files: the baseline's work is the
// decompression and the writes).
func untarLayers(b *testing.B, dst string, layers []string) {
	b.Helper()
	script := `set -e; d=$1; shift; mkdir -p "$d"; for l; do zstd -d -q -c "$l" | tar -x -C "$d"; done`
	cmd := exec.Command("bash", append([]string{"-o", "pipefail", "-c", script, "bash", dst}, layers...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("zstd -d | tar -x of %d layers: %v: %s", len(layers), err, out)
	}
}

// deleteContainer kills the task of container id, if any, and deletes the
// container with its snapshot; a container that is already gone is fine.
func deleteContainer(b *testing.B, ctx context.Context, d *harness.Daemon, id string) {
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
