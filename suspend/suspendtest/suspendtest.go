// Package suspendtest is the end-to-end half of the host suite
// (docs/design.md "Layout"): suspend.Run over a host — one generation,
// then later generations of the runtime's container — checked through a
// hosttest.Probe. host/memhost runs it in a unit test and
// runtime/containerd in an integration test.
package suspendtest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/host/hosttest"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	ledgerfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// Fixture is one fresh setup: a host and its Probe, a running container
// created from Image (a normalized reference stored in the image store)
// that has written files, and a unique run lease id
// ("sandbox-resume.run/<something>") whose run suspend records.
type Fixture struct {
	Host      suspend.Host
	Probe     hosttest.Probe
	Container string
	Image     string
	LeaseID   string
}

// Run runs the suite; newFixture is called once per subtest.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Run("Suspend", func(t *testing.T) { testSuspend(t, newFixture(t)) })
	t.Run("SuspendGenerations", func(t *testing.T) { testSuspendGenerations(t, newFixture(t)) })
}

// testSuspend runs suspend.Run against the host and checks the result
// through the Probe.
func testSuspend(t *testing.T, f Fixture) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(`{"image": "`+f.Image+`", "name": "suite"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	run := f.LeaseID[len(snapshot.RunLeasePrefix):]
	before, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Spec) == 0 || before.Runtime.Name == "" || before.Namespace == "" || before.Created.IsZero() {
		t.Fatalf("Container: spec %d bytes, runtime %+v, namespace %q, created %s", len(before.Spec), before.Runtime, before.Namespace, before.Created)
	}
	out := filepath.Join(dir, "ref.json")
	l := ledgerfake.New()
	res, err := suspend.Run(ctx, f.Host, l, suspend.Request{
		ContainerID: f.Container, ConfigPath: cfg, Run: run, Keys: []crypto.Signer{priv}, Out: out,
	})
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, res.File) {
		t.Fatal("ref file differs from the result")
	}
	ref, err := snapshot.OpenRef(file, envelope.NewKeyRing(pub))
	if err != nil {
		t.Fatal(err)
	}
	base, err := f.Host.ResolveImage(ctx, f.Image)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Base.ManifestDigest != base.ManifestDigest || ref.Base.ConfigDigest != base.ConfigDigest || ref.Run != run {
		t.Fatalf("ref base %+v, image %+v", ref.Base, base)
	}
	if ref.Schema != snapshot.RefSchema || ref.Generation != 1 || len(ref.Layers) != 1 || ref.Spec == nil || ref.Runtime == nil {
		t.Fatalf("ref %s generation %d, %d layers, spec %v, runtime %v", ref.Schema, ref.Generation, len(ref.Layers), ref.Spec, ref.Runtime)
	}
	hosttest.CheckDiff(t, f.Probe, ref.Layers[0])
	blob, err := f.Probe.Blob(ctx, res.RefBlob)
	if err != nil || !bytes.Equal(blob, file) {
		t.Fatalf("ref blob %s differs from the file (err %v)", res.RefBlob, err)
	}
	// The spec blob holds the container's spec exactly as the host
	// reported it, and the runtime is the container's.
	spec, err := f.Probe.Blob(ctx, ref.Spec.Digest)
	if err != nil || digest.FromBytes(spec) != ref.Spec.Digest || int64(len(spec)) != ref.Spec.Size || ref.Spec.MediaType != snapshot.MediaTypeSpec {
		t.Fatalf("spec blob %+v: %d bytes (err %v)", ref.Spec, len(spec), err)
	}
	if !bytes.Equal(spec, before.Spec) || ref.Runtime.Name != before.Runtime.Name || (ref.Runtime.Options == nil) != (before.Runtime.Options == nil) {
		t.Fatalf("recorded spec %d bytes runtime %+v; the container's spec %d bytes runtime %+v", len(spec), ref.Runtime, len(before.Spec), before.Runtime)
	}
	if got, err := l.Get(ctx, run); err != nil || got.Generation != 1 || got.Ref != res.RefBlob || got.State != ledger.StateSuspended ||
		got.SuspendedBy == nil || got.SuspendedBy.ID != f.Container || !got.SuspendedBy.Created.Equal(before.Created) {
		t.Fatalf("ledger record %+v (err %v)", got, err)
	}
	for _, d := range []digest.Digest{ref.Layers[0].Digest, res.RefBlob, ref.Spec.Digest, ref.Base.ManifestDigest, ref.Base.ConfigDigest} {
		if ok, err := f.Probe.LeaseHolds(ctx, res.Lease, d); err != nil || !ok {
			t.Fatalf("run lease does not hold %s (err %v)", d, err)
		}
	}
	c, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	if c.Task != snapshot.TaskNone || c.Labels[snapshot.LabelRun] != run || c.Labels[snapshot.LabelManifest] != ref.Manifest ||
		c.Labels[snapshot.LabelSuspended] != "1" || c.Labels[snapshot.LabelSuspending] != "" {
		t.Fatalf("after suspend: task %q labels %v", c.Task, c.Labels)
	}
	if kind, err := f.Probe.SnapshotKind(ctx, c); err != nil || kind != "active" {
		t.Fatalf("after suspend the snapshot is %q (err %v), want active", kind, err)
	}
	// The container was suspended and stopped: suspending it again is
	// refused before anything changes.
	if _, err := suspend.Run(ctx, f.Host, l, suspend.Request{
		ContainerID: f.Container, ConfigPath: cfg, Run: run, Keys: []crypto.Signer{priv}, Out: out,
	}); !errors.Is(err, suspend.ErrAlreadySuspended) {
		t.Fatalf("second suspend: %v, want ErrAlreadySuspended", err)
	}
}

// testSuspendGenerations runs suspend.Run through later generations of
// the runtime's container: kept running twice (generations 1 and 2, the
// second with --flatten, which changes nothing for it), then stopped
// (generation 3): each ref chains to its parent with the container's
// fence, has one layer (its snapshot's parent is the base chain) holding
// the files, and the container ends stopped and labelled suspended = 3,
// which a further suspend refuses.
func testSuspendGenerations(t *testing.T, f Fixture) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(`{"image": "`+f.Image+`", "name": "suite"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	run := f.LeaseID[len(snapshot.RunLeasePrefix):]
	l := ledgerfake.New()
	var prev *suspend.Result
	for g := uint64(1); g <= 3; g++ {
		req := suspend.Request{ContainerID: f.Container, ConfigPath: cfg, Run: run, Keys: []crypto.Signer{priv},
			Out: filepath.Join(dir, fmt.Sprintf("g%d.json", g)), KeepRunning: g < 3, Flatten: g == 2}
		res, err := suspend.Run(ctx, f.Host, l, req)
		if err != nil {
			t.Fatalf("generation %d: %v", g, err)
		}
		ref, err := snapshot.OpenRef(res.File, envelope.NewKeyRing(pub))
		if err != nil {
			t.Fatal(err)
		}
		if ref.Generation != g || len(ref.Layers) != 1 || res.Flattened {
			t.Fatalf("generation %d: ref generation %d, %d layers, flattened %t", g, ref.Generation, len(ref.Layers), res.Flattened)
		}
		hosttest.CheckDiff(t, f.Probe, ref.Layers[0])
		if len(hosttest.LayerEntries(t, f.Probe, ref.Layers[0])) == 0 {
			t.Fatalf("generation %d: an empty layer", g)
		}
		if prev != nil && (ref.Parent != prev.RefBlob || ref.Fence != prev.Fence || ref.Manifest != prev.Ref.Manifest ||
			ref.Base.ManifestDigest != prev.Ref.Base.ManifestDigest) {
			t.Fatalf("generation %d: parent %s fence %d, the previous %s fence %d", g, ref.Parent, ref.Fence, prev.RefBlob, prev.Fence)
		}
		rec, err := l.Get(ctx, run)
		if err != nil || rec.Generation != g || rec.Ref != res.RefBlob || (rec.State == ledger.StateLive) != (g < 3) {
			t.Fatalf("generation %d: record %+v (err %v)", g, rec, err)
		}
		prev = res
	}
	c, err := f.Host.Container(ctx, f.Container)
	if err != nil {
		t.Fatal(err)
	}
	if c.Task != snapshot.TaskNone || c.Labels[snapshot.LabelSuspended] != "3" || c.Labels[snapshot.LabelSuspending] != "" {
		t.Fatalf("after generation 3: task %q labels %v", c.Task, c.Labels)
	}
	if _, err := suspend.Run(ctx, f.Host, l, suspend.Request{ContainerID: f.Container, ConfigPath: cfg, Run: run,
		Keys: []crypto.Signer{priv}, Out: filepath.Join(dir, "g4.json")}); !errors.Is(err, suspend.ErrAlreadySuspended) {
		t.Fatalf("suspend of the suspended container: %v, want ErrAlreadySuspended", err)
	}
}
