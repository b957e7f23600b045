// Package depcheck holds the architecture test of DESIGN "Layout": the
// packages that decide (envmanifest, snapshot, resume, their fakes and
// conformance suites, schemas) never import the containerd client module or
// cobra, so they stay usable without a daemon and cheap to start; only
// runtime/containerd, the CLI that wires it and the tests under test/ may.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sandbox-resume/sandbox-resume"

// deciding are the packages that must not reach containerd or cobra, even
// through another package (go list -deps).
var deciding = []string{
	"envmanifest",
	"snapshot",
	"snapshot/fake",
	"snapshot/capturertest",
	"resume",
	"resume/fake",
	"resume/facttest",
	"resume/materializertest",
	"schemas",
}

var forbidden = []string{
	"github.com/containerd/containerd/v2",
	"github.com/spf13/cobra",
	module + "/runtime/containerd",
	module + "/cmd/",
}

func TestDecidingPackagesStayFreeOfContainerd(t *testing.T) {
	for _, pkg := range deciding {
		out, err := exec.Command("go", "list", "-deps", module+"/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
					t.Errorf("%s depends on %s (DESIGN \"Layout\": only runtime/containerd talks to the daemon)", pkg, dep)
				}
			}
		}
	}
}
