package integration

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// Sizes of BenchmarkSuspendGeneration2: the run (its generation 1 layer)
// and what changes before the measured suspend.
const (
	benchRunBytes     = 256 << 20 // 256 MiB …
	benchFileBytes    = 16 << 10  // … in 16 KiB files: 16,384 files (≥ 10,000)
	benchChangedBytes = 8 << 20   // 8 MiB: 256 files rewritten, 256 new
)

// BenchmarkSuspendGeneration2 measures the suspend of an incarnation —
// generation 2 and later of a run, whose layer holds only what changed
// since its resume (docs/design.md "SnapshotRef": a later generation
// costs what changed, not the whole run) — in a 256 MiB run of 16,384
// files after 8 MiB changed (half of it rewritten files, half new files;
// half pseudo-random, half text), net of the same suspend with nothing
// changed (the fixed cost: process start, ledger, pause, stop, deleting
// the incarnation), against `tar -c | zstd -1 | sha256sum` over the 8 MiB
// (the incarnation's overlayfs upper directory).
//
// Each iteration resumes the run's latest generation twice (outside the
// timer): the first incarnation is suspended with nothing changed, the
// second after the 8 MiB changed; a run whose next generation would
// exceed 14 layers is replaced by a fresh one, so no suspend measured
// here is flattened. It reports the medians changed-ms, unchanged-ms, their
// difference net-ms, pipeline-ms, the ratio x-pipeline (net over
// pipeline) and the measured layer's size; nothing is asserted about
// time. Run it with -benchtime 3x or more:
//
//	go test -run '^$' -bench BenchmarkSuspendGeneration2 -benchtime 3x ./test/integration
func BenchmarkSuspendGeneration2(b *testing.B) {
	r := &genRig{d: harness.Start(b, "benchgen")}
	r.im = harness.ImportBusybox(b, r.d, "busybox:1")
	r.env = newSuspendEnv(b, "busybox:1")
	d := r.d
	ctx := d.Context(b)

	var (
		run    string
		latest string // the ref file of the run's latest generation
		layers int    // its layers
		runs   int
		n      int
	)
	// fresh makes a new run: a runtime container with the 256 MiB written
	// into its snapshot, suspended as generation 1.
	fresh := func() {
		runs++
		run = fmt.Sprintf("bench-gen-%d", runs)
		cid := scriptContainer(b, d, r.im.Name, fmt.Sprintf("bg%d", runs), idle)
		writeGenFiles(b, filepath.Join(upperDir(b, ctx, d, cid), "run"), "f", benchRunBytes/benchFileBytes, 1)
		unix.Sync()
		latest = filepath.Join(r.env.dir, run+".g1.json")
		_, ref := r.suspend(b, cid, run, latest)
		layers = len(ref.Layers)
	}
	// incarnation resumes the latest generation into a new container with
	// a running task.
	incarnation := func() string {
		n++
		id := d.ID(fmt.Sprintf("bgi%d", n))
		r.resume(b, latest, id)
		startWaiting(b, d, id)
		return id
	}
	// suspend times the suspend process of id.
	suspend := func(id string) (time.Duration, *snapshot.Ref) {
		out := filepath.Join(r.env.dir, fmt.Sprintf("%s.i%d.json", run, n))
		start := time.Now()
		_, ref := r.suspend(b, id, "", out)
		took := time.Since(start)
		latest, layers = out, len(ref.Layers)
		return took, ref
	}

	var changed, unchanged, pipe []time.Duration
	var size int64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if runs == 0 || layers+2 > 14 {
			fresh()
		}
		quiet := incarnation()
		// As before the changed suspend: the resume's writes reach the
		// disk outside the timer (else the suspend's fsyncs wait for them,
		// and nothing changed costs more than 8 MiB changed).
		unix.Sync()
		b.StartTimer()
		t0, _ := suspend(quiet)
		b.StopTimer()
		unchanged = append(unchanged, t0)

		busy := incarnation()
		upper := upperDir(b, ctx, d, busy)
		// Rewrite 256 of the run's files (their new content shadows the
		// old in the upper directory, as a copy-up leaves it) and add 256.
		writeGenFiles(b, filepath.Join(upper, "run"), "f", benchChangedBytes/2/benchFileBytes, uint64(100+i))
		writeGenFiles(b, filepath.Join(upper, "new"), fmt.Sprintf("n%d-", i), benchChangedBytes/2/benchFileBytes, uint64(200+i))
		unix.Sync()
		timePipe := func() {
			start := time.Now()
			tarZstdSha(b, upper)
			pipe = append(pipe, time.Since(start))
		}
		var t1 time.Duration
		var ref *snapshot.Ref
		b.StartTimer()
		if i%2 == 1 {
			timePipe()
		}
		t1, ref = suspend(busy)
		if i%2 == 0 {
			timePipe()
		}
		b.StopTimer()
		changed = append(changed, t1)
		size = ref.Layers[len(ref.Layers)-1].Size
		b.StartTimer()
	}
	b.StopTimer()
	mc, mu, mp := median(changed), median(unchanged), median(pipe)
	net := mc - mu
	b.ReportMetric(float64(mc.Milliseconds()), "changed-ms")
	b.ReportMetric(float64(mu.Milliseconds()), "unchanged-ms")
	b.ReportMetric(float64(net.Milliseconds()), "net-ms")
	b.ReportMetric(float64(mp.Milliseconds()), "pipeline-ms")
	b.ReportMetric(float64(net)/float64(mp), "x-pipeline")
	b.ReportMetric(float64(size)/(1<<20), "layer-MiB")
	b.Logf("%d iterations: suspend after 8 MiB changed %v, with nothing changed %v, tar|zstd -1|sha256sum of the 8 MiB %v",
		len(changed), changed, unchanged, pipe)
}

// writeGenFiles writes count files of benchFileBytes under dir, named
// <prefix><i>, alternately pseudo-random and text (seeded by seed).
func writeGenFiles(b *testing.B, dir, prefix string, count int, seed uint64) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	p := make([]byte, benchFileBytes)
	var text bytes.Buffer
	for i := range count {
		if i%2 == 0 {
			for k := 0; k+8 <= len(p); k += 8 {
				v := rng.Uint64()
				for j := range 8 {
					p[k+j] = byte(v >> (8 * j))
				}
			}
		} else {
			text.Reset()
			for text.Len() < len(p) {
				fmt.Fprintf(&text, "line %d of file %d: %x\n", text.Len(), i, rng.Uint32())
			}
			copy(p, text.Bytes())
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%05d", prefix, i)), p, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
