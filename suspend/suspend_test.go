package suspend_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	ledgerfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

const busybox = "docker.io/library/busybox:1"

var testHost = snapshot.Host{ID: "host-a", IDSource: snapshot.IDSourceIntrospection, ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: "linux/amd64"}

// runcOptions is a runtime options Any as containerd holds it.
var runcOptions = &snapshot.RuntimeOptions{TypeURL: "containerd.runc.v1.Options", Value: []byte("\x32\x0d/usr/bin/runc\x48\x01")}

func newFake() *memhost.Machine {
	f := memhost.New(testHost)
	for i, name := range []string{busybox, "docker.io/library/alpine:3"} {
		f.AddImage(memhost.Image{
			Base: snapshot.Base{
				Name: name, IndexDigest: digest.FromString(fmt.Sprint("index", i)), ManifestDigest: digest.FromString(fmt.Sprint("manifest", i)),
				ConfigDigest: digest.FromString(fmt.Sprint("config", i)), Platform: "linux/amd64",
				DiffIDs: []digest.Digest{digest.FromString(fmt.Sprint("diffid", i))},
			},
			Layers: []digest.Digest{digest.FromString(fmt.Sprint("layer", i))},
		})
	}
	f.AddContainer(memhost.Container{ID: "Box-1", Image: busybox, Task: snapshot.TaskRunning, Files: map[string][]byte{"a.txt": []byte("A")},
		Runtime: snapshot.Runtime{Name: "io.containerd.runc.v2", Options: runcOptions}})
	f.AddContainer(memhost.Container{ID: "alp", Image: "docker.io/library/alpine:3", Task: snapshot.TaskRunning})
	return f
}

type env struct {
	dir, cfg string
	pub      ed25519.PublicKey
	priv     ed25519.PrivateKey
}

func newEnv(t *testing.T, config string) env {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return env{dir: dir, cfg: cfg, pub: pub, priv: priv}
}

func (e env) out() string { return filepath.Join(e.dir, "ref.json") }

func (e env) req(container, run string) suspend.Request {
	return suspend.Request{ContainerID: container, ConfigPath: e.cfg, Run: run,
		Keys: []crypto.Signer{e.priv}, Out: e.out()}
}

// noRefFile fails when the suspend left a ref file.
func (e env) noRefFile(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(e.out()); err == nil {
		t.Fatal("a ref file was written")
	}
}

func container(t *testing.T, f *memhost.Machine, id string) snapshot.Container {
	t.Helper()
	c, err := f.Container(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testLedger wraps a ledger, letting a test replace Suspended and Get.
type testLedger struct {
	ledger.Ledger
	suspended func(context.Context, ledger.SuspendRequest) (ledger.Record, error)
	get       func(context.Context, string) (ledger.Record, error)
}

func (l *testLedger) Suspended(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
	if l.suspended != nil {
		return l.suspended(ctx, req)
	}
	return l.Ledger.Suspended(ctx, req)
}

func (l *testLedger) Get(ctx context.Context, run string) (ledger.Record, error) {
	if l.get != nil {
		return l.get(ctx, run)
	}
	return l.Ledger.Get(ctx, run)
}

var errStorage = errors.New("ledger storage unreachable")

func TestSuspendRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, config, container, run string
		want                         error
	}{
		{"other image", `{"image":"busybox:1"}`, "alp", "r", suspend.ErrMismatch},
		{"unresolvable image", `{"image":"debian:12"}`, "Box-1", "r", errdef.ErrImageUnresolved},
		{"digest not the image's", `{"image":"busybox:1@` + digest.FromString("x").String() + `"}`, "Box-1", "r", errdef.ErrImageUnresolved},
		{"no container", `{"image":"busybox:1"}`, "nope", "r", suspend.ErrContainerNotFound},
		{"bad run", `{"image":"busybox:1"}`, "Box-1", "Bad_", snapshot.ErrInvalidRun},
		{"no default run", `{"image":"busybox:1"}`, "Box-1", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			e := newEnv(t, tc.config)
			l := ledgerfake.New()
			_, err := suspend.Run(ctx, f, l, e.req(tc.container, tc.run))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			e.noRefFile(t)
			for _, op := range f.Ops() {
				if op == memhost.OpCreateLease || op == memhost.OpPauseTask || op == memhost.OpSetLabels {
					t.Fatalf("%s happened before the refusal", op)
				}
			}
			if recs, _ := l.List(ctx); len(recs) != 0 {
				t.Fatalf("records %v after a refusal", recs)
			}
		})
	}
	t.Run("refused config", func(t *testing.T) {
		e := newEnv(t, `{"image":"busybox:1","runArgs":[]}`)
		_, err := suspend.Run(ctx, newFake(), ledgerfake.New(), e.req("Box-1", "r"))
		var re *envmanifest.RefusedError
		if !errors.As(err, &re) || re.Refusals[0].Pointer != "/runArgs" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("no ledger", func(t *testing.T) {
		e := newEnv(t, `{"image":"busybox:1"}`)
		if _, err := suspend.Run(ctx, newFake(), nil, e.req("Box-1", "r")); err == nil {
			t.Fatal("no error without a ledger")
		}
	})
}

// TestSuspendWritesV3: a suspend writes a sandbox.snapshot-ref/3 at
// generation 1 recording the container's spec bytes and runtime and a run
// UID minted from Request.Rand (also on the run lease), with no ancestors,
// memory, repinnedFrom or forkedFrom; records it in the ledger as
// suspended by this container, stops the task and labels the container
// suspended; the default ref file name carries the generation.
func TestSuspendWritesV3(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	e := newEnv(t, `{"image":"busybox:1"}`)
	l := ledgerfake.New()
	before := container(t, f, "Box-1")
	req := e.req("Box-1", "demo-1")
	req.Out = ""
	req.Rand = bytes.NewReader(bytes.Repeat([]byte{0xab}, 16))
	t.Chdir(e.dir)
	res, err := suspend.Run(ctx, f, l, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != "demo-1.g1.ref.json" || suspend.DefaultOut("demo-1", 3) != "demo-1.g3.ref.json" {
		t.Fatalf("path %q", res.Path)
	}
	file, err := os.ReadFile(filepath.Join(e.dir, "demo-1.g1.ref.json"))
	if err != nil || !bytes.Equal(file, res.File) || digest.FromBytes(file) != res.RefBlob {
		t.Fatalf("ref file (err %v)", err)
	}
	ref, err := snapshot.OpenRef(file, envelope.NewKeyRing(e.pub))
	if err != nil {
		t.Fatal(err)
	}
	if ref.Schema != snapshot.RefSchemaV3 || ref.Generation != 1 || ref.Parent != "" || ref.Fence != 0 || len(ref.Layers) != 1 || ref.KeptRunning {
		t.Fatalf("ref %+v", ref)
	}
	const uid = "ruid:abababababababababababababababab"
	if ref.RunUID != uid || ref.Ancestors != nil || ref.Memory != nil || ref.RepinnedFrom != "" || ref.ForkedFrom != nil {
		t.Fatalf("ref run UID %q, ancestors %v, memory %v, repinnedFrom %q, forkedFrom %v", ref.RunUID, ref.Ancestors, ref.Memory, ref.RepinnedFrom, ref.ForkedFrom)
	}
	if lease, err := f.Lease(ctx, res.Lease); err != nil || lease.Labels[snapshot.LabelRunUID] != uid {
		t.Fatalf("run lease %+v (err %v)", lease, err)
	}
	spec, err := f.Blob(ctx, ref.Spec.Digest)
	if err != nil || !bytes.Equal(spec, before.Spec) || ref.Spec.MediaType != snapshot.MediaTypeSpec || ref.Spec.Size != int64(len(spec)) {
		t.Fatalf("spec blob %+v: %q (err %v), the container's %q", ref.Spec, spec, err, before.Spec)
	}
	if ref.Runtime.Name != "io.containerd.runc.v2" || ref.Runtime.Options == nil ||
		ref.Runtime.Options.TypeURL != runcOptions.TypeURL || !bytes.Equal(ref.Runtime.Options.Value, runcOptions.Value) {
		t.Fatalf("runtime %+v", ref.Runtime)
	}
	for _, d := range []digest.Digest{ref.Layers[0].Digest, ref.Spec.Digest, res.RefBlob} {
		if ok, err := f.LeaseHolds(ctx, res.Lease, d); err != nil || !ok {
			t.Fatalf("run lease does not hold %s (err %v)", d, err)
		}
	}
	rec, err := l.Get(ctx, "demo-1")
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.SuspendedBy{Container: ledger.Container{Host: "host-a", Namespace: memhost.DefaultNamespace, ID: "Box-1"}, Created: before.Created, Generation: 1}
	if rec.State != ledger.StateSuspended || rec.Generation != 1 || rec.Ref != res.RefBlob || rec.Holder != nil ||
		rec.SuspendedBy == nil || *rec.SuspendedBy != want || res.Record.Ref != rec.Ref {
		t.Fatalf("record %+v, suspendedBy %+v", rec, rec.SuspendedBy)
	}
	c := container(t, f, "Box-1")
	if c.Task != snapshot.TaskNone || c.Labels[snapshot.LabelSuspended] != "1" || c.Labels[snapshot.LabelRun] != "demo-1" ||
		c.Labels[snapshot.LabelManifest] != ref.Manifest || c.Labels[snapshot.LabelSuspending] != "" || c.Labels[snapshot.LabelFence] != "" {
		t.Fatalf("task %q labels %v", c.Task, c.Labels)
	}
	if res.Fence != 0 || res.Paused < 0 || res.Finished {
		t.Fatalf("result fence %d paused %s finished %t", res.Fence, res.Paused, res.Finished)
	}
}

func TestSuspendKeepRunning(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	e := newEnv(t, `{"image":"busybox:1@`+digest.FromString("index0").String()+`"}`)
	l := ledgerfake.New()
	req := e.req("Box-1", "")
	req.KeepRunning = true
	req.Policy = []string{"LD_PRELOAD"}
	res, err := suspend.Run(ctx, f, l, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ref.Run != "box-1" || res.Lease != "sandbox-resume.run/box-1" || !res.Ref.KeptRunning || !res.Ref.Pinned {
		t.Fatalf("ref = %+v", res.Ref)
	}
	if res.Ref.Base.IndexDigest != digest.FromString("index0") || len(res.Ref.Policy) != 1 {
		t.Fatalf("ref = %+v", res.Ref)
	}
	rec, err := l.Get(ctx, "box-1")
	if err != nil || rec.State != ledger.StateLive || rec.Fence != 1 || rec.Holder == nil || rec.Holder.ID != "Box-1" {
		t.Fatalf("record %+v (err %v)", rec, err)
	}
	c := container(t, f, "Box-1")
	if c.Task != snapshot.TaskRunning || res.Fence != 1 || c.Labels[snapshot.LabelFence] != "1" || c.Labels[snapshot.LabelSuspended] != "" ||
		c.Labels[snapshot.LabelSuspending] != "" || c.Labels[snapshot.LabelRun] != "box-1" {
		t.Fatalf("task %q fence %d labels %v", c.Task, res.Fence, c.Labels)
	}
	if _, err := snapshot.OpenRef(res.File, envelope.NewKeyRing(e.pub)); err != nil {
		t.Fatal(err)
	}
	// The container holds the run: its next suspend writes generation 2
	// from it, with its fence.
	res2, err := suspend.Run(ctx, f, l, req)
	if err != nil {
		t.Fatalf("second suspend: %v", err)
	}
	if res2.Ref.Generation != 2 || res2.Ref.Parent != res.RefBlob || res2.Ref.Fence != 1 || res2.Fence != 1 || !res2.Ref.KeptRunning {
		t.Fatalf("second suspend: ref %+v", res2.Ref)
	}
}

// TestSuspendLabels: the container's labels decide before anything is
// paused (docs/design.md "Suspend", step 2).
func TestSuspendLabels(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		labels map[string]string
		run    string
		want   error
	}{
		{"already suspended", map[string]string{snapshot.LabelSuspended: "1", snapshot.LabelRun: "r"}, "", suspend.ErrAlreadySuspended},
		{"fence label, no record", map[string]string{snapshot.LabelFence: "4", snapshot.LabelRun: "r"}, "", suspend.ErrRunConflict},
		{"fence label not a fence", map[string]string{snapshot.LabelFence: "x", snapshot.LabelRun: "r"}, "", suspend.ErrRunConflict},
		{"suspending a later generation without a fence", map[string]string{snapshot.LabelSuspending: "2", snapshot.LabelRun: "r"}, "", suspend.ErrRunConflict},
		{"suspending a later generation, no record", map[string]string{snapshot.LabelSuspending: "2", snapshot.LabelFence: "1", snapshot.LabelRun: "r"}, "", suspend.ErrRunConflict},
		{"suspending label not a generation", map[string]string{snapshot.LabelSuspending: "x"}, "r", suspend.ErrRunConflict},
		{"run other than the label", map[string]string{snapshot.LabelRun: "r"}, "s", suspend.ErrRunMismatch},
		{"run label is the default", map[string]string{snapshot.LabelRun: "r"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.AddContainer(memhost.Container{ID: "box-9", Image: busybox, Task: snapshot.TaskRunning, Labels: tc.labels})
			e := newEnv(t, `{"image":"busybox:1"}`)
			l := ledgerfake.New()
			res, err := suspend.Run(ctx, f, l, e.req("box-9", tc.run))
			if tc.want == nil {
				if err != nil || res.Ref.Run != "r" {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			e.noRefFile(t)
			for _, op := range f.Ops() {
				if op == memhost.OpCreateLease || op == memhost.OpPauseTask || op == memhost.OpSetLabels {
					t.Fatalf("%s happened before the refusal", op)
				}
			}
			if c := container(t, f, "box-9"); c.Task != snapshot.TaskRunning {
				t.Fatalf("task %q", c.Task)
			}
		})
	}
}

// TestSuspendRunTaken: a record of the run — a tombstone included — is 8
// before anything is paused; a purged run id is free again.
func TestSuspendRunTaken(t *testing.T) {
	ctx := context.Background()
	other := ledger.Container{Host: "host-b", Namespace: "ns", ID: "elsewhere"}
	for _, tc := range []struct {
		name    string
		prepare func(*ledgerfake.Ledger)
		want    error
	}{
		{"suspended elsewhere", func(l *ledgerfake.Ledger) {
			mustSuspend(t, l, "r", other)
		}, suspend.ErrRunConflict},
		{"tombstone", func(l *ledgerfake.Ledger) {
			if _, err := l.Discard(ctx, "r", false); err != nil {
				t.Fatal(err)
			}
		}, suspend.ErrRunConflict},
		{"purged", func(l *ledgerfake.Ledger) {
			mustSuspend(t, l, "r", other)
			if _, err := l.Discard(ctx, "r", false); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Purge(ctx, "r"); err != nil {
				t.Fatal(err)
			}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			e := newEnv(t, `{"image":"busybox:1"}`)
			l := ledgerfake.New()
			tc.prepare(l)
			before, _ := l.Get(ctx, "r")
			res, err := suspend.Run(ctx, f, l, e.req("Box-1", "r"))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if res.Record.Generation != 1 || res.Record.Fence != before.Fence {
					t.Fatalf("record %+v after the purged %+v", res.Record, before)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			e.noRefFile(t)
			if slices.Contains(f.Ops(), memhost.OpPauseTask) || slices.Contains(f.Ops(), memhost.OpCreateLease) {
				t.Fatalf("operations %v before the refusal", f.Ops())
			}
			if after, _ := l.Get(ctx, "r"); after.Updated != before.Updated {
				t.Fatalf("the record changed: %+v", after)
			}
		})
	}
}

func mustSuspend(t *testing.T, l ledger.Ledger, run string, c ledger.Container) {
	t.Helper()
	if _, err := l.Suspended(context.Background(), ledger.SuspendRequest{Run: run, Generation: 1, Ref: digest.FromString("elsewhere " + run),
		Container: c, Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
}

// notRecorded checks step 5's "refused or failed": the task runs again,
// the suspending label is gone and the run label restored, no ref file.
func notRecorded(t *testing.T, f *memhost.Machine, e env, l ledger.Ledger) {
	t.Helper()
	e.noRefFile(t)
	c := container(t, f, "Box-1")
	if c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelSuspending] != "" || c.Labels[snapshot.LabelRun] != "" || c.Labels[snapshot.LabelSuspended] != "" {
		t.Fatalf("task %q labels %v", c.Task, c.Labels)
	}
}

// TestSuspendLedgerOutcomes covers every branch of docs/design.md
// "Suspend" step 5 after the request: refused, failed and not recorded,
// failed but recorded, and unknown.
func TestSuspendLedgerOutcomes(t *testing.T) {
	ctx := context.Background()
	t.Run("refused", func(t *testing.T) {
		// Another container takes the run id between the check of step 2
		// and the record.
		f, e, inner := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
		l := &testLedger{Ledger: inner}
		l.suspended = func(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
			mustSuspend(t, inner, req.Run, ledger.Container{Host: "host-b", Namespace: "ns", ID: "racer"})
			return inner.Suspended(ctx, req)
		}
		_, err := suspend.Run(ctx, f, l, e.req("Box-1", "r"))
		var le *ledger.Error
		if !errors.Is(err, suspend.ErrRunConflict) || !errors.As(err, &le) || !errors.Is(le.Class, errdef.ErrClaimConflict) {
			t.Fatalf("err = %v, want a claim-conflict refusal", err)
		}
		notRecorded(t, f, e, inner)
		if rec, _ := inner.Get(ctx, "r"); rec.SuspendedBy.ID != "racer" {
			t.Fatalf("record %+v", rec)
		}
	})
	t.Run("refused on the rerun of a crash that left the task paused", func(t *testing.T) {
		f, e, inner := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
		f.Hook = func(op string) error {
			if op == memhost.OpCreateDiff {
				panic(crash{op})
			}
			return nil
		}
		if at, err := runCrashing(f, inner, e.req("Box-1", "r")); at == "" {
			t.Fatalf("no crash: %v", err)
		}
		f.Hook = nil
		if c := container(t, f, "Box-1"); c.Task != snapshot.TaskPaused {
			t.Fatalf("task %q after the crash", c.Task)
		}
		l := &testLedger{Ledger: inner}
		l.suspended = func(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
			mustSuspend(t, inner, req.Run, ledger.Container{Host: "host-b", Namespace: "ns", ID: "racer"})
			return inner.Suspended(ctx, req)
		}
		if _, err := suspend.Run(ctx, f, l, e.req("Box-1", "r")); !errors.Is(err, errdef.ErrClaimConflict) {
			t.Fatalf("err = %v, want a claim-conflict refusal", err)
		}
		// The paused task was this run's suspend's: it runs again.
		if c := container(t, f, "Box-1"); c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelSuspending] != "" {
			t.Fatalf("task %q labels %v", c.Task, c.Labels)
		}
		e.noRefFile(t)
	})
	t.Run("failed, not recorded", func(t *testing.T) {
		f, e, inner := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
		l := &testLedger{Ledger: inner, suspended: func(context.Context, ledger.SuspendRequest) (ledger.Record, error) {
			return ledger.Record{}, errStorage
		}}
		_, err := suspend.Run(ctx, f, l, e.req("Box-1", "r"))
		if !errors.Is(err, errStorage) || errors.Is(err, suspend.ErrOutcomeUnknown) || errors.Is(err, suspend.ErrRunConflict) {
			t.Fatalf("err = %v", err)
		}
		notRecorded(t, f, e, inner)
		// The rerun records; the blobs the first attempt stored are reused.
		l.suspended = nil
		res, err := suspend.Run(ctx, f, l, e.req("Box-1", "r"))
		if err != nil || !res.Resumed {
			t.Fatalf("rerun: %v", err)
		}
	})
	t.Run("failed, but recorded", func(t *testing.T) {
		f, e, inner := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
		l := &testLedger{Ledger: inner, suspended: func(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
			if _, err := inner.Suspended(ctx, req); err != nil {
				t.Fatal(err)
			}
			return ledger.Record{}, errStorage // the answer was lost
		}}
		res, err := suspend.Run(ctx, f, l, e.req("Box-1", "r"))
		if err != nil {
			t.Fatal(err)
		}
		if file, _ := os.ReadFile(e.out()); !bytes.Equal(file, res.File) || res.Record.Ref != res.RefBlob {
			t.Fatal("no ref file, or another record")
		}
		if c := container(t, f, "Box-1"); c.Task != snapshot.TaskNone || c.Labels[snapshot.LabelSuspended] != "1" {
			t.Fatalf("task %q labels %v", c.Task, c.Labels)
		}
	})
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("unknown, keep %t", keep), func(t *testing.T) {
			for _, recorded := range []bool{false, true} {
				f, e, inner := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
				l := &testLedger{Ledger: inner}
				l.suspended = func(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
					if recorded {
						if _, err := inner.Suspended(ctx, req); err != nil {
							t.Fatal(err)
						}
					}
					l.get = func(context.Context, string) (ledger.Record, error) { return ledger.Record{}, errStorage }
					return ledger.Record{}, errStorage
				}
				req := e.req("Box-1", "r")
				req.KeepRunning = keep
				_, err := suspend.Run(ctx, f, l, req)
				if !errors.Is(err, suspend.ErrOutcomeUnknown) {
					t.Fatalf("recorded %t: err = %v, want ErrOutcomeUnknown", recorded, err)
				}
				e.noRefFile(t)
				if c := container(t, f, "Box-1"); c.Task != snapshot.TaskPaused || c.Labels[snapshot.LabelSuspending] != "1" {
					t.Fatalf("recorded %t: task %q labels %v, want paused and suspending", recorded, c.Task, c.Labels)
				}
				// The rerun decides: recorded → finished from the record
				// without a new diff; not recorded → started again.
				l.suspended, l.get = nil, nil
				n := len(f.Ops())
				req.KeepRunning = !keep // the rerun finishes as the ref says
				res, err := suspend.Run(ctx, f, l, req)
				if err != nil {
					t.Fatalf("recorded %t: rerun: %v", recorded, err)
				}
				if res.Finished != recorded || slices.Contains(f.Ops()[n:], memhost.OpCreateDiff) == recorded {
					t.Fatalf("recorded %t: finished %t, rerun operations %v", recorded, res.Finished, f.Ops()[n:])
				}
				wantTask := snapshot.TaskNone
				if res.Ref.KeptRunning {
					wantTask = snapshot.TaskRunning
				}
				if wantKeep := keep == recorded; res.Ref.KeptRunning != wantKeep {
					t.Fatalf("recorded %t: keptRunning %t, want %t", recorded, res.Ref.KeptRunning, wantKeep)
				}
				if c := container(t, f, "Box-1"); c.Task != wantTask || c.Labels[snapshot.LabelSuspending] != "" {
					t.Fatalf("recorded %t: after the rerun task %q labels %v", recorded, c.Task, c.Labels)
				}
				if recs, _ := inner.List(ctx); len(recs) != 1 || recs[0].Generation != 1 || recs[0].Ref != res.RefBlob {
					t.Fatalf("records %+v", recs)
				}
			}
		})
	}
}

// crash is what a test's hook panics with to stop Run where a SIGKILL
// would: nothing after it runs, no undo.
type crash struct{ at string }

// runCrashing runs Run and reports whether it crashed.
func runCrashing(f *memhost.Machine, l ledger.Ledger, req suspend.Request) (crashed string, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, ok := r.(crash)
			if !ok {
				panic(r)
			}
			crashed = c.at
		}
	}()
	_, err = suspend.Run(context.Background(), f, l, req)
	return "", err
}

// TestSuspendCrashAnywhere stops Run as a crash would (no undo runs) at
// each Capturer operation and on each side of the ledger's Suspended, with
// and without --keep-running; then it checks that no partial ref file
// exists and that a rerun completes the suspend with one record of
// generation 1: from the record, without a new diff, once the ledger
// recorded it.
func TestSuspendCrashAnywhere(t *testing.T) {
	for _, keep := range []bool{false, true} {
		ops := func() []string {
			f := newFake()
			e := newEnv(t, `{"image":"busybox:1"}`)
			req := e.req("Box-1", "r")
			req.KeepRunning = keep
			if _, err := suspend.Run(context.Background(), f, ledgerfake.New(), req); err != nil {
				t.Fatal(err)
			}
			return f.Ops()
		}()
		last := memhost.OpStopTask
		if keep {
			last = memhost.OpResumeTask
		}
		want := []string{memhost.OpContainer, memhost.OpHost, memhost.OpResolveImage, memhost.OpImageLabels, memhost.OpCreateLease, memhost.OpHoldBase, memhost.OpSetLabels,
			memhost.OpPauseTask, memhost.OpCreateDiff, memhost.OpWriteBlob, memhost.OpWriteBlob, last, memhost.OpSetLabels}
		if !keep {
			// A stopped container's snapshot becomes the chain snapshot
			// (docs/design.md "Resume on the same host without extracting").
			want = slices.Insert(want, len(want)-1, memhost.OpCommitChain)
		}
		if fmt.Sprint(ops) != fmt.Sprint(want) {
			t.Fatalf("keep %t: operations %v, want %v", keep, ops, want)
		}
		// Crash points: before each operation, and before and after the
		// ledger's Suspended (between the ref blob and the stop).
		type point struct {
			op     int  // crash before operation op, or
			ledger int  // 1: before Suspended, 2: after it
			after  bool // the ledger had recorded when it crashed
		}
		var points []point
		for i := range ops {
			points = append(points, point{op: i, ledger: 0, after: i >= 11})
		}
		points = append(points, point{op: -1, ledger: 1}, point{op: -1, ledger: 2, after: true})
		for _, p := range points {
			name := fmt.Sprintf("keep %t, before %d", keep, p.op)
			if p.op >= 0 {
				name += "-" + ops[p.op]
			} else {
				name = fmt.Sprintf("keep %t, ledger %d", keep, p.ledger)
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				f, e, inner := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
				l := &testLedger{Ledger: inner}
				n := 0
				f.Hook = func(op string) error {
					if n == p.op {
						n++
						panic(crash{op})
					}
					n++
					return nil
				}
				l.suspended = func(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
					if p.ledger == 1 {
						panic(crash{"before Suspended"})
					}
					rec, err := inner.Suspended(ctx, req)
					if p.ledger == 2 {
						panic(crash{"after Suspended"})
					}
					return rec, err
				}
				req := e.req("Box-1", "r")
				req.KeepRunning = keep
				crashed, err := runCrashing(f, l, req)
				if crashed == "" {
					t.Fatalf("no crash (err %v)", err)
				}
				if _, err := os.Stat(e.out()); err == nil && !p.after {
					t.Fatal("a ref file exists before the ledger recorded")
				}
				if recs, _ := inner.List(ctx); (len(recs) == 1) != p.after {
					t.Fatalf("crashed at %s: records %v", crashed, recs)
				}
				f.Hook, l.suspended = nil, nil
				// The run UID the interrupted suspend minted, once it made
				// the run lease: the rerun writes it again.
				var uid string
				if lease, err := f.Lease(ctx, snapshot.RunLease("r")); err == nil {
					uid = lease.Labels[snapshot.LabelRunUID]
				}
				n0 := len(f.Ops())
				req.KeepRunning = !keep // a rerun finishes as the recorded ref says
				res, err := suspend.Run(ctx, f, l, req)
				if err != nil {
					t.Fatalf("rerun after a crash at %s: %v", crashed, err)
				}
				if uid != "" && res.Ref.RunUID != uid {
					t.Fatalf("crashed at %s: the rerun wrote run UID %q, the run lease says %q", crashed, res.Ref.RunUID, uid)
				}
				file, err := os.ReadFile(e.out())
				if err != nil || !bytes.Equal(file, res.File) || digest.FromBytes(file) != res.RefBlob {
					t.Fatalf("ref file after the rerun (err %v)", err)
				}
				if _, err := snapshot.OpenRef(file, envelope.NewKeyRing(e.pub)); err != nil {
					t.Fatal(err)
				}
				recs, _ := inner.List(ctx)
				if len(recs) != 1 || recs[0].Generation != 1 || recs[0].Ref != res.RefBlob {
					t.Fatalf("records %+v", recs)
				}
				if res.Finished != p.after || slices.Contains(f.Ops()[n0:], memhost.OpCreateDiff) == p.after {
					t.Fatalf("crashed at %s: rerun finished %t, operations %v", crashed, res.Finished, f.Ops()[n0:])
				}
				// Recorded: the rerun followed the recorded ref, whatever
				// its own flag said; not recorded: the rerun's flag.
				wantKeep := keep == p.after
				if res.Ref.KeptRunning != wantKeep {
					t.Fatalf("crashed at %s: keptRunning %t, want %t", crashed, res.Ref.KeptRunning, wantKeep)
				}
				c := container(t, f, "Box-1")
				wantTask, suspended := snapshot.TaskNone, "1"
				if wantKeep {
					wantTask, suspended = snapshot.TaskRunning, ""
				}
				if c.Task != wantTask || c.Labels[snapshot.LabelSuspending] != "" || c.Labels[snapshot.LabelSuspended] != suspended {
					t.Fatalf("crashed at %s: after the rerun task %q labels %v", crashed, c.Task, c.Labels)
				}
				if wantKeep && c.Labels[snapshot.LabelFence] != fmt.Sprint(recs[0].Fence) {
					t.Fatalf("fence label %q, record fence %d", c.Labels[snapshot.LabelFence], recs[0].Fence)
				}
			})
		}
	}
}

// TestSuspendFailAnywhere fails each Capturer operation in turn (an error,
// not a crash): before the record the task runs again, the labels are
// restored and no ref file exists; after it the generation stands and the
// rerun finishes it.
func TestSuspendFailAnywhere(t *testing.T) {
	const ops = 13 // TestSuspendCrashAnywhere checks the list
	for i := range ops {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			ctx := context.Background()
			f, e, l := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
			n := 0
			failed := ""
			f.Hook = func(op string) error {
				defer func() { n++ }()
				if n == i {
					failed = op
					return errors.New("injected failure of " + op)
				}
				return nil
			}
			if _, err := suspend.Run(ctx, f, l, e.req("Box-1", "r")); err == nil {
				t.Fatal("no error from the failed operation")
			}
			recs, _ := l.List(ctx)
			c := container(t, f, "Box-1")
			switch {
			case len(recs) == 0:
				e.noRefFile(t)
				if c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelSuspending] != "" {
					t.Fatalf("failed %s: task %q labels %v", failed, c.Task, c.Labels)
				}
			case failed == memhost.OpStopTask:
				if c.Task != snapshot.TaskPaused || c.Labels[snapshot.LabelSuspending] != "1" {
					t.Fatalf("failed %s: task %q labels %v", failed, c.Task, c.Labels)
				}
			}
			f.Hook = nil
			res, err := suspend.Run(ctx, f, l, e.req("Box-1", "r"))
			if err != nil {
				t.Fatalf("failed %s; rerun: %v", failed, err)
			}
			if res.Finished != (len(recs) == 1) {
				t.Fatalf("failed %s; finished %t", failed, res.Finished)
			}
			if c := container(t, f, "Box-1"); c.Task != snapshot.TaskNone || c.Labels[snapshot.LabelSuspended] != "1" {
				t.Fatalf("after the rerun: task %q labels %v", c.Task, c.Labels)
			}
		})
	}
}

// TestSuspendRerunNotOurs: a container left suspending whose run the ledger
// records from another container, or whose kept-running record it no
// longer holds, is 8 and left as found; a recorded ref blob that is gone
// is 7.
func TestSuspendRerunNotOurs(t *testing.T) {
	ctx := context.Background()
	interrupted := func(t *testing.T, keep bool) (*memhost.Machine, env, *ledgerfake.Ledger) {
		f, e, l := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
		tl := &testLedger{Ledger: l, suspended: func(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
			if _, err := l.Suspended(ctx, req); err != nil {
				t.Fatal(err)
			}
			panic(crash{"after Suspended"})
		}}
		req := e.req("Box-1", "r")
		req.KeepRunning = keep
		if at, err := runCrashing(f, tl, req); at == "" {
			t.Fatalf("no crash: %v", err)
		}
		return f, e, l
	}
	leftAsFound := func(t *testing.T, f *memhost.Machine, e env) {
		t.Helper()
		e.noRefFile(t)
		if c := container(t, f, "Box-1"); c.Task != snapshot.TaskPaused || c.Labels[snapshot.LabelSuspending] != "1" {
			t.Fatalf("task %q labels %v", c.Task, c.Labels)
		}
	}
	t.Run("recorded by another container", func(t *testing.T) {
		f, e, l := interrupted(t, false)
		if _, err := l.Discard(ctx, "r", false); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Purge(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		mustSuspend(t, l, "r", ledger.Container{Host: "host-b", Namespace: "ns", ID: "other"})
		_, err := suspend.Run(ctx, f, l, e.req("Box-1", "r"))
		if !errors.Is(err, suspend.ErrRunConflict) {
			t.Fatalf("err = %v, want ErrRunConflict", err)
		}
		leftAsFound(t, f, e)
	})
	t.Run("same id, re-created container", func(t *testing.T) {
		f, e, l := interrupted(t, false)
		c := container(t, f, "Box-1")
		f.AddContainer(memhost.Container{ID: "Box-1", Image: busybox, Task: snapshot.TaskPaused, Labels: c.Labels, Created: c.Created.Add(time.Second)})
		if _, err := suspend.Run(ctx, f, l, e.req("Box-1", "r")); !errors.Is(err, suspend.ErrRunConflict) {
			t.Fatalf("err = %v, want ErrRunConflict", err)
		}
		leftAsFound(t, f, e)
	})
	t.Run("kept running, no longer held", func(t *testing.T) {
		f, e, l := interrupted(t, true)
		if _, err := l.Discard(ctx, "r", true); err != nil {
			t.Fatal(err)
		}
		if _, err := suspend.Run(ctx, f, l, e.req("Box-1", "r")); !errors.Is(err, suspend.ErrRunConflict) {
			t.Fatalf("err = %v, want ErrRunConflict", err)
		}
		leftAsFound(t, f, e)
	})
	t.Run("recorded ref blob gone", func(t *testing.T) {
		f, e, l := interrupted(t, false)
		rec, err := l.Get(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		f.DeleteBlob(rec.Ref)
		if _, err := suspend.Run(ctx, f, l, e.req("Box-1", "r")); !errors.Is(err, errdef.ErrSnapshotMissing) {
			t.Fatalf("err = %v, want errdef.ErrSnapshotMissing", err)
		}
		f.CorruptBlob(rec.Ref, []byte("not the ref"))
		if _, err := suspend.Run(ctx, f, l, e.req("Box-1", "r")); !errors.Is(err, errdef.ErrSnapshotMissing) {
			t.Fatalf("corrupt: err = %v, want errdef.ErrSnapshotMissing", err)
		}
		leftAsFound(t, f, e)
	})
}

// TestSuspendSecondContainer: a second suspend of the same run id from
// another container is ErrRunConflict (claim-conflict, 8) before anything
// is paused.
func TestSuspendSecondContainer(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	e := newEnv(t, `{"image":"busybox:1"}`)
	l := ledgerfake.New()
	if _, err := suspend.Run(ctx, f, l, e.req("Box-1", "r")); err != nil {
		t.Fatal(err)
	}
	f.AddContainer(memhost.Container{ID: "box-2", Image: busybox, Task: snapshot.TaskRunning})
	n := len(f.Ops())
	if _, err := suspend.Run(ctx, f, l, e.req("box-2", "r")); !errors.Is(err, suspend.ErrRunConflict) {
		t.Fatalf("err = %v, want ErrRunConflict", err)
	}
	if slices.Contains(f.Ops()[n:], memhost.OpPauseTask) {
		t.Fatal("the refused suspend paused the task")
	}
	if c := container(t, f, "box-2"); c.Task != snapshot.TaskRunning || len(c.Labels) != 0 {
		t.Fatalf("box-2: task %q labels %v", c.Task, c.Labels)
	}
}

func TestRunLeaseHoldsTheRun(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	e := newEnv(t, `{"image":"busybox:1"}`)
	res, err := suspend.Run(ctx, f, ledgerfake.New(), e.req("Box-1", "r"))
	if err != nil {
		t.Fatal(err)
	}
	f.DeleteImage(busybox)
	if _, err := f.Blob(ctx, res.Ref.Base.ManifestDigest); err != nil {
		t.Fatalf("the run lease did not keep the base manifest: %v", err)
	}
	// Deleting the run lease (what discard does on this host) lets the
	// garbage collection take everything the run alone held.
	if err := f.DeleteLease(ctx, snapshot.RunLease("r")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []digest.Digest{res.Ref.Layers[0].Digest, res.Ref.Spec.Digest, res.RefBlob, res.Ref.Base.ManifestDigest} {
		if _, err := f.Blob(ctx, d); err == nil {
			t.Fatalf("%s still present after discard", d)
		}
	}
}
