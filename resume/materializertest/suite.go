// Package materializertest is the conformance suite for resume.Materializer
// (DESIGN "Materialize, claim, run lifecycle"): one suite runs against
// runtime/containerd and resume/fake. It checks claim creation is exclusive
// (also under concurrency), takeover of a stale claim and refusal of a
// changed one, release only by the holder, diff verification (digest, size,
// diffID, bounded decompression), container creation (labels, env, an
// existing id) and task start.
package materializertest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Fixture is one fresh Materializer with what the suite needs around it.
type Fixture struct {
	M      resume.Materializer
	Claims resume.Claims
	// Base is a stored base image (runnable where the implementation
	// starts tasks for real).
	Base snapshot.Base
	// PutBlob stores data in the content store, held for run (the run
	// lease, where the implementation has leases).
	PutBlob func(t testing.TB, run string, data []byte)
	// Env returns the process environment of container id's spec.
	Env func(t testing.TB, id string) []string
	// Labels returns container id's labels.
	Labels func(t testing.TB, id string) map[string]string
	// ID turns a short name into a container id for this fixture (unique
	// per daemon where ids must be).
	ID func(name string) string
}

// New returns a fresh Fixture; Run calls it once per subtest.
type New func(t *testing.T) Fixture

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// Diff builds a zstd-compressed layer tar holding files (name → content)
// and returns the blob and its snapshot.Layer.
func Diff(t testing.TB, files map[string]string) ([]byte, snapshot.Layer) {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw, err := zstd.NewWriter(&z)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes(), snapshot.Layer{
		MediaType: ocispec.MediaTypeImageLayerZstd, Digest: digest.FromBytes(z.Bytes()), Size: int64(z.Len()),
		DiffID: digest.FromBytes(raw.Bytes()), UncompressedSize: int64(raw.Len()),
	}
}

func holder(t *testing.T, container string) resume.Claim {
	t.Helper()
	h, err := resume.Holder(container, "host-under-test")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// deadHolder is a holder whose process is gone (another start time) and
// whose container does not exist.
func deadHolder(t *testing.T, container string) resume.Claim {
	h := holder(t, container)
	h.StartTime += "0"
	return h
}

// Run runs the suite.
func Run(t *testing.T, newFixture New) {
	t.Run("ClaimIsExclusive", func(t *testing.T) {
		f := newFixture(t)
		h := holder(t, f.ID("c1"))
		if err := f.M.CreateClaim(ctx(t), "run-a", h); err != nil {
			t.Fatalf("CreateClaim: %v", err)
		}
		err := f.M.CreateClaim(ctx(t), "run-a", holder(t, f.ID("c2")))
		if !errdefs.IsAlreadyExists(err) {
			t.Fatalf("second CreateClaim: %v, want already exists", err)
		}
		c, err := f.Claims.ClaimHolder(ctx(t), "run-a")
		if err != nil || c == nil {
			t.Fatalf("ClaimHolder: %+v, %v", c, err)
		}
		if !resume.SameHolder(c, &h) || !c.ProcessAlive || c.ContainerExists || !c.Live() || c.Lease != snapshot.ClaimLease("run-a") {
			t.Fatalf("ClaimHolder = %+v, want %+v alive without container", c, h)
		}
		// Release by another holder does nothing; by the holder deletes.
		if err := f.M.ReleaseClaim(ctx(t), "run-a", holder(t, f.ID("c2"))); err != nil {
			t.Fatal(err)
		}
		if c, _ := f.Claims.ClaimHolder(ctx(t), "run-a"); c == nil {
			t.Fatal("ReleaseClaim by another holder deleted the claim")
		}
		if err := f.M.ReleaseClaim(ctx(t), "run-a", h); err != nil {
			t.Fatal(err)
		}
		if c, err := f.Claims.ClaimHolder(ctx(t), "run-a"); c != nil || err != nil {
			t.Fatalf("after ReleaseClaim: %+v, %v", c, err)
		}
		if err := f.M.ReleaseClaim(ctx(t), "run-a", h); err != nil {
			t.Fatalf("ReleaseClaim of an absent claim: %v", err)
		}
	})

	t.Run("ConcurrentCreateClaim", func(t *testing.T) {
		f := newFixture(t)
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = f.M.CreateClaim(ctx(t), "run-race", holder(t, f.ID(fmt.Sprintf("c%d", i))))
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errdefs.IsAlreadyExists(err):
				t.Errorf("CreateClaim: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d of %d concurrent CreateClaim calls succeeded, want 1", won, n)
		}
	})

	t.Run("TakeOverStaleClaim", func(t *testing.T) {
		f := newFixture(t)
		dead := deadHolder(t, f.ID("gone"))
		if err := f.M.CreateClaim(ctx(t), "run-s", dead); err != nil {
			t.Fatal(err)
		}
		stale, err := f.Claims.ClaimHolder(ctx(t), "run-s")
		if err != nil || stale == nil {
			t.Fatalf("ClaimHolder: %+v, %v", stale, err)
		}
		if stale.Live() {
			t.Fatalf("a claim with another start time and no container is live: %+v", stale)
		}
		h := holder(t, f.ID("new"))
		if err := f.M.TakeOverClaim(ctx(t), "run-s", stale, h); err != nil {
			t.Fatalf("TakeOverClaim: %v", err)
		}
		now, err := f.Claims.ClaimHolder(ctx(t), "run-s")
		if err != nil || now == nil || !resume.SameHolder(now, &h) {
			t.Fatalf("after takeover: %+v, %v", now, err)
		}
		// A second taker with the old stale view loses.
		err = f.M.TakeOverClaim(ctx(t), "run-s", stale, holder(t, f.ID("late")))
		if !errdefs.IsAlreadyExists(err) {
			t.Fatalf("takeover of a claim that changed holder: %v, want already exists", err)
		}
		if now, _ := f.Claims.ClaimHolder(ctx(t), "run-s"); now == nil || !resume.SameHolder(now, &h) {
			t.Fatalf("the lost takeover changed the claim: %+v", now)
		}
	})

	t.Run("CheckDiff", func(t *testing.T) {
		f := newFixture(t)
		blob, d := Diff(t, map[string]string{"data.txt": "hello\n"})
		f.PutBlob(t, "run-d", blob)
		if err := f.M.CheckDiff(ctx(t), d); err != nil {
			t.Fatalf("CheckDiff(good): %v", err)
		}
		for name, bad := range map[string]func(*snapshot.Layer){
			"diffID":           func(x *snapshot.Layer) { x.DiffID = digest.FromString("other") },
			"uncompressedSize": func(x *snapshot.Layer) { x.UncompressedSize-- },
			"larger size":      func(x *snapshot.Layer) { x.UncompressedSize++ },
		} {
			x := d
			bad(&x)
			err := f.M.CheckDiff(ctx(t), x)
			if !errors.Is(err, snapshot.ErrDiffCorrupt) {
				t.Errorf("CheckDiff(%s changed): %v, want ErrDiffCorrupt", name, err)
			}
		}
		x := d
		x.Digest = digest.FromString("absent")
		if err := f.M.CheckDiff(ctx(t), x); !errdefs.IsNotFound(err) {
			t.Errorf("CheckDiff(absent blob): %v, want not found", err)
		}
	})

	t.Run("CreateContainer", func(t *testing.T) {
		f := newFixture(t)
		blob, d := Diff(t, map[string]string{"data.txt": "hello\n"})
		f.PutBlob(t, "run-c", blob)
		id := f.ID("made")
		h := holder(t, id)
		if err := f.M.CreateClaim(ctx(t), "run-c", h); err != nil {
			t.Fatal(err)
		}
		spec := resume.ContainerSpec{ID: id, Run: "run-c", Manifest: "blake3:" + digest.FromString("m").Encoded(),
			Base: f.Base, Layers: []snapshot.Layer{d}, Env: []string{"GREETING=hello"}}
		if ok, err := f.M.ContainerExists(ctx(t), id); ok || err != nil {
			t.Fatalf("ContainerExists before: %t, %v", ok, err)
		}
		if err := f.M.CreateContainer(ctx(t), spec); err != nil {
			t.Fatalf("CreateContainer: %v", err)
		}
		if ok, err := f.M.ContainerExists(ctx(t), id); !ok || err != nil {
			t.Fatalf("ContainerExists after: %t, %v", ok, err)
		}
		l := f.Labels(t, id)
		if l[snapshot.LabelRun] != "run-c" || l[snapshot.LabelManifest] != spec.Manifest {
			t.Errorf("labels %v", l)
		}
		if env := f.Env(t, id); !slices.Contains(env, "GREETING=hello") || !slices.Contains(env, "PATH=/bin") {
			t.Errorf("env %v, want the image's PATH=/bin and GREETING=hello", env)
		}
		c, err := f.Claims.ClaimHolder(ctx(t), "run-c")
		if err != nil || c == nil || !c.ContainerExists {
			t.Errorf("claim after the container exists: %+v, %v", c, err)
		}
		if err := f.M.CreateContainer(ctx(t), spec); !errdefs.IsAlreadyExists(err) {
			t.Errorf("CreateContainer(existing id): %v, want already exists", err)
		}
		pid, err := f.M.StartTask(ctx(t), id)
		if err != nil || pid == 0 {
			t.Errorf("StartTask: %d, %v", pid, err)
		}
		if _, err := f.M.StartTask(ctx(t), f.ID("absent")); !errdefs.IsNotFound(err) {
			t.Errorf("StartTask(absent): %v, want not found", err)
		}
	})
}
