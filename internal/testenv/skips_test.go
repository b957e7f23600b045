package testenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// allowedSkips are the skips that are not a missing prerequisite, by a
// substring of their line: the -short mode (the test's own body is behind
// testing.Short()), a generator that runs only when asked, and a check
// that waits for a feature. Every other skip goes through Missing (or
// RequireRoot, LookPath, …), so that under CI=true it fails.
var allowedSkips = []string{
	`t.Skip("-short: `,
	`t.Skip("a generator: `,
	`t.Skipf("the previous release's fixtures are linux/amd64`,
	`t.Skip("waits for later generations of suspend`,
}

var skipCall = regexp.MustCompile(`\.(Skip|Skipf|SkipNow)\(`)

// TestSkipsGoThroughTestenv: no test of the module skips by itself for a
// missing prerequisite (docs/design.md "Build and test environment": CI
// never passes by skipping); four unit-test skips did.
func TestSkipsGoThroughTestenv(t *testing.T) {
	root := ModuleRoot()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || filepath.Dir(path) == filepath.Join(root, "internal", "testenv") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !skipCall.MatchString(line) || strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			ok := false
			for _, a := range allowedSkips {
				ok = ok || strings.Contains(line, a)
			}
			if !ok {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d skips by itself (use testenv.Missing, RequireRoot or LookPath): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
