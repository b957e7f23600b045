package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host/hosttest"
	ctrd "github.com/sandbox-resume/sandbox-resume/runtime/containerd"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// secondLayer is the extra parent layer of TestDifferTrees' two-lower case
// ("->" makes a symlink, a trailing "/" a directory): files the container
// changes, deletes or replaces, a whiteout that hides the busybox layer's
// /bin/wc, so that only the merged parent view (not the top lower
// directory alone) tells what the container deleted, an absolute symlink
// to a path that exists nowhere (os.Stat of it fails), and a directory the
// container deletes and recreates with an empty subdirectory whose mode,
// size and times equal the parent's (fs.DiffDirChanges would skip it as
// unchanged).
var secondLayer = []struct{ name, data string }{
	{"lower2/abs", "->/sandbox-resume-nonexistent/target"},
	{"lower2/ref.txt", "a file with the epoch as mtime\n"},
	{"opq2/emptysub/", ""},
	{"opq2/file.txt", "in opq2\n"},
	{"lower2/keep.txt", "keep\n"},
	{"lower2/keep2.txt", "keep2\n"},
	{"lower2/del.txt", "delete me\n"},
	{"lower2/f2.txt", "becomes a directory\n"},
	{"lower2/re.txt", "recreated\n"},
	{"lower2/sub/a.txt", "a\n"},
	{"lower2/sub/b/c.txt", "c\n"},
	{"opq/old1.txt", "old1\n"},
	{"opq/old2/x.txt", "x\n"},
	{"bin/.wh.wc", ""},
}

// changes is what the container does to its file system before the diff:
// adds, a nested add, modifications, metadata-only changes, deletions of
// files of either parent layer (whiteouts), a deleted directory tree, a
// directory deleted and recreated (opaque), a file replaced by a directory,
// a file deleted and recreated, symlinks, hardlinks, empty files and
// directories, and files created and deleted again (no trace).
const changes = `set -e
echo new > /new.txt
mkdir -p /a/b/c && echo deep > /a/b/c/d.txt
ln -s /new.txt /link
ln /new.txt /hard
mkdir /emptydir && touch /empty.txt
echo gone > /gone.txt && rm /gone.txt
mkdir -p /d2 && echo 1 > /d2/x && rm -r /d2
rm /etc/sandbox-resume-marker
chmod 700 /bin/busybox
case $1 in *lowers*)
  echo changed > /lower2/keep.txt
  chmod 600 /lower2/keep2.txt
  rm /lower2/del.txt
  rm -r /lower2/sub
  rm /lower2/re.txt && echo again > /lower2/re.txt
  ln -s /bin/busybox /bin/wc
  rm /lower2/abs
esac
case $1 in *opaque*)
  rm /lower2/f2.txt && mkdir /lower2/f2.txt && echo in > /lower2/f2.txt/in.txt
  rm -r /opq && mkdir /opq && echo fresh > /opq/f.txt
  rm -r /opq2 && mkdir -p /opq2/emptysub && touch -r /lower2/ref.txt /opq2/emptysub
esac
echo READY
exec sleep 3600`

// TestDifferTrees checks the in-process overlayfs differ against the
// container's own view: the layer it writes, applied over the snapshot's
// parent by the daemon's diff service, gives exactly the tree the container
// sees (names, types, modes, owners, sizes, content, link targets, link
// counts), with a parent of one layer (no mount: the lower directory
// itself) and of two layers (a detached read-only overlay of the lower
// directories). The diff service's layer is checked the same way, the
// in-process layer carries the whiteouts and the opaque marker, and both
// layers have the same diffID-independent content.
func TestDifferTrees(t *testing.T) {
	d := harness.Start(t, "differ")
	im := harness.ImportBusybox(t, d, "busybox:1")
	ctx := d.Context(t)
	img, err := d.Client.GetImage(ctx, im.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatal(err)
	}
	auto := d.Connect(t, "")
	service := d.Connect(t, "", ctrd.WithDiffer(ctrd.DifferService))
	sn := d.Client.SnapshotService("overlayfs")

	// The parent chains: busybox alone, and busybox + secondLayer.
	ls := d.Client.LeasesService()
	hold, err := ls.Create(ctx, leases.WithRandomID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ls.Delete(context.WithoutCancel(ctx), hold, leases.SynchronousDelete) })
	hctx := leases.WithLease(ctx, hold.ID)
	layer2 := tarOf(t, secondLayer)
	l2desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: digest.FromBytes(layer2), Size: int64(len(layer2))}
	if err := content.WriteBlob(hctx, d.Client.ContentStore(), "layer2", bytes.NewReader(layer2), l2desc); err != nil {
		t.Fatal(err)
	}
	base := rootfs.Layer{Blob: im.Image.Layers[0], Diff: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: im.DiffIDs[0]}}
	two := []rootfs.Layer{base, {Blob: l2desc, Diff: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: l2desc.Digest}}}
	if _, err := rootfs.ApplyLayers(hctx, two, sn, d.Client.DiffService()); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		diffID  []digest.Digest
		entries []string // beside the common ones
	}{
		{"one-lower", im.DiffIDs, nil},
		{"two-lowers", []digest.Digest{im.DiffIDs[0], l2desc.Digest}, []string{
			"lower2/.wh.del.txt", "lower2/.wh.sub", "bin/wc", "lower2/.wh.abs", "lower2/re.txt"}},
		{"two-lowers-opaque", []digest.Digest{im.DiffIDs[0], l2desc.Digest}, []string{
			"opq/.wh..wh..opq", "opq/f.txt", "lower2/f2.txt/.wh..wh..opq", "lower2/f2.txt/in.txt", "opq2/.wh..wh..opq", "opq2/emptysub/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := identity.ChainID(tc.diffID).String()
			cid := d.ID("differ-" + tc.name)
			if _, err := sn.Prepare(hctx, cid, parent); err != nil { // under the lease: an unreferenced snapshot is collected
				t.Fatal(err)
			}
			c, err := d.Client.NewContainer(ctx, cid, client.WithSnapshotter("overlayfs"), client.WithSnapshot(cid),
				client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs("/bin/sh", "-c", changes, "sh", tc.name)))
			if err != nil {
				t.Fatal(err)
			}
			out := &syncBuffer{}
			task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(filepath.Join(d.Dir, "fifo"))))
			if err != nil {
				t.Fatal(err)
			}
			if err := task.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "READY"); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the container did not print READY: %q", out.String())
				}
			}
			if err := auto.PauseTask(ctx, cid); err != nil {
				t.Fatal(err)
			}
			sc, err := auto.Container(ctx, cid)
			if err != nil {
				t.Fatal(err)
			}
			ms, err := sn.Mounts(ctx, cid)
			if err != nil {
				t.Fatal(err)
			}
			want := treeOf(t, ms)

			layers := map[string]snapshot.Layer{}
			for name, rt := range map[string]*ctrd.Runtime{"in-process": auto, "diff service": service} {
				lease := snapshot.RunLease("differ-" + tc.name + "-" + strings.ReplaceAll(name, " ", "-"))
				if err := rt.CreateLease(ctx, lease, nil); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { rt.DeleteLease(context.WithoutCancel(ctx), lease) })
				start := time.Now()
				l, err := rt.CreateDiff(ctx, lease, sc, nil)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				t.Logf("%s: %s, %d bytes (%d uncompressed) in %v", name, l.Digest, l.Size, l.UncompressedSize, time.Since(start))
				hosttest.CheckDiff(t, captureProbe{rt}, l)
				layers[name] = l

				// Applied over the parent, the layer gives the container's tree.
				key := cid + "-apply-" + strings.ReplaceAll(name, " ", "-")
				am, err := sn.Prepare(hctx, key, parent)
				if err != nil {
					t.Fatal(err)
				}
				desc := ocispec.Descriptor{MediaType: l.MediaType, Digest: l.Digest, Size: l.Size}
				if _, err := d.Client.DiffService().Apply(hctx, desc, am); err != nil {
					t.Fatalf("%s: apply: %v", name, err)
				}
				if diff := compareTrees(want, treeOf(t, am)); diff != "" {
					t.Errorf("%s: the layer applied over the parent is not the container's tree:\n%s", name, diff)
				}
			}
			if a, s := layers["in-process"], layers["diff service"]; a.Digest == s.Digest {
				t.Errorf("both layers are %s: the in-process differ did not run", a.Digest)
			}

			entries := layerEntries(t, ctx, auto, layers["in-process"])
			wantEntries := []string{"etc/.wh.sandbox-resume-marker", "new.txt", "link", "hard", "a/b/c/d.txt", "emptydir/", "empty.txt", "bin/busybox"}
			for _, e := range append(wantEntries, tc.entries...) {
				if !slices.Contains(entries, e) {
					t.Errorf("the in-process layer has no entry %q; it has %q", e, entries)
				}
			}
			for _, e := range entries {
				if strings.Contains(e, "gone.txt") || strings.HasPrefix(e, "d2") {
					t.Errorf("the in-process layer has %q, which the container created and deleted", e)
				}
			}
			if err := auto.StopTask(ctx, cid); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// tarOf builds a layer tar of files (parents added, ".wh." names kept as
// whiteout entries, fixed times).
func tarOf(t *testing.T, files []struct{ name, data string }) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	epoch := time.Unix(0, 0)
	for _, f := range files {
		var parents []string
		for p := filepath.Dir(strings.TrimSuffix(f.name, "/")); p != "."; p = filepath.Dir(p) {
			parents = append([]string{p}, parents...)
		}
		for _, p := range parents {
			if !dirs[p] {
				dirs[p] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o755, ModTime: epoch}); err != nil {
					t.Fatal(err)
				}
			}
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}
		if target, ok := strings.CutPrefix(f.data, "->"); ok {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, target, 0
		} else if strings.HasSuffix(f.name, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(f.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// treeOf mounts ms read-only and describes every entry below the root: type
// and permission bits, owner, link count, and the size and sha256 of a
// regular file or the target of a symlink.
func treeOf(t *testing.T, ms []mount.Mount) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := mount.WithReadonlyTempMount(context.Background(), ms, func(root string) error {
		return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || p == root {
				return err
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			s := fmt.Sprintf("%v uid=%d gid=%d", fi.Mode(), st.Uid, st.Gid)
			switch {
			case fi.Mode().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				h := sha256.Sum256(b)
				s += fmt.Sprintf(" nlink=%d size=%d sha256=%s", st.Nlink, fi.Size(), hex.EncodeToString(h[:8]))
			case fi.Mode()&fs.ModeSymlink != 0:
				l, err := os.Readlink(p)
				if err != nil {
					return err
				}
				s += " -> " + l
			}
			rel, _ := filepath.Rel(root, p)
			tree[rel] = s
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// compareTrees lists the differences between two treeOf results ("" when
// equal).
func compareTrees(want, got map[string]string) string {
	var out []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			out = append(out, fmt.Sprintf("  missing %s (%s)", p, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("  %s: %s, want %s", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			out = append(out, fmt.Sprintf("  extra %s (%s)", p, g))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// layerEntries lists the entry names of a stored layer blob.
func layerEntries(t *testing.T, ctx context.Context, rt *ctrd.Runtime, l snapshot.Layer) []string {
	t.Helper()
	ra, err := rt.Client().ContentStore().ReaderAt(ctx, ocispec.Descriptor{Digest: l.Digest, Size: l.Size})
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	dr, err := compression.DecompressStream(io.NewSectionReader(ra, 0, ra.Size()))
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	var names []string
	tr := tar.NewReader(dr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// BenchmarkDiffer times CreateDiff alone on a paused container with
// writeChanges' mix of SR_BENCH_DIFF_MIB MiB (default 256) in its upper
// directory: the in-process differ (DifferAuto) and the diff service
// (DifferService, rootfs.CreateDiff plus the read-back), beside
// `tar -c | zstd -1 | sha256sum` of the upper directory, in rotating
// order; each diff is stored under a lease deleted (with its GC) outside
// the timing. Beside wall time it reports CPU time (this process, its
// children and the daemon: "<name>-cpu-ms"; the daemon's share alone
// "<name>-daemon-cpu-ms"), which a loaded machine disturbs less.
// SR_BENCH_DIFF_ONLY ("in-process,pipeline", say) limits what runs;
// SR_BENCH_PIDFILE names a file to write the daemon's pid to (for perf
// record -p) before the first timing. With -cpuprofile the profile is this
// process's: the in-process differ's client side.
func BenchmarkDiffer(b *testing.B) {
	mib := 256
	if v := os.Getenv("SR_BENCH_DIFF_MIB"); v != "" {
		if _, err := fmt.Sscan(v, &mib); err != nil {
			b.Fatal(err)
		}
	}
	d := harness.Start(b, "benchdiff")
	im := harness.ImportBusybox(b, d, "busybox:1")
	ctx := d.Context(b)
	cid := runningContainer(b, d, im.Name, "benchdiff")
	upper := upperDir(b, ctx, d, cid)
	writeChanges(b, filepath.Join(upper, "bench"), int64(mib)<<20)
	auto := d.Connect(b, "")
	if err := auto.PauseTask(ctx, cid); err != nil {
		b.Fatal(err)
	}
	sc, err := auto.Container(ctx, cid)
	if err != nil {
		b.Fatal(err)
	}
	rts := map[string]*ctrd.Runtime{"in-process": auto, "service": d.Connect(b, "", ctrd.WithDiffer(ctrd.DifferService))}
	times, cpu := map[string][]time.Duration{}, map[string][]time.Duration{}
	var sizes = map[string]int64{}
	dpid := daemonPID(b, d)
	if f := os.Getenv("SR_BENCH_PIDFILE"); f != "" {
		// For a profiler: the daemon's pid, then a moment to attach.
		if err := os.WriteFile(f, []byte(fmt.Sprint(dpid)), 0o644); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
	n := 0
	b.ResetTimer()
	for i := range b.N {
		order := []string{"in-process", "service", "pipeline"}
		if only := os.Getenv("SR_BENCH_DIFF_ONLY"); only != "" {
			order = strings.Split(only, ",")
		}
		for k := range order {
			name := order[(i+k)%len(order)]
			b.StopTimer()
			syscall.Sync()
			n++
			lease := snapshot.RunLease(fmt.Sprintf("benchdiff-%d", n))
			rt := rts[name]
			if rt != nil {
				if err := rt.CreateLease(ctx, lease, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			c0, d0 := cpuTime(b, dpid), cpuTime(b, dpid, true)
			start := time.Now()
			if rt == nil {
				tarZstdSha(b, upper)
			} else {
				l, err := rt.CreateDiff(ctx, lease, sc, nil)
				if err != nil {
					b.Fatal(err)
				}
				sizes[name] = l.Size
			}
			times[name] = append(times[name], time.Since(start))
			cpu[name] = append(cpu[name], cpuTime(b, dpid)-c0)
			cpu[name+"-daemon"] = append(cpu[name+"-daemon"], cpuTime(b, dpid, true)-d0)
			b.StopTimer()
			if rt != nil {
				if err := rt.DeleteLease(ctx, lease); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	for name, ts := range times {
		b.ReportMetric(float64(median(ts).Milliseconds()), name+"-ms")
	}
	for name, ts := range cpu {
		b.ReportMetric(float64(median(ts).Milliseconds()), name+"-cpu-ms")
	}
	for name, s := range sizes {
		b.ReportMetric(float64(s)/(1<<20), name+"-MiB")
	}
	if len(times["pipeline"]) > 0 && len(times["in-process"]) > 0 {
		b.ReportMetric(float64(median(times["in-process"]))/float64(median(times["pipeline"])), "in-process-x")
	}
	b.Logf("%d MiB: wall %v, CPU %v", mib, times, cpu)
}

// daemonPID finds the process id of the harness daemon d (its command line
// names its config file in d.Dir).
func daemonPID(b testing.TB, d *harness.Daemon) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(cmd), filepath.Join(harness.Binaries(b), "containerd")+"\x00") &&
			strings.Contains(string(cmd), d.Dir) {
			return pid
		}
	}
	b.Fatalf("no process of daemon %s", d.Name)
	return 0
}

// cpuTime is the CPU time (user + system) used so far by this process, its
// waited-for children and the process pid.
func cpuTime(b testing.TB, pid int, daemonOnly ...bool) time.Duration {
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		panic(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		panic(err)
	}
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	total := tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
	if len(daemonOnly) > 0 {
		total = 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		panic(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return total + time.Duration(ut+st)*10*time.Millisecond // USER_HZ 100
}

// BenchmarkDifferGeneration2 times CreateDiff of a container whose parent
// is a 256 MiB run of 12,160 files (busybox plus a committed snapshot: 160
// files of 1 MiB, 12,000 of 8 KiB) after 8 MiB changed (8 new files of
// 1 MiB in the container), and after nothing changed, beside
// `tar -c | zstd -1 | sha256sum` over the 8 MiB alone (docs/design.md "Performance
// goals", generation 2: the cost follows the change, not the run). The
// in-process differ walks the upper directory; the diff service walks both
// trees. Metrics: <differ>-ms (8 MiB changed), <differ>-empty-ms (nothing
// changed), pipeline-ms, and in-process-x = (in-process − in-process-empty)
// / pipeline.
func BenchmarkDifferGeneration2(b *testing.B) {
	d := harness.Start(b, "benchgen2")
	im := harness.ImportBusybox(b, d, "busybox:1")
	ctx := d.Context(b)
	img, err := d.Client.GetImage(ctx, im.Name)
	if err != nil {
		b.Fatal(err)
	}
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		b.Fatal(err)
	}
	sn := d.Client.SnapshotService("overlayfs")
	base := identity.ChainID(im.DiffIDs).String()
	ls := d.Client.LeasesService()
	hold, err := ls.Create(ctx, leases.WithRandomID())
	if err != nil {
		b.Fatal(err)
	}
	defer ls.Delete(context.WithoutCancel(ctx), hold, leases.SynchronousDelete)
	hctx := leases.WithLease(ctx, hold.ID)
	// Generation 1: 256 MiB in 12,160 files, committed (under a lease:
	// unreferenced snapshots are collected).
	g1 := d.ID("gen1")
	ms, err := sn.Prepare(hctx, g1+"-active", base)
	if err != nil {
		b.Fatal(err)
	}
	var upper1 string
	for _, o := range ms[0].Options {
		if v, ok := strings.CutPrefix(o, "upperdir="); ok {
			upper1 = v
		}
	}
	writeFiles(b, filepath.Join(upper1, "run"), 1<<20, 160, "large")
	writeFiles(b, filepath.Join(upper1, "run"), 8<<10, 12000, "small")
	if err := sn.Commit(hctx, g1, g1+"-active"); err != nil {
		b.Fatal(err)
	}
	cid := d.ID("gen2")
	if _, err := sn.Prepare(hctx, cid, g1); err != nil {
		b.Fatal(err)
	}
	c, err := d.Client.NewContainer(ctx, cid, client.WithSnapshotter("overlayfs"), client.WithSnapshot(cid),
		client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs("/bin/sh", "-c", "exec sleep 3600")))
	if err != nil {
		b.Fatal(err)
	}
	task, err := c.NewTask(ctx, cio.NullIO)
	if err != nil {
		b.Fatal(err)
	}
	if err := task.Start(ctx); err != nil {
		b.Fatal(err)
	}
	auto := d.Connect(b, "")
	if err := auto.PauseTask(ctx, cid); err != nil {
		b.Fatal(err)
	}
	sc, err := auto.Container(ctx, cid)
	if err != nil {
		b.Fatal(err)
	}
	upper := upperDir(b, ctx, d, cid)
	rts := map[string]*ctrd.Runtime{"in-process": auto, "service": d.Connect(b, "", ctrd.WithDiffer(ctrd.DifferService))}
	times := map[string][]time.Duration{}
	n := 0
	diff := func(name string) {
		n++
		lease := snapshot.RunLease(fmt.Sprintf("gen2-%d", n))
		rt := rts[strings.TrimSuffix(name, "-empty")]
		if err := rt.CreateLease(ctx, lease, nil); err != nil {
			b.Fatal(err)
		}
		syscall.Sync()
		start := time.Now()
		if _, err := rt.CreateDiff(ctx, lease, sc, nil); err != nil {
			b.Fatal(err)
		}
		times[name] = append(times[name], time.Since(start))
		if err := rt.DeleteLease(ctx, lease); err != nil {
			b.Fatal(err)
		}
	}
	// The function given to b.Run runs more than once; the set-up above
	// once.
	b.Run("256MiB-run-8MiB-changed", func(b *testing.B) {
		differGeneration2(b, times, diff, upper)
	})
}

func differGeneration2(b *testing.B, times map[string][]time.Duration, diff func(string), upper string) {
	for i := range b.N {
		// Nothing changed yet in this iteration's upper directory.
		if err := os.RemoveAll(filepath.Join(upper, "changed")); err != nil {
			b.Fatal(err)
		}
		for k := range 2 {
			diff([]string{"in-process-empty", "service-empty"}[(i+k)%2])
		}
		writeFiles(b, filepath.Join(upper, "changed"), 1<<20, 8, "new")
		order := []string{"in-process", "service", "pipeline"}
		for k := range order {
			name := order[(i+k)%len(order)]
			if name != "pipeline" {
				diff(name)
				continue
			}
			syscall.Sync()
			start := time.Now()
			tarZstdSha(b, filepath.Join(upper, "changed"))
			times[name] = append(times[name], time.Since(start))
		}
	}
	b.StopTimer()
	for name, ts := range times {
		b.ReportMetric(float64(median(ts).Microseconds())/1000, name+"-ms")
	}
	b.ReportMetric(float64(median(times["in-process"])-median(times["in-process-empty"]))/float64(median(times["pipeline"])), "in-process-x")
	b.ReportMetric(float64(median(times["service"])-median(times["service-empty"]))/float64(median(times["pipeline"])), "service-x")
	b.Logf("%v", times)
}

// writeFiles writes n files of size bytes under dir/sub, alternately
// pseudo-random and text.
func writeFiles(b testing.TB, dir string, size int64, n int, sub string) {
	b.Helper()
	if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
		b.Fatal(err)
	}
	text := bytes.Repeat([]byte("lorem ipsum dolor sit amet container snapshot lease digest\n"), int(size)/59+1)[:size]
	p := make([]byte, size)
	for i := range n {
		if i%2 == 0 {
			for j := range p {
				p[j] = byte(uint32(i*7919+j) * 2654435761 >> 24)
			}
		} else {
			copy(p, text)
		}
		if err := os.WriteFile(filepath.Join(dir, sub, fmt.Sprintf("f%05d", i)), p, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
