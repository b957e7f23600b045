package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes what the whole test process shared: the CLI binaries
// that cli and plainCLI build once per process, and credHelper's directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if cliPath != "" {
		_ = os.RemoveAll(filepath.Dir(cliPath))
	}
	if credHelperDir != "" {
		_ = os.RemoveAll(credHelperDir)
	}
	os.Exit(code)
}
