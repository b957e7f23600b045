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
	"sync"
	"testing"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/ledger"
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
// step beside its baseline on the same bytes, in rotating order
// (docs/design.md "Performance goals"; bench/run.sh reads the rows):
//
//	suspend      `suspend` of a running task     tar -c | zstd -1 | sha256sum of the upper dir
//	export       `export --ref --out run.tar`    tar -cf files.tar of the upper dir && sync files.tar
//	import       `import run.tar` on a 2nd host  tar -xf files.tar && sha256sum files.tar && sync
//	materialize  `resume` (no --check)           zstd -d < the diff blob | tar -x
//	running      `resume --start` on the 2nd     zstd -d < the diff blob | tar -x, then
//	             host (the imported ref)         `ctr run -d` of the base image there
//
// The pause window (op "pause": the task's /tasks/paused event to its
// /tasks/resumed or /tasks/exit event, daemon timestamps) is recorded for
// every suspend. The changed files are writeChanges' mix
// (BenchmarkSuspend), of the sizes in SR_BENCH_SIZES ("MIB:RUNS,...",
// default "256:5"); each size runs its RUNS lifecycles inside one b.N
// iteration (use -benchtime 1x). Caches are flushed to disk (sync) before
// every timed step, never dropped. Both daemons are warm: the base image is
// unpacked on each before the first timing.
//
// With SR_BENCH_PREV_CLI naming another sandbox-resume binary (say, built
// from main), suspend and export are also timed with it in the same
// rotation (ops "suspend-prev", "pause-prev", "export-prev",
// "materialize-prev", "running-prev"): a before and after measured under
// the same load. Each resume then first makes the run resumable again,
// untimed: its container removed, its record purged (run lease and blobs
// kept) and a synchronous garbage collection, so every resume applies the
// layer (resumeAgain).
//
// With SR_BENCH_OUT set, every timing is appended to that file as a
// tab-separated row "MiB op run ms" (op: suspend, suspend-base, pause,
// export, export-base, import, import-base, materialize, materialize-base,
// running, running-base, and the -prev ops); the medians and ratios are
// also reported as metrics.
func BenchmarkMoveLifecycle(b *testing.B) {
	a := harness.Start(b, "benchlifea")
	h2 := harness.Start(b, "benchlifeb")
	im := harness.ImportBusybox(b, a, "busybox:1")
	harness.ImportBusybox(b, h2, "busybox:1")
	prevCLI := os.Getenv("SR_BENCH_PREV_CLI")
	dir := b.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	// Pinned by digest: the ref resumes on the second host too.
	if err := os.WriteFile(cfg, []byte(`{"image": "busybox:1@`+im.Index.String()+`", "name": "bench"}`), 0o644); err != nil {
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
	run := func(bin string, d *harness.Daemon, args ...string) string {
		b.Helper()
		args = append([]string{"--address", d.Address, "--namespace", d.Namespace}, args...)
		cmd := exec.Command(bin, args...)
		cmd.Env = cliEnv(args)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s %s: %v: %s%s", bin, strings.Join(args, " "), err, stderr.String(), stdout.String())
		}
		return stdout.String()
	}
	cli2 := func(d *harness.Daemon, args ...string) string {
		b.Helper()
		return run(cli(b), d, args...)
	}
	ctxA, ctx2 := a.Context(b), h2.Context(b)
	// Warm daemons: the base image unpacked on both hosts.
	for _, d := range []*harness.Daemon{a, h2} {
		img, err := d.Client.GetImage(d.Context(b), im.Name)
		if err != nil {
			b.Fatal(err)
		}
		if err := img.Unpack(d.Context(b), "overlayfs"); err != nil {
			b.Fatal(err)
		}
	}
	pw := watchPauses(b, ctxA, a)
	cli(b) // built before the first timing
	ctrBin := filepath.Join(harness.Binaries(b), "ctr")
	removeContainer := func(ctx context.Context, d *harness.Daemon, id string) {
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
	for _, sz := range perfSizes(b) {
		mib, runs := sz[0], sz[1]
		cid := runningContainer(b, a, im.Name, fmt.Sprintf("life%d", mib))
		upper := upperDir(b, ctxA, a, cid)
		writeChanges(b, filepath.Join(upper, "bench"), int64(mib)<<20)
		unix.Sync()
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			times := map[string][]time.Duration{}
			record := func(op string, run int, d time.Duration) {
				times[op] = append(times[op], d)
				if rows != nil {
					fmt.Fprintf(rows, "%d\t%s\t%d\t%.1f\n", mib, op, run, float64(d.Microseconds())/1000)
				}
			}
			timed := func(op string, run int, f func()) {
				unix.Sync()
				start := time.Now()
				f()
				record(op, run, time.Since(start))
			}
			// rotate times the variants of one op in an order that
			// rotates with i: ours, base[, prev].
			rotate := func(i int, op string, fs ...func()) {
				names := []string{op, op + "-base", op + "-prev"}
				for k := range fs {
					j := (i + k) % len(fs)
					timed(names[j], i, fs[j])
				}
			}
			// rotateUntimed runs fs in the order rotate would; each
			// times itself (the resume ops, which first reset the run
			// outside the timing when there is a -prev op).
			rotateUntimed := func(i int, fs ...func()) {
				for k := range fs {
					fs[(i+k)%len(fs)]()
				}
			}
			for range b.N {
				for i := range runs {
					w := filepath.Join(dir, fmt.Sprintf("w%d-%d", mib, i))
					if err := os.MkdirAll(w, 0o755); err != nil {
						b.Fatal(err)
					}
					runID := fmt.Sprintf("life-%d-%d-%d", mib, i, time.Now().UnixNano())
					refPath := filepath.Join(w, "ref.json")
					suspendOps := []func(){func() {
						unsuspend(b, ctxA, a, cid)
						startTask(b, ctxA, a, cid)
						pw.reset()
						timed("suspend", i, func() {
							cli2(a, "suspend", "--container", cid, "--config", cfg, "--key", key, "--run", runID, "--out", refPath)
						})
						if w := pw.window(b, cid); w >= 0 {
							record("pause", i, w)
						}
					}, func() { timed("suspend-base", i, func() { tarZstdSha(b, upper) }) }}
					if prevCLI != "" {
						suspendOps = append(suspendOps, func() {
							unsuspend(b, ctxA, a, cid)
							startTask(b, ctxA, a, cid)
							pw.reset()
							timed("suspend-prev", i, func() {
								run(prevCLI, a, "suspend", "--container", cid, "--config", cfg, "--key", key, "--run", runID+"-prev", "--out", filepath.Join(w, "prev.json"))
							})
							if w := pw.window(b, cid); w >= 0 {
								record("pause-prev", i, w)
							}
							run(prevCLI, a, "discard", "--run", runID+"-prev")
						})
					}
					for k := range suspendOps {
						suspendOps[(i+k)%len(suspendOps)]()
					}
					refFile, err := os.ReadFile(refPath)
					if err != nil {
						b.Fatal(err)
					}
					ref, err := snapshot.OpenRef(refFile, trust)
					if err != nil {
						b.Fatal(err)
					}
					runTar, filesTar := filepath.Join(w, "run.tar"), filepath.Join(w, "files.tar")
					exportOps := []func(){
						func() { cli2(a, "export", "--ref", refPath, "--out", runTar) },
						func() { sh(`tar -cf "$1" -C "$2" . && sync "$1"`, filesTar, upper) },
					}
					if prevCLI != "" {
						exportOps = append(exportOps, func() { run(prevCLI, a, "export", "--ref", refPath, "--out", filepath.Join(w, "prev.tar")) })
					}
					rotate(i, "export", exportOps...)
					os.Remove(filepath.Join(w, "prev.tar"))
					layer := filepath.Join(w, "layer.zst")
					sh(`tar -xOf "$1" "blobs/sha256/$2" > "$3"`, runTar, ref.Layers[0].Digest.Encoded(), layer)
					dstI := filepath.Join(w, "import-base")
					imported := filepath.Join(w, "imported.json")
					rotate(i, "import", func() {
						cli2(h2, "import", runTar, "--trust", pub, "--out", imported)
					}, func() {
						sh(`mkdir -p "$2" && tar -xf "$1" -C "$2" && sha256sum "$1" >/dev/null && sync`, filesTar, dstI)
					})
					dstM := filepath.Join(w, "materialize-base")
					mat := "mat-" + runID
					matOps := []func(){func() {
						if prevCLI != "" {
							resumeAgain(b, a, mat, runID, refPath)
						}
						timed("materialize", i, func() {
							cli2(a, "resume", "--ref", refPath, "--config", cfg, "--trust", pub, "--container", mat)
						})
					}, func() {
						timed("materialize-base", i, func() { sh(`mkdir -p "$2" && zstd -d -q -c "$1" | tar -x -C "$2"`, layer, dstM) })
					}}
					if prevCLI != "" {
						matOps = append(matOps, func() {
							resumeAgain(b, a, mat, runID, refPath)
							timed("materialize-prev", i, func() {
								run(prevCLI, a, "resume", "--ref", refPath, "--config", cfg, "--trust", pub, "--container", mat)
							})
						})
					}
					rotateUntimed(i, matOps...)
					dstR := filepath.Join(w, "running-base")
					started, baseRun := "run-"+runID, "base-"+runID
					runOps := []func(){func() {
						if prevCLI != "" {
							resumeAgain(b, h2, started, runID, imported)
						}
						timed("running", i, func() {
							cli2(h2, "resume", "--copy", "--ref", imported, "--config", cfg, "--trust", pub, "--container", started, "--start")
						})
					}, func() {
						timed("running-base", i, func() {
							sh(`mkdir -p "$2" && zstd -d -q -c "$1" | tar -x -C "$2" && "$3" -a "$4" -n "$5" run -d --snapshotter overlayfs "$6" "$7" >/dev/null`,
								layer, dstR, ctrBin, h2.Address, h2.Namespace, im.Name, baseRun)
						})
					}}
					if prevCLI != "" {
						runOps = append(runOps, func() {
							resumeAgain(b, h2, started, runID, imported)
							timed("running-prev", i, func() {
								run(prevCLI, h2, "resume", "--ref", imported, "--config", cfg, "--trust", pub, "--container", started, "--start")
							})
						})
					}
					rotateUntimed(i, runOps...)
					// Clean up outside the timings: the materialized and
					// started containers with their snapshots, both runs
					// (synchronous GC), the files.
					removeContainer(ctxA, a, mat)
					removeContainer(ctx2, h2, started)
					removeContainer(ctx2, h2, baseRun)
					cli2(a, "discard", "--run", runID, "--force")
					cli2(h2, "discard", "--run", runID, "--force")
					if err := os.RemoveAll(w); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			for _, op := range []string{"suspend", "export", "import", "materialize", "running"} {
				ours, base := median(times[op]), median(times[op+"-base"])
				b.ReportMetric(float64(ours.Milliseconds()), op+"-ms")
				b.ReportMetric(float64(base.Milliseconds()), op+"-base-ms")
				b.ReportMetric(float64(ours)/float64(base), op+"-x")
				if prev := times[op+"-prev"]; len(prev) > 0 {
					b.ReportMetric(float64(median(prev).Milliseconds()), op+"-prev-ms")
				}
			}
			if p := times["pause"]; len(p) > 0 {
				b.ReportMetric(float64(median(p).Milliseconds()), "pause-ms")
			}
			if p := times["pause-prev"]; len(p) > 0 {
				b.ReportMetric(float64(median(p).Milliseconds()), "pause-prev-ms")
			}
		})
	}
}

// resumeAgain makes run resumable again on d as if never resumed, for a
// second timing of the same ref (the -prev ops): container id (with its
// task and snapshot) is removed, the run's record purged and refPath's
// generation 1 recorded again (its run lease and blobs stay) and a synchronous garbage collection drops the applied
// chain snapshot, so the next resume applies the layer again. Nothing
// of it is timed.
func resumeAgain(b *testing.B, d *harness.Daemon, id, run, refPath string) {
	b.Helper()
	ctx := d.Context(b)
	if c, err := d.Client.LoadContainer(ctx, id); err == nil {
		if t, err := c.Task(ctx, nil); err == nil {
			if _, err := t.Delete(ctx, client.WithProcessKill); err != nil {
				b.Fatalf("delete task %s: %v", id, err)
			}
		}
		if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
			b.Fatalf("delete %s: %v", id, err)
		}
	}
	l := daemonLedger(b, d, "")
	defer l.Close()
	if _, err := l.Get(ctx, run); err == nil {
		if _, err := l.Discard(ctx, run, true); err != nil {
			b.Fatalf("discard the record of %s: %v", run, err)
		}
		if _, err := l.Purge(ctx, run); err != nil {
			b.Fatalf("purge the record of %s: %v", run, err)
		}
		// Turn 3: a purged run is never claimed again; its generation 1
		// is recorded once more, as a suspend here would (fence kept).
		file, err := os.ReadFile(refPath)
		if err != nil {
			b.Fatal(err)
		}
		host, err := d.Connect(b, "").Host(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Suspended(ctx, ledger.SuspendRequest{Run: run, Generation: 1, Ref: digest.FromBytes(file),
			Container: ledger.Container{Host: host.ID, Namespace: d.Namespace, ID: id + "-reset"}, Created: time.Now()}); err != nil {
			b.Fatalf("record generation 1 of %s again: %v", run, err)
		}
	}
	ls := d.Client.LeasesService()
	gc, err := ls.Create(ctx, leases.WithRandomID())
	if err != nil {
		b.Fatal(err)
	}
	if err := ls.Delete(ctx, gc, leases.SynchronousDelete); err != nil {
		b.Fatal(err)
	}
}

// pauseWatcher follows a daemon's task events and measures the pause
// window of a container: its /tasks/paused event to the next
// /tasks/resumed or /tasks/exit event, by the daemon's timestamps.
type pauseWatcher struct {
	mu     sync.Mutex
	paused map[string]time.Time
	ended  map[string]time.Duration
}

func watchPauses(b *testing.B, ctx context.Context, d *harness.Daemon) *pauseWatcher {
	b.Helper()
	pw := &pauseWatcher{paused: map[string]time.Time{}, ended: map[string]time.Duration{}}
	ch, errs := d.Client.Subscribe(ctx, `topic~="^/tasks/"`, `topic=="/bench/ready"`)
	ready := make(chan struct{})
	go func() {
		for {
			select {
			case e := <-ch:
				id, ok := e.Field([]string{"event", "container_id"})
				if !ok {
					continue
				}
				if os.Getenv("SR_BENCH_DEBUG") != "" {
					fmt.Fprintf(os.Stderr, "event %s (got %s) %s %s\n", e.Timestamp.Format(time.StampMicro), time.Now().Format(time.StampMicro), e.Topic, id)
				}
				pw.mu.Lock()
				switch e.Topic {
				case "/bench/ready":
					if ready != nil {
						close(ready)
						ready = nil
					}
				case "/tasks/paused":
					pw.paused[id] = e.Timestamp
				case "/tasks/resumed", "/tasks/exit", "/tasks/delete":
					if t, ok := pw.paused[id]; ok {
						pw.ended[id] = e.Timestamp.Sub(t)
						delete(pw.paused, id)
					}
				}
				pw.mu.Unlock()
			case err := <-errs:
				if err != nil && ctx.Err() == nil {
					b.Logf("events: %v", err)
				}
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	// The subscription is made asynchronously: publish until an event
	// comes back through it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		pw.mu.Lock()
		r := ready
		pw.mu.Unlock()
		if r == nil {
			return pw
		}
		if err := d.Client.EventService().Publish(ctx, "/bench/ready", &apievents.TaskPaused{ContainerID: "ready"}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-r:
			return pw
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatal("the event subscription did not start within 10 s")
		}
	}
}

func (pw *pauseWatcher) reset() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	clear(pw.paused)
	clear(pw.ended)
}

// window waits (10 s at most: events are delivered asynchronously) for
// the end of the container's pause and returns its length, or -1 when the
// events did not come.
func (pw *pauseWatcher) window(b *testing.B, id string) time.Duration {
	b.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		pw.mu.Lock()
		w, ok := pw.ended[id]
		pw.mu.Unlock()
		if ok {
			return w
		}
	}
	// The shim's events are published asynchronously and, under load,
	// some never arrive: that run has no pause figure.
	b.Logf("no paused → resumed/exit/delete events for task %s within 10 s", id)
	return -1
}
