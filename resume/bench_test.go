package resume_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// BenchmarkDecideFake is the whole decision (eleven checks, accepted) against
// the in-memory fake: the library's own cost, without a daemon.
func BenchmarkDecideFake(b *testing.B) {
	fx := newFixture(b, baseConfig)
	req := fx.request(mustSign(b, fx))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if v := resume.Decide(ctx, fx.facts, fx.ledger, req); v.ExitCode != 0 {
			b.Fatalf("exit %d", v.ExitCode)
		}
	}
}

func mustSign(b *testing.B, fx *fixture) []byte {
	file, err := snapshot.SignRef(&fx.ref, fx.key)
	if err != nil {
		b.Fatal(err)
	}
	return file
}

// BenchmarkVerifyRefBulk opens 10,000 distinct SnapshotRef files with
// snapshot.OpenRef (checks 1–4: strict parse, Ed25519 signature over the JCS of "ref", schema,
// integrity) on one core (GOMAXPROCS 1). Goal (docs/design.md "Performance
// goals"): ≥ 10,000 refs/s; the refs/s metric is the figure to compare.
func BenchmarkVerifyRefBulk(b *testing.B) {
	const n = 10000
	fx := newFixture(b, baseConfig)
	files := make([][]byte, n)
	for i := range files {
		fx.ref.Run = fmt.Sprintf("run-%05d", i)
		fx.ref.Layers[0].Size = int64(1000 + i)
		files[i] = mustSign(b, fx)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		for _, f := range files {
			if _, err := snapshot.OpenRef(f, fx.trust); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "refs/s")
	b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "refs/cpu-s")
}

// BenchmarkVerifyRefFloors runs, on the files of BenchmarkVerifyRefBulk
// and on one core, each library call OpenRef cannot do without, alone:
// the strict decode of the file (internal/strictjson, through
// envelope.Parse without its JCS: "decode"), gowebpki/jcs of the "ref"
// subtree ("jcs"), and crypto/ed25519.Verify of its signature
// ("ed25519"). Their sum is the floor of check 1–4 verification; what
// OpenRef spends beyond it is schema and integrity checks
// (docs/dev/perf-cpu.md).
func BenchmarkVerifyRefFloors(b *testing.B) {
	const n = 1000
	fx := newFixture(b, baseConfig)
	docs := make([]*envelope.Document, n)
	files := make([][]byte, n)
	for i := range files {
		fx.ref.Run = fmt.Sprintf("run-%05d", i)
		fx.ref.Layers[0].Size = int64(1000 + i)
		files[i] = mustSign(b, fx)
		doc, err := envelope.Parse(files[i], envelope.MemberRef)
		if err != nil {
			b.Fatal(err)
		}
		docs[i] = doc
	}
	pub := fx.key.Public().(ed25519.PublicKey)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, step := range []struct {
		name string
		run  func(i int) error
	}{
		{"decode", func(i int) error {
			if _, errs := strictjson.Decode(files[i], false); len(errs) > 0 {
				return errs[0]
			}
			return nil
		}},
		{"jcs", func(i int) error { _, err := jcs.Transform(docs[i].Inner.Raw); return err }},
		{"ed25519", func(i int) error {
			sig, err := base64.StdEncoding.DecodeString(docs[i].Signatures[0].Sig)
			if err != nil || !ed25519.Verify(pub, docs[i].Canonical, sig) {
				return fmt.Errorf("signature %d: %v", i, err)
			}
			return nil
		}},
	} {
		b.Run(step.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				for i := range files {
					if err := step.run(i); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(n*b.N)/(cpuTime()-cpu0).Seconds(), "refs/cpu-s")
		})
	}
}

// cpuTime returns the user+system CPU time of this process
// (getrusage(RUSAGE_SELF)): on a loaded machine refs per CPU-second is the
// one-core figure, wall time is not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
