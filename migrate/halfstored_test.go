package migrate_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// failingImages is a store whose CreateImage fails (a daemon error while
// the base is named).
type failingImages struct{ *memhost.Machine }

var errNaming = errors.New("image service unavailable")

func (failingImages) CreateImage(context.Context, string, ocispec.Descriptor) error { return errNaming }

// TestFailedImportHoldsNothing: docs/design.md "Hardening", "Nothing
// half-stored": an import that fails naming the base leaves nothing in the
// run lease (the run lease took the content before the name, and kept it).
func TestFailedImportHoldsNothing(t *testing.T) {
	r := newRun(t, nil)
	dst := memhost.New(snapshot.Host{})
	_, err := migrate.Import(context.Background(), failingImages{dst}, bytes.NewReader(r.exported(t, true)), r.trust)
	if !errors.Is(err, errNaming) {
		t.Fatalf("Import with a failing CreateImage: %v, want that error", err)
	}
	lease := snapshot.RunLease(r.ref.Run)
	for _, d := range []ocispec.Descriptor{r.base, {Digest: r.ref.Layers[0].Digest}} {
		if dst.Holds(lease, d.Digest) {
			t.Errorf("the run lease %s holds %s after the failed import", lease, d.Digest)
		}
	}
	for _, l := range dst.Leases() {
		if l == lease {
			t.Errorf("the failed import created the run lease %s", lease)
		}
	}
}
