package migrate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
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

// outCheckingStore is a store whose AddToLease of the run lease records
// whether out already holds the ref file, then fails with fail (nil: no
// failure).
type outCheckingStore struct {
	*memhost.Machine
	run, out string
	want     []byte
	fail     error
	sawOut   *bool
}

func (s outCheckingStore) AddToLease(ctx context.Context, lease string, dgsts ...digest.Digest) error {
	if lease == snapshot.RunLease(s.run) {
		b, err := os.ReadFile(s.out)
		*s.sawOut = err == nil && bytes.Equal(b, s.want)
		if s.fail != nil {
			return s.fail
		}
	}
	return s.Machine.AddToLease(ctx, lease, dgsts...)
}

// TestImportWritesOutFirst: docs/design.md "Hardening", "Nothing
// half-stored": ImportFile of an archive without a handoff statement
// writes --out before the run lease takes the content, and removes it
// again when the run lease does not take it.
func TestImportWritesOutFirst(t *testing.T) {
	r := newRun(t, nil)
	dir := t.TempDir()
	archive := filepath.Join(dir, "run.tar")
	if err := os.WriteFile(archive, r.exported(t, true), 0o644); err != nil {
		t.Fatal(err)
	}
	errHold := errors.New("lease service unavailable")
	for _, fail := range []error{nil, errHold} {
		out := filepath.Join(dir, fmt.Sprintf("ref-%t.json", fail != nil))
		saw := false
		s := outCheckingStore{Machine: memhost.New(snapshot.Host{}), run: r.ref.Run, out: out, want: r.file, fail: fail, sawOut: &saw}
		res, err := migrate.ImportFile(context.Background(), s, archive, r.trust, out)
		if !errors.Is(err, fail) || (fail == nil) != (err == nil) {
			t.Fatalf("ImportFile (run lease failing: %v): %v", fail, err)
		}
		if !saw {
			t.Errorf("run lease failing %v: --out did not hold the ref file when the run lease took the content", fail)
		}
		_, statErr := os.Stat(out)
		switch {
		case fail == nil && (statErr != nil || res.Received != nil):
			t.Errorf("a complete import: --out %v, received %v", statErr, res.Received)
		case fail != nil && !os.IsNotExist(statErr):
			t.Errorf("an import whose run lease failed left --out (%v)", statErr)
		}
	}
}

// TestPullWritesOutFirst: as TestImportWritesOutFirst, for PullFile of an
// artifact without a handoff statement.
func TestPullWritesOutFirst(t *testing.T) {
	r := newRun(t, nil)
	reg := memhost.NewRegistry(r.store)
	target, err := migrate.ParseRemoteRef("reg.example/runs:"+r.ref.Run, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Push(context.Background(), r.store, reg, r.file, target); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	errHold := errors.New("lease service unavailable")
	for _, fail := range []error{nil, errHold} {
		out := filepath.Join(dir, fmt.Sprintf("ref-%t.json", fail != nil))
		saw := false
		s := outCheckingStore{Machine: memhost.New(snapshot.Host{}), run: r.ref.Run, out: out, want: r.file, fail: fail, sawOut: &saw}
		reg.Local = s.Machine
		_, err := migrate.PullFile(context.Background(), s, reg, target, r.trust, out)
		if !errors.Is(err, fail) || (fail == nil) != (err == nil) {
			t.Fatalf("PullFile (run lease failing: %v): %v", fail, err)
		}
		if !saw {
			t.Errorf("run lease failing %v: --out did not hold the ref file when the run lease took the content", fail)
		}
		_, statErr := os.Stat(out)
		switch {
		case fail == nil && statErr != nil:
			t.Errorf("a complete pull: --out %v", statErr)
		case fail != nil && !os.IsNotExist(statErr):
			t.Errorf("a pull whose run lease failed left --out (%v)", statErr)
		}
	}
}
