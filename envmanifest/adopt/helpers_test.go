package adopt

import (
	"flag"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
)

// update rewrites the lint and pin goldens under testdata/lint.
var update = flag.Bool("update", false, "rewrite testdata/lint/*/lint.golden.json and fixed.golden.jsonc")

// vecShared returns the shared/ folder (skip or fail through testenv).
func vecShared(t *testing.T) string {
	t.Helper()
	return testenv.Shared(t)
}

// defaultPolicy is the effective default reserved-environment list, as
// `--policy ""` gives it.
func defaultPolicy(t *testing.T) []string {
	t.Helper()
	p, err := envmanifest.LoadPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
