package envmanifest

import (
	"crypto/ed25519"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
)

// BenchmarkSign measures Sign of signTestCore's canonical bytes (≈ 0.5 KB)
// with one key: one Ed25519 signature, the wrapper's JCS and indentation.
func BenchmarkSign(b *testing.B) {
	k := fuzzSignedKey()
	c := signTestCore()
	canonical, err := c.Canonical()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(canonical)))
	b.ReportAllocs()
	cpuLoop(b, func() {
		if _, err := envelope.Sign(envelope.MemberManifest, canonical, k); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkVerify measures VerifySignedManifest end to end on one signed
// manifest file (≈ 1 KB): strict decode, JCS of the inner object, one
// Ed25519 verification, ParseCore (including its canonical round trip) and
// the BLAKE3 address. Sub-benchmarks split the stages.
func BenchmarkVerify(b *testing.B) {
	k := fuzzSignedKey()
	_, file := signTestFile(b, k)
	ring := envelope.NewKeyRing(k.Public().(ed25519.PublicKey))
	b.Run("end-to-end", func(b *testing.B) {
		b.SetBytes(int64(len(file)))
		b.ReportAllocs()
		cpuLoop(b, func() {
			if _, err := VerifySignedManifest(file, ring); err != nil {
				b.Fatal(err)
			}
		})
	})
	doc, err := ParseSigned(file, envelope.MemberManifest)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("parse", func(b *testing.B) {
		b.SetBytes(int64(len(file)))
		b.ReportAllocs()
		cpuLoop(b, func() {
			if _, err := ParseSigned(file, envelope.MemberManifest); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("signature", func(b *testing.B) {
		b.ReportAllocs()
		cpuLoop(b, func() {
			if err := doc.Verify(ring); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("core", func(b *testing.B) {
		b.ReportAllocs()
		cpuLoop(b, func() {
			if _, err := ParseCore(doc.Inner); err != nil {
				b.Fatal(err)
			}
		})
	})
}
