package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes what the whole test process shared: the CLI binary that
// cli builds once per process.
func TestMain(m *testing.M) {
	code := m.Run()
	if cliPath != "" {
		_ = os.RemoveAll(filepath.Dir(cliPath))
	}
	os.Exit(code)
}
