package etcdledger

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	etcdledger "github.com/sandbox-resume/sandbox-resume/ledger/etcd"
	"github.com/sandbox-resume/sandbox-resume/test/integration/etcdharness"
)

// cluster starts a 3-member cluster for one benchmark.
func cluster(b *testing.B) *etcdharness.Cluster { return etcdharness.Start(b) }

// percentiles reports the p50 and p90 of ds in milliseconds.
func percentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(p float64) float64 {
		return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.9), "p90-ms")
}

// BenchmarkClaimLive measures Claim → Live of a suspended run (distinct
// runs, one client) on a 3-member loopback cluster with fsync: the goal of
// docs/design.md ("Performance goals") is p50 ≤ 10 ms. The floor, one
// quorum write, is BenchmarkPut.
func BenchmarkClaimLive(b *testing.B) {
	c := cluster(b)
	l := open(b, c, etcdledger.Config{})
	ctx := context.Background()
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		run := fmt.Sprintf("bench-%d", i)
		suspend(b, l, run)
		b.StartTimer()
		start := time.Now()
		cl, err := l.Claim(ctx, claimReq(run, resumerOn("host-b", i)))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cl.Live(ctx, cl.Record().Holder.Container); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	percentiles(b, ds)
}

// BenchmarkClaimLiveParallel measures Claim → Live of distinct runs from
// 16 concurrent resumers through one cluster (the goal of docs/design.md:
// ≥ 200 resumes of distinct runs per second, decision included:
// BenchmarkResumeDistinctRuns).
func BenchmarkClaimLiveParallel(b *testing.B) {
	c := cluster(b)
	l := open(b, c, etcdledger.Config{})
	ctx := context.Background()
	// The runs are suspended first, untimed.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= b.N; i = int(next.Add(1)) {
				suspend(b, l, fmt.Sprintf("par-%d", i))
			}
		})
	}
	wg.Wait()
	var n atomic.Int64
	var mu sync.Mutex
	var ds []time.Duration
	b.SetParallelism(8) // 16 goroutines on 2 cores
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			i := int(n.Add(1))
			run := fmt.Sprintf("par-%d", i)
			t0 := time.Now()
			cl, err := l.Claim(ctx, claimReq(run, resumerOn("host-p", i)))
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := cl.Live(ctx, cl.Record().Holder.Container); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		ds = append(ds, mine...)
		mu.Unlock()
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "resumes/s")
	percentiles(b, ds)
}

// BenchmarkPut is the floor under every transition: one Put, a quorum
// write with fsync, through the same client library.
func BenchmarkPut(b *testing.B) {
	c := cluster(b)
	cli, err := c.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	var ds []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if _, err := cli.Put(ctx, fmt.Sprintf("/bench-put/%d", i), "x"); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	percentiles(b, ds)
}
