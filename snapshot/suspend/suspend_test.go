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
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/snapshot/fake"
	"github.com/sandbox-resume/sandbox-resume/snapshot/suspend"
)

const busybox = "docker.io/library/busybox:1"

func newFake() *fake.Capturer {
	f := fake.New(snapshot.Host{ID: "host-a", IDSource: snapshot.IDSourceIntrospection, ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: "linux/amd64"})
	for i, name := range []string{busybox, "docker.io/library/alpine:3"} {
		f.AddImage(fake.Image{
			Base: snapshot.Base{
				Name: name, IndexDigest: digest.FromString(fmt.Sprint("index", i)), ManifestDigest: digest.FromString(fmt.Sprint("manifest", i)),
				ConfigDigest: digest.FromString(fmt.Sprint("config", i)), Platform: "linux/amd64",
				DiffIDs: []digest.Digest{digest.FromString(fmt.Sprint("diffid", i))},
			},
			Layers: []digest.Digest{digest.FromString(fmt.Sprint("layer", i))},
		})
	}
	f.AddContainer(fake.Container{ID: "Box-1", Image: busybox, Task: snapshot.TaskRunning, Files: map[string][]byte{"a.txt": []byte("A")}})
	f.AddContainer(fake.Container{ID: "alp", Image: "docker.io/library/alpine:3", Task: snapshot.TaskRunning})
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

func (e env) req(container, run string) suspend.Request {
	return suspend.Request{ContainerID: container, ConfigPath: e.cfg, Run: run,
		Keys: []crypto.Signer{e.priv}, Out: filepath.Join(e.dir, "ref.json")}
}

func TestSuspendRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, config, container, run string
		want                         error
	}{
		{"other image", `{"image":"busybox:1"}`, "alp", "r", suspend.ErrMismatch},
		{"unresolvable image", `{"image":"debian:12"}`, "Box-1", "r", snapshot.ErrImageUnresolved},
		{"digest not the image's", `{"image":"busybox:1@` + digest.FromString("x").String() + `"}`, "Box-1", "r", snapshot.ErrImageUnresolved},
		{"no container", `{"image":"busybox:1"}`, "nope", "r", suspend.ErrContainerNotFound},
		{"bad run", `{"image":"busybox:1"}`, "Box-1", "Bad_", snapshot.ErrInvalidRun},
		{"no default run", `{"image":"busybox:1"}`, "Box-1", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			e := newEnv(t, tc.config)
			_, err := suspend.Run(ctx, f, e.req(tc.container, tc.run))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if _, serr := os.Stat(filepath.Join(e.dir, "ref.json")); serr == nil {
				t.Fatal("a ref file was written")
			}
			for _, op := range f.Ops() {
				if op == fake.OpCreateLease || op == fake.OpPauseTask {
					t.Fatalf("%s happened before the refusal", op)
				}
			}
		})
	}
	t.Run("refused config", func(t *testing.T) {
		e := newEnv(t, `{"image":"busybox:1","runArgs":[]}`)
		_, err := suspend.Run(ctx, newFake(), e.req("Box-1", "r"))
		var re *envmanifest.RefusedError
		if !errors.As(err, &re) || re.Refusals[0].Pointer != "/runArgs" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("run lease of another container", func(t *testing.T) {
		f := newFake()
		e := newEnv(t, `{"image":"busybox:1"}`)
		if _, err := suspend.Run(ctx, f, e.req("Box-1", "r")); err != nil {
			t.Fatal(err)
		}
		f.AddContainer(fake.Container{ID: "box-2", Image: busybox, Task: snapshot.TaskRunning})
		if _, err := suspend.Run(ctx, f, e.req("box-2", "r")); !errors.Is(err, suspend.ErrRunConflict) {
			t.Fatalf("err = %v, want ErrRunConflict", err)
		}
	})
}

func TestSuspendDefaultsAndKeepRunning(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	e := newEnv(t, `{"image":"busybox:1@`+digest.FromString("index0").String()+`"}`)
	req := e.req("Box-1", "")
	req.KeepRunning = true
	req.Policy = []string{"LD_PRELOAD"}
	res, err := suspend.Run(ctx, f, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ref.Run != "box-1" || res.Lease != "sandbox-resume.run/box-1" || !res.Ref.KeptRunning || !res.Ref.Pinned {
		t.Fatalf("ref = %+v", res.Ref)
	}
	if res.Ref.Base.IndexDigest != digest.FromString("index0") || len(res.Ref.Policy) != 1 {
		t.Fatalf("ref = %+v", res.Ref)
	}
	c, _ := f.Container(ctx, "Box-1")
	if c.Task != snapshot.TaskRunning {
		t.Fatalf("task %q, want running", c.Task)
	}
	if _, err := snapshot.OpenRef(res.File, envelope.NewKeyRing(e.pub)); err != nil {
		t.Fatal(err)
	}
}

// TestSuspendCrashAnywhere fails each Capturer operation in turn (as a
// crash there would), checks that no partial ref file exists, and that a
// rerun with the same run id completes with the same ref.
func TestSuspendCrashAnywhere(t *testing.T) {
	ctx := context.Background()
	ops := func() []string {
		f := newFake()
		e := newEnv(t, `{"image":"busybox:1"}`)
		if _, err := suspend.Run(ctx, f, e.req("Box-1", "r")); err != nil {
			t.Fatal(err)
		}
		return f.Ops()
	}()
	want := []string{fake.OpContainer, fake.OpHost, fake.OpResolveImage, fake.OpImageLabels, fake.OpCreateLease, fake.OpHoldBase,
		fake.OpPauseTask, fake.OpCreateDiff, fake.OpStopTask, fake.OpWriteBlob, fake.OpSetLabels}
	if fmt.Sprint(ops) != fmt.Sprint(want) {
		t.Fatalf("operations %v, want %v", ops, want)
	}
	pausedAfter := map[string]bool{}
	for i := range ops {
		t.Run(fmt.Sprintf("%d-%s", i, ops[i]), func(t *testing.T) {
			f := newFake()
			e := newEnv(t, `{"image":"busybox:1"}`)
			n := 0
			f.Hook = func(op string) error {
				if n == i {
					n++
					return errors.New("crash before " + op)
				}
				n++
				return nil
			}
			if _, err := suspend.Run(ctx, f, e.req("Box-1", "r")); err == nil {
				t.Fatal("no error from the failed operation")
			}
			out := filepath.Join(e.dir, "ref.json")
			if _, err := os.Stat(out); err == nil {
				t.Fatal("ref file exists after a failed suspend")
			}
			if c, _ := f.Container(ctx, "Box-1"); c.Task == snapshot.TaskPaused {
				pausedAfter[ops[i]] = true
			}
			f.Hook = nil
			res, err := suspend.Run(ctx, f, e.req("Box-1", "r"))
			if err != nil {
				t.Fatalf("rerun: %v", err)
			}
			file, err := os.ReadFile(out)
			if err != nil || !bytes.Equal(file, res.File) {
				t.Fatalf("ref file after rerun (err %v)", err)
			}
			if _, err := snapshot.OpenRef(file, envelope.NewKeyRing(e.pub)); err != nil {
				t.Fatal(err)
			}
			if c, _ := f.Container(ctx, "Box-1"); c.Task != snapshot.TaskNone {
				t.Fatalf("task %q after the rerun", c.Task)
			}
		})
	}
	// A failed diff resumes the task it paused; a crash before the stop
	// leaves it paused (and the rerun above stopped it).
	if pausedAfter[fake.OpCreateDiff] || !pausedAfter[fake.OpStopTask] {
		t.Errorf("paused after the failure of: %v; want only StopTask", pausedAfter)
	}
}

func TestDiscard(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	e := newEnv(t, `{"image":"busybox:1"}`)
	res, err := suspend.Run(ctx, f, e.req("Box-1", "r"))
	if err != nil {
		t.Fatal(err)
	}
	f.DeleteImage(busybox)
	if _, err := f.Blob(ctx, res.Ref.Base.ManifestDigest); err != nil {
		t.Fatalf("the run lease did not keep the base manifest: %v", err)
	}
	deleted, err := snapshot.Discard(ctx, f, "r")
	if err != nil || fmt.Sprint(deleted) != "[sandbox-resume.run/r]" {
		t.Fatalf("Discard = %v, %v", deleted, err)
	}
	for _, d := range []digest.Digest{res.Ref.RootfsDiff.Digest, digest.Digest(res.RefBlob), res.Ref.Base.ManifestDigest} {
		if _, err := f.Blob(ctx, d); err == nil {
			t.Fatalf("%s still present after discard", d)
		}
	}
	if _, err := snapshot.Discard(ctx, f, "r"); !errors.Is(err, snapshot.ErrRunNotFound) {
		t.Fatalf("second discard: %v", err)
	}
	if _, err := snapshot.Discard(ctx, f, "R/"); !errors.Is(err, snapshot.ErrInvalidRun) {
		t.Fatalf("invalid run: %v", err)
	}
}
