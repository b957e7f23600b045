// Command growth measures how envmanifest.Ingest (ingest → address, in
// process, one goroutine) grows with the number of features (1 → 100) and
// of containerEnv entries (1 → 10,000) in an otherwise fixed
// devcontainer.json (bench/run.sh's growth plots). For each size it runs
// batches of at least 20 ms, 7 times, and prints one tab-separated line:
//
//	kind  n  bytes  median-µs  min-µs  max-µs   (µs per document)
//
// kind is "features" or "env". Usage: go run ./bench/growth
package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

func doc(features, env int) []byte {
	var b strings.Builder
	b.WriteString("// growth\n{\n  \"image\": \"mcr.microsoft.com/devcontainers/base:2-bookworm\",\n  \"remoteUser\": \"vscode\",\n  \"features\": {\n")
	for i := range features {
		sep := ","
		if i == features-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    \"ghcr.io/devcontainers/features/f%03d:1\": {\"version\": \"%d\", \"install\": true}%s\n", i, i, sep)
	}
	b.WriteString("  },\n  \"containerEnv\": {\n")
	for i := range env {
		sep := ","
		if i == env-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    \"VAR_%05d\": \"value-%05d\"%s\n", i, i, sep)
	}
	b.WriteString("  }\n}\n")
	return []byte(b.String())
}

func measure(kind string, n int, d []byte) {
	if _, err := envmanifest.Ingest(d, envmanifest.Options{}); err != nil {
		fmt.Fprintf(os.Stderr, "growth: %s %d refused: %v\n", kind, n, err)
		os.Exit(1)
	}
	per := make([]float64, 0, 7)
	for range 7 {
		reps := 0
		start := time.Now()
		for reps == 0 || time.Since(start) < 20*time.Millisecond {
			if _, err := envmanifest.Ingest(d, envmanifest.Options{}); err != nil {
				panic(err)
			}
			reps++
		}
		per = append(per, float64(time.Since(start).Microseconds())/float64(reps))
	}
	slices.Sort(per)
	fmt.Printf("%s\t%d\t%d\t%.1f\t%.1f\t%.1f\n", kind, n, len(d), per[3], per[0], per[6])
}

func main() {
	for _, n := range []int{1, 2, 5, 10, 20, 50, 100} {
		measure("features", n, doc(n, 1))
	}
	for _, n := range []int{1, 10, 100, 1000, 3000, 10000} {
		measure("env", n, doc(1, n))
	}
}
