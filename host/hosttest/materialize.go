package hosttest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// MaterializeFixture is one fresh host with what RunMaterialize needs
// around it.
type MaterializeFixture struct {
	Host host.Host
	// Base is a stored base image (runnable where the implementation
	// starts tasks for real).
	Base snapshot.Base
	// PutBlob stores data in the content store, held for run (the run
	// lease, where the implementation has leases).
	PutBlob func(t testing.TB, run string, data []byte)
	// Env returns the process environment of container id's spec.
	Env func(t testing.TB, id string) []string
	// Spec returns the runtime spec bytes container id holds.
	Spec func(t testing.TB, id string) []byte
	// Runtime returns container id's runtime name and options.
	Runtime func(t testing.TB, id string) snapshot.Runtime
	// Labels returns container id's labels.
	Labels func(t testing.TB, id string) map[string]string
	// ID turns a short name into a container id for this fixture (unique
	// per daemon where ids must be).
	ID func(name string) string
}

// NewMaterialize returns a fresh MaterializeFixture; RunMaterialize calls
// it once per subtest.
type NewMaterialize func(t *testing.T) MaterializeFixture

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

// RunMaterialize runs the part of the suite resume's materialization
// relies on: layer verification (the blob's digest and size by CheckDiff;
// a wrong diffID refused by CheckDiff or by CreateContainer's apply,
// nothing created), container creation (the incarnation's labels, its
// runtime spec kept byte for byte, its runtime and options, the env of a
// spec BuildSpec built, an existing id), what ContainerState then reports
// (labels, a running task), task start, deletion (a running task
// included; an absent container is no error) and storing ref bytes.
func RunMaterialize(t *testing.T, newFixture NewMaterialize) {
	t.Run("StoreRef", func(t *testing.T) {
		f := newFixture(t)
		ref := []byte(`{"ref":{},"signatures":[]}` + "\n")
		for range 2 { // storing the same bytes again is no error
			if err := f.Host.StoreRef(ctx(t), "run-r", ref); err != nil {
				t.Fatalf("StoreRef: %v", err)
			}
		}
	})

	t.Run("CheckDiff", func(t *testing.T) {
		f := newFixture(t)
		blob, d := Diff(t, map[string]string{"data.txt": "hello\n"})
		f.PutBlob(t, "run-d", blob)
		if err := f.Host.CheckDiff(ctx(t), d); err != nil {
			t.Fatalf("CheckDiff(good): %v", err)
		}
		for name, bad := range map[string]func(*snapshot.Layer){
			"smaller size": func(x *snapshot.Layer) { x.Size-- },
			"larger size":  func(x *snapshot.Layer) { x.Size++ },
		} {
			x := d
			bad(&x)
			err := f.Host.CheckDiff(ctx(t), x)
			if !errors.Is(err, snapshot.ErrDiffCorrupt) {
				t.Errorf("CheckDiff(%s): %v, want ErrDiffCorrupt", name, err)
			}
		}
		x := d
		x.Digest = digest.FromString("absent")
		if err := f.Host.CheckDiff(ctx(t), x); !errdefs.IsNotFound(err) {
			t.Errorf("CheckDiff(absent blob): %v, want not found", err)
		}
	})

	// A layer whose blob is intact but whose recorded diffID is not its
	// decompression's is refused by CheckDiff or by CreateContainer's
	// apply, with ErrDiffCorrupt, and nothing is left that stands in the
	// way of the good layer next (host.Content.CheckDiff).
	t.Run("WrongDiffID", func(t *testing.T) {
		f := newFixture(t)
		blob, d := Diff(t, map[string]string{"data.txt": "wrong diffID\n"})
		f.PutBlob(t, "run-w", blob)
		id := f.ID("wrongdiff")
		spec := host.ContainerSpec{ID: id, Run: "run-w", Manifest: "blake3:" + digest.FromString("m").Encoded(),
			Generation: 1, Ref: digest.FromString("ref"), Fence: 1,
			Base: f.Base, Runtime: snapshot.Runtime{Name: host.DefaultRuntime}}
		bad := d
		bad.DiffID = digest.FromString("other")
		err := f.Host.CheckDiff(ctx(t), bad)
		if err == nil {
			spec.Layers = []snapshot.Layer{bad}
			err = f.Host.CreateContainer(ctx(t), spec)
			t.Cleanup(func() { _ = f.Host.DeleteContainer(context.Background(), id) })
		}
		if !errors.Is(err, snapshot.ErrDiffCorrupt) || (!strings.Contains(err.Error(), bad.DiffID.String()) && !strings.Contains(err.Error(), d.DiffID.String())) {
			t.Fatalf("wrong diffID: %v, want ErrDiffCorrupt naming a diffID", err)
		}
		if cf, err := f.Host.ContainerState(ctx(t), id); cf != nil || err != nil {
			t.Fatalf("ContainerState after the refusal: %+v, %v; want none", cf, err)
		}
		spec.Layers = []snapshot.Layer{d}
		if err := f.Host.CheckDiff(ctx(t), d); err != nil {
			t.Fatalf("CheckDiff(good): %v", err)
		}
		if err := f.Host.CreateContainer(ctx(t), spec); err != nil {
			t.Fatalf("CreateContainer(good) after the refusal: %v", err)
		}
		t.Cleanup(func() { _ = f.Host.DeleteContainer(context.Background(), id) })
	})

	t.Run("RecordedSpecAndRuntime", func(t *testing.T) {
		f := newFixture(t)
		blob, d := Diff(t, map[string]string{"data.txt": "hello\n"})
		f.PutBlob(t, "run-s", blob)
		id := f.ID("recorded")
		// A spec as a runtime recorded it, with a member no Go struct
		// knows and numbers beyond 2^53: the container holds these bytes.
		raw := []byte(`{"ociVersion":"1.2.1","x-sandbox-resume-test":{"kept":true},` +
			`"process":{"terminal":false,"user":{"uid":1000,"gid":1000},"args":["/bin/sh","-c","exec sleep 86400"],` +
			`"env":["PATH=/bin","RECORDED=1"],"cwd":"/tmp","rlimits":[{"type":"RLIMIT_NOFILE","hard":18446744073709551615,"soft":1024}]},` +
			`"root":{"path":"rootfs"},"linux":{"cgroupsPath":"/ns/` + id + `","namespaces":[{"type":"pid"},{"type":"mount"}]}}`)
		// runc's options with NoNewKeyring (field 2) set.
		rt := snapshot.Runtime{Name: host.DefaultRuntime, Options: &snapshot.RuntimeOptions{TypeURL: "containerd.runc.v1.Options", Value: []byte{0x10, 0x01}}}
		spec := host.ContainerSpec{ID: id, Run: "run-s", Manifest: "blake3:" + digest.FromString("m").Encoded(),
			Generation: 2, Ref: digest.FromString("ref"), Fence: 3, Base: f.Base, Layers: []snapshot.Layer{d}, Spec: raw, Runtime: rt}
		if err := f.Host.CreateContainer(ctx(t), spec); err != nil {
			t.Fatalf("CreateContainer: %v", err)
		}
		t.Cleanup(func() { _ = f.Host.DeleteContainer(context.Background(), id) })
		if got := f.Spec(t, id); !bytes.Equal(got, raw) {
			t.Errorf("the container holds the spec\n%s\nnot the bytes it was created with\n%s", got, raw)
		}
		got := f.Runtime(t, id)
		if got.Name != rt.Name || got.Options == nil || got.Options.TypeURL != rt.Options.TypeURL || !bytes.Equal(got.Options.Value, rt.Options.Value) {
			t.Errorf("runtime %+v (options %+v), want %+v (options %+v)", got, got.Options, rt, rt.Options)
		}
		// The empty options message of a plain runc container comes back
		// as an empty message of the same type.
		id2 := f.ID("recorded-empty")
		spec.ID, spec.Runtime.Options = id2, &snapshot.RuntimeOptions{TypeURL: "containerd.runc.v1.Options", Value: []byte{}}
		if err := f.Host.CreateContainer(ctx(t), spec); err != nil {
			t.Fatalf("CreateContainer(empty options): %v", err)
		}
		t.Cleanup(func() { _ = f.Host.DeleteContainer(context.Background(), id2) })
		if got := f.Runtime(t, id2); got.Options == nil || got.Options.TypeURL != "containerd.runc.v1.Options" || len(got.Options.Value) != 0 {
			t.Errorf("runtime with empty options: %+v (options %+v)", got, got.Options)
		}
	})

	t.Run("CreateContainer", func(t *testing.T) {
		f := newFixture(t)
		blob, d := Diff(t, map[string]string{"data.txt": "hello\n"})
		f.PutBlob(t, "run-c", blob)
		id := f.ID("made")
		// A /1 ref's incarnation first: no spec, built from the image
		// config and Env.
		spec := host.ContainerSpec{ID: id, Run: "run-c", Manifest: "blake3:" + digest.FromString("m").Encoded(),
			Generation: 1, Ref: digest.FromString("ref"), Fence: 7,
			Base: f.Base, Layers: []snapshot.Layer{d}, Env: []string{"GREETING=hello"}, Runtime: snapshot.Runtime{Name: host.DefaultRuntime}}
		if cf, err := f.Host.ContainerState(ctx(t), id); cf != nil || err != nil {
			t.Fatalf("ContainerState before: %+v, %v", cf, err)
		}
		if err := f.Host.CreateContainer(ctx(t), spec); err != nil {
			t.Fatalf("CreateContainer(image config): %v", err)
		}
		if env := f.Env(t, id); !slices.Contains(env, "GREETING=hello") || !slices.Contains(env, "PATH=/bin") {
			t.Errorf("env %v, want the image's PATH=/bin and GREETING=hello", env)
		}
		if err := f.Host.DeleteContainer(ctx(t), id); err != nil {
			t.Fatal(err)
		}
		// Then from spec bytes whose process keeps running (the image's
		// /bin/sh exits at once without a stdin): BuildSpec's spec
		// with other args.
		built, err := f.Host.BuildSpec(ctx(t), id, f.Base, spec.Layers, spec.Env)
		if err != nil {
			t.Fatalf("BuildSpec: %v", err)
		}
		var doc map[string]any
		if err := json.Unmarshal(built, &doc); err != nil {
			t.Fatal(err)
		}
		doc["process"].(map[string]any)["args"] = []string{"/bin/sh", "-c", "exec sleep 86400"}
		if spec.Spec, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
		if cf, err := f.Host.ContainerState(ctx(t), id); cf != nil || err != nil {
			t.Fatalf("ContainerState before: %+v, %v", cf, err)
		}
		if err := f.Host.CreateContainer(ctx(t), spec); err != nil {
			t.Fatalf("CreateContainer: %v", err)
		}
		want := map[string]string{
			snapshot.LabelRun: "run-c", snapshot.LabelManifest: spec.Manifest,
			snapshot.LabelGeneration: "1", snapshot.LabelRef: spec.Ref.String(), snapshot.LabelFence: "7",
		}
		l := f.Labels(t, id)
		for k, v := range want {
			if l[k] != v {
				t.Errorf("label %s = %q, want %q (labels %v)", k, l[k], v, l)
			}
		}
		cf, err := f.Host.ContainerState(ctx(t), id)
		if err != nil || cf == nil || cf.Running || cf.Labels[snapshot.LabelFence] != "7" {
			t.Fatalf("ContainerState after: %+v, %v; want it, with no running task and fence 7", cf, err)
		}
		if env := f.Env(t, id); !slices.Contains(env, "GREETING=hello") || !slices.Contains(env, "PATH=/bin") {
			t.Errorf("env %v, want the image's PATH=/bin and GREETING=hello", env)
		}
		if err := f.Host.CreateContainer(ctx(t), spec); !errdefs.IsAlreadyExists(err) {
			t.Errorf("CreateContainer(existing id): %v, want already exists", err)
		}
		pid, err := f.Host.StartTask(ctx(t), id)
		if err != nil || pid == 0 {
			t.Errorf("StartTask: %d, %v", pid, err)
		}
		if cf, err := f.Host.ContainerState(ctx(t), id); err != nil || cf == nil || !cf.Running {
			t.Errorf("ContainerState with its task started: %+v, %v; want running", cf, err)
		}
		if _, err := f.Host.StartTask(ctx(t), f.ID("absent")); !errdefs.IsNotFound(err) {
			t.Errorf("StartTask(absent): %v, want not found", err)
		}

		// Deleting a container with a running task, then again.
		for range 2 {
			if err := f.Host.DeleteContainer(ctx(t), id); err != nil {
				t.Fatalf("DeleteContainer: %v", err)
			}
		}
		if cf, err := f.Host.ContainerState(ctx(t), id); cf != nil || err != nil {
			t.Fatalf("ContainerState after DeleteContainer: %+v, %v", cf, err)
		}
		// Its snapshot went with it: the id can be created again.
		if err := f.Host.CreateContainer(ctx(t), spec); err != nil {
			t.Fatalf("CreateContainer after DeleteContainer: %v", err)
		}
		if err := f.Host.DeleteContainer(ctx(t), id); err != nil {
			t.Fatal(err)
		}
	})
}
