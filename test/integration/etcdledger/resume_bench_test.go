package etcdledger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/host/hosttest"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	etcdledger "github.com/sandbox-resume/sandbox-resume/ledger/etcd"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/etcdharness"
)

// fakeHost is a host with a base image, one run's diff and spec in an
// in-memory host (host/memhost): containerd faked, so that a
// resume costs its decision and its ledger transitions only.
type fakeHost struct {
	facts   *memhost.Machine
	m       *memhost.Machine
	key     ed25519.PrivateKey
	trust   *envelope.KeyRing
	ref     snapshot.Ref // a template: Run is set per run
	config  []byte
	cfgPath string
}

const benchConfig = `{"image": "busybox:1", "containerEnv": {"LANG": "C.UTF-8"}}`

func newFakeHost(b *testing.B) *fakeHost {
	b.Helper()
	host := snapshot.Host{ID: "bench-host", IDSource: snapshot.IDSourceIntrospection,
		ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: "linux/amd64"}
	facts := memhost.New(host)
	layer := []byte("base layer")
	cfg, _ := json.Marshal(ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: "amd64"},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(layer)}}})
	mf, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: facts.PutBlob(cfg), Size: int64(len(cfg))},
		Layers: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: facts.PutBlob(layer), Size: int64(len(layer))}}})
	if err := facts.SetImage("docker.io/library/busybox:1", ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: facts.PutBlob(mf), Size: int64(len(mf))}); err != nil {
		b.Fatal(err)
	}
	h := &fakeHost{facts: facts, m: facts, config: []byte(benchConfig), cfgPath: b.TempDir() + "/devcontainer.json"}
	m, err := envmanifest.Ingest(h.config, envmanifest.Options{Path: h.cfgPath})
	if err != nil {
		b.Fatal(err)
	}
	base, err := facts.ResolveImage(context.Background(), "busybox:1")
	if err != nil {
		b.Fatal(err)
	}
	blob, diff := hosttest.Diff(b, map[string]string{"data.txt": "hello\n"})
	facts.PutBlob(blob)
	spec := []byte(`{"ociVersion":"1.2.0","process":{"args":["sh"],"cwd":"/"},"root":{"path":"rootfs"}}`)
	h.ref = snapshot.Ref{Schema: snapshot.RefSchema, RunUID: "ruid:0123456789abcdef0123456789abcdef", Generation: 1, Manifest: m.Address, Core: m.Core, Pinned: m.IsPinned(),
		Policy: []string{}, Host: host, Base: base, Created: "2026-12-01T10:00:00Z", Layers: []snapshot.Layer{diff},
		Spec:    &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: facts.PutBlob(spec), Size: int64(len(spec))},
		Runtime: &snapshot.Runtime{Name: "io.containerd.runc.v2"}}
	h.key = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	h.trust = envelope.NewKeyRing(h.key.Public().(ed25519.PublicKey))
	return h
}

// request returns the resume request of a fresh run id (its ref signed).
func (h *fakeHost) request(b *testing.B, run string) resume.Request {
	b.Helper()
	ref := h.ref
	ref.Run = run
	file, err := snapshot.SignRef(&ref, h.key)
	if err != nil {
		b.Fatal(err)
	}
	return resume.Request{RefFile: file, RefSource: run + ".ref.json", Config: h.config, ConfigPath: h.cfgPath, Trust: h.trust}
}

// benchRound makes the run ids of every benchmark invocation distinct (one
// cluster serves all of a -count).
var benchRound atomic.Int64

// skipDiff is the fake materializer without the diff verification
// (snapshot.VerifyDiff, which runtime/containerd runs in the resumer's
// process on every layer): materialization faked entirely, so that a
// resume costs its decision and its ledger transitions.
type skipDiff struct{ *memhost.Machine }

func (skipDiff) CheckDiff(context.Context, snapshot.Layer) error { return nil }

// BenchmarkResumeDistinctRuns measures the throughput goal of
// docs/design.md ("Performance goals": ≥ 200 resumes/s of distinct runs through one etcd
// cluster, decision + claim, containerd faked): resume.Resume — the ten
// checks, the claim check's Get and the ledger's Claim, the faked
// materialization, Live — of distinct runs (no record yet: the first
// resume after an import) from 16 concurrent resumers sharing one client of
// a 3-member loopback cluster. It reports resumes/s and the p50/p90 of one
// resume. "faked" skips the diff verification too; "verify-diff" runs it
// (the fake materializer's snapshot.VerifyDiff of the 1-file diff).
func BenchmarkResumeDistinctRuns(b *testing.B) {
	c := cluster(b)
	l := open(b, c, etcdledger.Config{})
	for _, mode := range []string{"faked", "verify-diff"} {
		b.Run(mode, func(b *testing.B) {
			h := newFakeHost(b)
			var m resume.Materializer = skipDiff{h.m}
			if mode == "verify-diff" {
				m = h.m
			}
			ctx := context.Background()
			reqs := make([]resume.Request, b.N)
			for i := range reqs {
				reqs[i] = h.request(b, fmt.Sprintf("%s-%d-%d", mode, benchRound.Add(1), i))
			}
			var n atomic.Int64
			var failed atomic.Int64
			var mu sync.Mutex
			var ds []time.Duration
			b.SetParallelism(8) // 16 goroutines on 2 cores
			b.ResetTimer()
			cpu0 := cpuUse(b, c)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					i := int(n.Add(1)) - 1
					t0 := time.Now()
					v := resume.Resume(ctx, h.facts, l, m, reqs[i], resume.ResumeOptions{Container: fmt.Sprintf("inc-%d", i)})
					mine = append(mine, time.Since(t0))
					if !v.Accepted && failed.Add(1) == 1 {
						b.Errorf("resume %d: exit %d %s: %+v", i, v.ExitCode, v.Class, v.Failed())
					}
				}
				mu.Lock()
				ds = append(ds, mine...)
				mu.Unlock()
			})
			elapsed := time.Since(start)
			b.StopTimer()
			cpu := cpuUse(b, c).sub(cpu0)
			b.ReportMetric(float64(n.Load())/elapsed.Seconds(), "resumes/s")
			b.ReportMetric(float64(cpu.client.Microseconds())/1000/float64(n.Load()), "client-cpu-ms/op")
			b.ReportMetric(float64(cpu.etcd.Microseconds())/1000/float64(n.Load()), "etcd-cpu-ms/op")
			percentiles(b, ds)
		})
	}
}

// cpuTimes is the CPU time (user + system) of this process and of the
// cluster's members.
type cpuTimes struct{ client, etcd time.Duration }

func (a cpuTimes) sub(b cpuTimes) cpuTimes { return cpuTimes{a.client - b.client, a.etcd - b.etcd} }

// cpuUse reads the CPU time used so far by this process (getrusage) and by
// every running member of c (/proc/PID/stat utime + stime, in clock ticks
// of 100 Hz).
func cpuUse(b *testing.B, c *etcdharness.Cluster) cpuTimes {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	out := cpuTimes{client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	for _, m := range c.Members {
		pid := m.PID()
		if pid == 0 {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out.etcd += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return out
}

// BenchmarkDecideDistinctRuns is the decision alone (resume.Decide: the
// checks and the claim check's linearizable Get, nothing written) of
// distinct runs from 16 concurrent deciders through one cluster: the read
// half of BenchmarkResumeDistinctRuns.
func BenchmarkDecideDistinctRuns(b *testing.B) {
	c := cluster(b)
	l := open(b, c, etcdledger.Config{})
	h := newFakeHost(b)
	ctx := context.Background()
	reqs := make([]resume.Request, 64)
	for i := range reqs {
		reqs[i] = h.request(b, fmt.Sprintf("decide-%d", i))
	}
	var n atomic.Int64
	var mu sync.Mutex
	var ds []time.Duration
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			i := int(n.Add(1)) - 1
			t0 := time.Now()
			v := resume.Decide(ctx, h.facts, l, reqs[i%len(reqs)])
			mine = append(mine, time.Since(t0))
			if !v.Accepted {
				b.Errorf("decide %d: exit %d %s", i, v.ExitCode, v.Class)
				return
			}
		}
		mu.Lock()
		ds = append(ds, mine...)
		mu.Unlock()
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "decisions/s")
	percentiles(b, ds)
}

// BenchmarkPutParallel is the cluster's write capacity on this machine,
// the floor under BenchmarkResumeDistinctRuns: Puts (each a quorum write
// with fsync) from 16 concurrent goroutines through one client. A resume
// makes four quorum writes (the claim's lease grant, the Claim and Live
// transactions, the lease's revocation) and two linearizable reads.
func BenchmarkPutParallel(b *testing.B) {
	c := cluster(b)
	cli, err := c.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cli.Put(ctx, fmt.Sprintf("/bench-put-par/%d", n.Add(1)), "x"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "writes/s")
}
