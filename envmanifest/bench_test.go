package envmanifest

import (
	"fmt"
	"strings"
	"testing"

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

// BenchmarkIngest measures ingest → address end to end and per stage
// (DESIGN "Performance goals": ≥ 20,000 docs/s for 1 KB, ≥ 8,000 for 3 KB).
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
			for b.Loop() {
				if _, err := Ingest(doc, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/strip", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				v, err := hujson.Parse(append([]byte(nil), doc...))
				if err != nil {
					b.Fatal(err)
				}
				v.Standardize()
				_ = v.Pack()
			}
		})
		v, _ := hujson.Parse(append([]byte(nil), doc...))
		v.Standardize()
		std := v.Pack()
		b.Run(name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(std)))
			b.ReportAllocs()
			for b.Loop() {
				if root, rs := Decode(std, false); root == nil || len(rs) > 0 {
					b.Fatal(rs)
				}
			}
		})
		root, _ := Decode(std, false)
		b.Run(name+"/normalize", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				in := &ingester{m: &Manifest{Core: Core{Schema: CoreSchema}}}
				if err := in.run(root); err != nil || len(in.refusals) > 0 {
					b.Fatal(err, in.refusals)
				}
			}
		})
		b.Run(name+"/canonicalize", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Core.Canonical(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/hash", func(b *testing.B) {
			b.SetBytes(int64(len(m.Canonical)))
			for b.Loop() {
				_ = Address(m.Canonical)
			}
		})
	}
}
