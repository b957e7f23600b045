package envmanifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distribution/reference"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"
	"github.com/tailscale/hujson"
)

// benchDoc builds a realistic devcontainer.json of about size bytes: an
// image, features with options, containerEnv, mounts, remoteUser, comments,
// a trailing comma and excluded members.
func benchDoc(size int) []byte {
	var b strings.Builder
	b.WriteString("// Benchmark devcontainer.json\n{\n\t\"name\": \"bench\",\n\t\"image\": \"mcr.microsoft.com/devcontainers/base:2-bookworm\",\n\t\"features\": {\n")
	b.WriteString("\t\t\"ghcr.io/devcontainers/features/node:1\": {\"version\": \"20\", \"nodeGypDependencies\": true},\n")
	b.WriteString("\t\t\"ghcr.io/devcontainers/features/github-cli:1\": {},\n")
	b.WriteString("\t\t\"ghcr.io/devcontainers/features/python:1\": \"3.12\",\n\t},\n")
	b.WriteString("\t\"mounts\": [\"source=cache,target=/home/vscode/.cache,type=volume\", {\"type\": \"bind\", \"source\": \"${localWorkspaceFolder}/data\", \"target\": \"/data\"}],\n")
	b.WriteString("\t\"remoteUser\": \"vscode\",\n\t\"forwardPorts\": [3000, 8080],\n\t\"containerEnv\": {\n")
	for i := 0; b.Len() < size-120; i++ {
		fmt.Fprintf(&b, "\t\t\"VAR_%03d\": \"value-%03d-${localEnv:HOME}\", // env %d\n", i, i, i)
	}
	b.WriteString("\t\t\"LANG\": \"C.UTF-8\"\n\t},\n\t\"customizations\": {\"vscode\": {\"extensions\": [\"a.b\"]}}\n}\n")
	return []byte(b.String())
}

// processCPU returns the user+system CPU time of this process
// (getrusage(2) RUSAGE_SELF).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuLoop runs body in a b.Loop and reports "cpu-ns/op", the process CPU
// time per iteration: on a shared, loaded machine (2 cores, other test
// runs) wall ns/op counts the time the benchmark waited for a core, CPU
// time does not. Run with -cpu 1 so that is one core's work.
func cpuLoop(b *testing.B, body func()) {
	c0 := processCPU()
	for b.Loop() {
		body()
	}
	b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkIngest measures ingest → address end to end and per stage
// (docs/design.md "Performance goals": ≥ 20,000 docs/s for 1 KB, ≥ 8,000 for 3 KB).
func BenchmarkIngest(b *testing.B) {
	for _, size := range []int{1024, 3072} {
		doc := benchDoc(size)
		name := fmt.Sprintf("%dKB", size/1024)
		m, err := Ingest(doc, Options{})
		if err != nil {
			b.Fatalf("benchmark document refused: %v", err)
		}
		b.Run(name+"/total", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			cpuLoop(b, func() {
				if _, err := Ingest(doc, Options{}); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(name+"/strip", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			cpuLoop(b, func() {
				v, err := hujson.Parse(append([]byte(nil), doc...))
				if err != nil {
					b.Fatal(err)
				}
				v.Standardize()
				_ = v.Pack()
			})
		})
		v, _ := hujson.Parse(append([]byte(nil), doc...))
		v.Standardize()
		std := v.Pack()
		b.Run(name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(std)))
			b.ReportAllocs()
			cpuLoop(b, func() {
				if root, rs := decode(std, false); root == nil || len(rs) > 0 {
					b.Fatal(rs)
				}
			})
		})
		root, _ := decode(std, false)
		b.Run(name+"/normalize", func(b *testing.B) {
			b.ReportAllocs()
			cpuLoop(b, func() {
				in := &ingester{m: &Manifest{Core: Core{Schema: CoreSchema}}}
				if err := in.run(root); err != nil || len(in.refusals) > 0 {
					b.Fatal(err, in.refusals)
				}
			})
		})
		b.Run(name+"/canonicalize", func(b *testing.B) {
			// The normalized core as Ingest has it before canonicalizing:
			// feature options still as written.
			in := &ingester{m: &Manifest{Core: Core{Schema: CoreSchema}}}
			if err := in.run(root); err != nil || len(in.refusals) > 0 {
				b.Fatal(err, in.refusals)
			}
			core := in.m.Core
			b.ReportAllocs()
			cpuLoop(b, func() {
				if _, err := canonicalize(&core); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(name+"/hash", func(b *testing.B) {
			b.SetBytes(int64(len(m.Canonical)))
			cpuLoop(b, func() {
				_ = Address(m.Canonical)
			})
		})
	}
}

// BenchmarkIngestFloors runs the library calls under each stage of
// BenchmarkIngest on their own, on the same documents: their sum is the
// floor of ingest → address, what Ingest spends beyond it is its own
// (docs/dev/perf-cpu.md). The hujson floor is BenchmarkIngest's "strip"
// stage and the BLAKE3 floor its "hash" stage; here:
//   - references: reference.ParseNormalizedNamed + TagNameOnly of the
//     document's image and OCI feature ids (distribution/reference);
//   - walk: a jsontext.Decoder reading the standardized text token by
//     token, nothing kept (go-json-experiment/json);
//   - jcs-core: jcs.Transform of the core as Ingest hands it over
//     (gowebpki/jcs).
func BenchmarkIngestFloors(b *testing.B) {
	for _, size := range []int{1024, 3072} {
		doc := benchDoc(size)
		name := fmt.Sprintf("%dKB", size/1024)
		m, err := Ingest(doc, Options{})
		if err != nil {
			b.Fatalf("benchmark document refused: %v", err)
		}
		v, err := hujson.Parse(append([]byte(nil), doc...))
		if err != nil {
			b.Fatal(err)
		}
		v.Standardize()
		std := v.Pack()
		refs := []string{"mcr.microsoft.com/devcontainers/base:2-bookworm"}
		for _, f := range m.Core.Features {
			refs = append(refs, f.ID)
		}
		b.Run(name+"/references", func(b *testing.B) {
			b.ReportAllocs()
			cpuLoop(b, func() {
				for _, r := range refs {
					named, err := reference.ParseNormalizedNamed(r)
					if err != nil {
						b.Fatal(err)
					}
					_ = reference.TagNameOnly(named).String()
				}
			})
		})
		b.Run(name+"/walk", func(b *testing.B) {
			b.SetBytes(int64(len(std)))
			b.ReportAllocs()
			dec := jsontext.NewDecoder(bytes.NewReader(std), jsontext.AllowDuplicateNames(true))
			cpuLoop(b, func() {
				dec.Reset(bytes.NewReader(std), jsontext.AllowDuplicateNames(true))
				for {
					if _, err := dec.ReadToken(); err != nil {
						if errors.Is(err, io.EOF) {
							break
						}
						b.Fatal(err)
					}
				}
			})
		})
		raw, err := m.Core.appendJSON(nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/jcs-core", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			cpuLoop(b, func() {
				if _, err := jcs.Transform(raw); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
