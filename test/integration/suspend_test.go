package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/host/hosttest"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	ctrd "github.com/sandbox-resume/sandbox-resume/runtime/containerd"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// workload is what the test containers run: write files (one nested, one
// replacing an image file, one deleting the marker), say READY, then sleep.
const workload = `echo hello-from-suspend > /data.txt && mkdir -p /var/sr && echo nested > /var/sr/n.txt && ` +
	`rm -f /etc/sandbox-resume-marker && echo READY && exec sleep 3600`

// runningContainer is scriptContainer running workload.
func runningContainer(t testing.TB, d *harness.Daemon, name, id string) string {
	t.Helper()
	return scriptContainer(t, d, name, id, workload)
}

// scriptContainer creates container d.ID(id) from image name (in the
// daemon's namespace), unpacked on overlayfs with snapshot key = container
// id, starts its task running script under /bin/sh -c and waits (30 s at
// most) until it printed READY.
func scriptContainer(t testing.TB, d *harness.Daemon, name, id, script string) string {
	t.Helper()
	return scriptContainerWith(t, d, name, id, script)
}

// scriptContainerWith is scriptContainer with more spec options (env,
// mounts, a user, …) applied after the image config and the args.
func scriptContainerWith(t testing.TB, d *harness.Daemon, name, id, script string, opts ...oci.SpecOpts) string {
	t.Helper()
	ctx := d.Context(t)
	img, err := d.Client.GetImage(ctx, name)
	if err != nil {
		t.Fatalf("image %s: %v", name, err)
	}
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatalf("unpack %s: %v", name, err)
	}
	cid := d.ID(id)
	c, err := d.Client.NewContainer(ctx, cid, client.WithImage(img), client.WithSnapshotter("overlayfs"),
		client.WithNewSnapshot(cid, img), client.WithNewSpec(append([]oci.SpecOpts{oci.WithImageConfig(img), oci.WithProcessArgs("/bin/sh", "-c", script)}, opts...)...))
	if err != nil {
		t.Fatalf("new container %s: %v", cid, err)
	}
	out := &syncBuffer{}
	task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(filepath.Join(d.Dir, "fifo"))))
	if err != nil {
		t.Fatalf("new task %s: %v", cid, err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("start %s: %v", cid, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "READY") {
		if time.Now().After(deadline) {
			t.Fatalf("container %s did not print READY: %q", cid, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cid
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// captureProbe is hosttest.Probe on a daemon.
type captureProbe struct {
	rt *ctrd.Runtime
}

func (p captureProbe) Blob(ctx context.Context, d digest.Digest) ([]byte, error) {
	cs := p.rt.Client().ContentStore()
	info, err := cs.Info(ctx, d)
	if err != nil {
		return nil, err
	}
	return content.ReadBlob(ctx, cs, ocispec.Descriptor{Digest: d, Size: info.Size})
}

func (p captureProbe) LeaseHolds(ctx context.Context, lease string, d digest.Digest) (bool, error) {
	return p.rt.LeaseHolds(ctx, lease, d)
}

func (p captureProbe) SnapshotKind(ctx context.Context, c snapshot.Container) (string, error) {
	info, err := p.rt.Client().SnapshotService(c.Snapshotter).Stat(ctx, c.SnapshotKey)
	if err != nil {
		return "", err
	}
	return strings.ToLower(info.Kind.String()), nil
}

// runCLI runs the sandbox-resume binary against daemon d and returns its
// stdout and exit code.
func runCLI(t testing.TB, d *harness.Daemon, args ...string) (string, int) {
	t.Helper()
	args = append([]string{"--address", d.Address, "--namespace", d.Namespace}, args...)
	cmd := exec.Command(cli(t), args...)
	cmd.Env = cliEnv(args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Logf("sandbox-resume %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String(), code
}

type suspendEnv struct {
	dir, cfg, key, pub string
	trust              *envelope.KeyRing
}

func newSuspendEnv(t testing.TB, image string) suspendEnv {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(`{"image": "`+image+`", "name": "suspend test"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	pub, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := envelope.LoadTrust(pub)
	if err != nil {
		t.Fatal(err)
	}
	return suspendEnv{dir: dir, cfg: cfg, key: key, pub: pub, trust: trust}
}

// present reports which of the digests are in the daemon's content store.
func present(t testing.TB, ctx context.Context, cs content.Store, dgsts ...digest.Digest) []bool {
	t.Helper()
	out := make([]bool, len(dgsts))
	for i, d := range dgsts {
		_, err := cs.Info(ctx, d)
		switch {
		case err == nil:
			out[i] = true
		case errdefs.IsNotFound(err):
		default:
			t.Fatalf("info %s: %v", d, err)
		}
	}
	return out
}

func TestSuspendLifecycle(t *testing.T) {
	d := harness.Start(t, "suspend")
	im := harness.ImportBusybox(t, d, "busybox:1")
	cid := runningContainer(t, d, im.Name, "life")
	env := newSuspendEnv(t, "busybox:1")
	refPath := filepath.Join(env.dir, "ref.json")

	out, code := runCLI(t, d, "--output", "json", "suspend", "--container", cid, "--config", env.cfg, "--key", env.key,
		"--run", "life-1", "--out", refPath)
	if code != 0 {
		t.Fatalf("suspend exit %d", code)
	}
	file, err := os.ReadFile(refPath)
	if err != nil {
		t.Fatal(err)
	}
	// --output json prints the CLI contract's object (docs/design.md
	// "CLI contract"), its members spelled out by hand.
	var printed map[string]any
	if err := json.Unmarshal([]byte(out), &printed); err != nil {
		t.Fatalf("--output json: %v\n%s", err, out)
	}
	if printed["run"] != "life-1" || printed["generation"] != 1.0 || printed["ref"] != digest.FromBytes(file).String() ||
		printed["out"] != refPath || printed["keptRunning"] != false || printed["fence"] != nil || len(printed) != 6 {
		t.Fatalf("--output json printed %s", out)
	}
	if ms, ok := printed["pausedMs"].(float64); !ok || ms < 0 {
		t.Fatalf("pausedMs %v", printed["pausedMs"])
	}
	ref, err := snapshot.OpenRef(file, env.trust)
	if err != nil {
		t.Fatal(err)
	}
	// A /3 ref at generation 1 with a run UID and no ancestors, recording
	// the container's spec bytes as containerd holds them and its runtime.
	if ref.Schema != snapshot.RefSchemaV3 || ref.Generation != 1 || len(ref.Layers) != 1 || ref.Spec == nil || ref.Runtime == nil ||
		ref.Runtime.Name != "io.containerd.runc.v2" || !snapshot.ValidRunUID(ref.RunUID) || len(ref.Ancestors) != 0 {
		t.Fatalf("ref %s generation %d, %d layers, spec %v, runtime %v, run UID %q, ancestors %v", ref.Schema, ref.Generation, len(ref.Layers), ref.Spec, ref.Runtime, ref.RunUID, ref.Ancestors)
	}
	{
		cont, err := d.Client.LoadContainer(d.Context(t), cid)
		if err != nil {
			t.Fatal(err)
		}
		info, err := cont.Info(d.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		spec := readAll(t, d.Context(t), d.Client.ContentStore(), ref.Spec.Digest)
		if !bytes.Equal(spec, info.Spec.GetValue()) || ref.Spec.MediaType != snapshot.MediaTypeSpec {
			t.Fatalf("spec blob %d bytes, the container's spec %d bytes", len(spec), len(info.Spec.GetValue()))
		}
	}
	// The ledger records generation 1, suspended by this container.
	{
		l := daemonLedger(t, d, "")
		rec, err := l.Get(d.Context(t), "life-1")
		l.Close()
		if err != nil || rec.State != ledger.StateSuspended || rec.Generation != 1 || rec.Ref != digest.FromBytes(file) ||
			rec.SuspendedBy == nil || rec.SuspendedBy.ID != cid || rec.SuspendedBy.Namespace != d.Namespace {
			t.Fatalf("ledger record %+v (err %v)", rec, err)
		}
	}
	// The image digests are the image's.
	if ref.Base.IndexDigest != im.Index || ref.Base.ManifestDigest != im.Manifest || ref.Base.ConfigDigest != im.Config ||
		fmt.Sprint(ref.Base.DiffIDs) != fmt.Sprint(im.DiffIDs) || ref.Base.Platform != im.Platform || ref.Base.Name != im.Name {
		t.Fatalf("ref base %+v, image %+v", ref.Base, im)
	}
	// The manifest address is the one `manifest` computes for the file.
	mout, code := runCLI(t, d, "--output", "json", "manifest", env.cfg)
	if code != 0 {
		t.Fatalf("manifest exit %d", code)
	}
	var mres struct {
		Address string `json:"address"`
		Pinned  bool   `json:"pinned"`
	}
	if err := json.Unmarshal([]byte(mout), &mres); err != nil {
		t.Fatal(err)
	}
	if mres.Address != ref.Manifest || mres.Pinned != ref.Pinned {
		t.Fatalf("manifest says %s pinned=%t, ref says %s pinned=%t", mres.Address, mres.Pinned, ref.Manifest, ref.Pinned)
	}
	rt := d.Connect(t, "")
	ctx := d.Context(t)
	probe := captureProbe{rt}
	// The diffID matches the stored blob; the blob holds the files.
	hosttest.CheckDiff(t, probe, ref.Layers[0])
	// The container's snapshot is still active (never committed), its task
	// is gone, and it carries the run labels.
	c, err := rt.Container(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	if c.SnapshotKind != "active" || c.Task != snapshot.TaskNone {
		t.Fatalf("after suspend: snapshot %s, task %q", c.SnapshotKind, c.Task)
	}
	if c.Labels[snapshot.LabelRun] != "life-1" || c.Labels[snapshot.LabelManifest] != ref.Manifest ||
		c.Labels[snapshot.LabelSuspended] != "1" || c.Labels[snapshot.LabelSuspending] != "" {
		t.Fatalf("labels %v", c.Labels)
	}
	refBlob := digest.FromBytes(file)
	kept := []digest.Digest{ref.Layers[0].Digest, ref.Spec.Digest, refBlob, im.Index, im.Manifest, im.Config}
	for _, l := range im.Image.Layers {
		kept = append(kept, l.Digest)
	}

	// Delete the container, the image and the harness's own lease (which
	// also holds the image blobs); the image delete is synchronous (GC).
	dropHarnessLeases(t, ctx, d)
	cont, err := d.Client.LoadContainer(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cont.Delete(ctx, client.WithSnapshotCleanup); err != nil {
		t.Fatal(err)
	}
	if err := d.Client.ImageService().Delete(ctx, im.Name, images.SynchronousDelete()); err != nil {
		t.Fatal(err)
	}
	if got := present(t, ctx, d.Client.ContentStore(), kept...); fmt.Sprint(got) != fmt.Sprint(allTrue(len(kept))) {
		t.Fatalf("after deleting container and image + GC, present = %v for %v", got, kept)
	}
	// A daemon restart keeps them.
	d.Restart(t)
	ctx = d.Context(t)
	if got := present(t, ctx, d.Client.ContentStore(), kept...); fmt.Sprint(got) != fmt.Sprint(allTrue(len(kept))) {
		t.Fatalf("after a restart, present = %v for %v", got, kept)
	}
	// discard deletes the run lease synchronously: everything goes.
	if _, code := runCLI(t, d, "discard", "--run", "life-1"); code != 0 {
		t.Fatalf("discard exit %d", code)
	}
	if got := present(t, ctx, d.Client.ContentStore(), kept...); fmt.Sprint(got) != fmt.Sprint(make([]bool, len(kept))) {
		t.Fatalf("after discard, present = %v for %v", got, kept)
	}
	// A second discard changes nothing and deletes nothing (the ledger's
	// Discard of a discarded run: no change; the previous release exited 2
	// here, when discard was only the leases).
	out, code = runCLI(t, d, "--output", "json", "discard", "--run", "life-1")
	var res struct {
		Run     string   `json:"run"`
		State   string   `json:"state"`
		Deleted []string `json:"deleted"`
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Run != "life-1" || res.State != "discarded" || res.Deleted == nil || len(res.Deleted) != 0 {
		t.Fatalf("second discard exit %d: %s (%v); want 0, discarded, nothing deleted", code, out, err)
	}
}

func allTrue(n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = true
	}
	return out
}

// dropHarnessLeases deletes the leases the harness made in the daemon's
// namespace (label io.sandbox-resume.test), so that only what the test
// holds survives a GC.
func dropHarnessLeases(t testing.TB, ctx context.Context, d *harness.Daemon) {
	t.Helper()
	ls, err := d.Client.LeasesService().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if _, ok := l.Labels["io.sandbox-resume.test"]; ok {
			if err := d.Client.LeasesService().Delete(ctx, l, leases.SynchronousDelete); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestSuspendRefusesUndescribedContainer(t *testing.T) {
	d := harness.Start(t, "suspendno")
	harness.ImportBusybox(t, d, "busybox:1")
	other := harness.ImportBusyboxVariant(t, d, "other:1", "other")
	cid := runningContainer(t, d, other.Name, "other")
	env := newSuspendEnv(t, "busybox:1")
	refPath := filepath.Join(env.dir, "ref.json")
	if _, code := runCLI(t, d, "suspend", "--container", cid, "--config", env.cfg, "--key", env.key, "--run", "no-1", "--out", refPath); code != 3 {
		t.Fatalf("container from another image: exit %d, want 3", code)
	}
	env2 := newSuspendEnv(t, "debian:12")
	if _, code := runCLI(t, d, "suspend", "--container", cid, "--config", env2.cfg, "--key", env2.key, "--run", "no-2", "--out", refPath); code != 5 {
		t.Fatalf("unresolvable image: exit %d, want 5", code)
	}
	if _, code := runCLI(t, d, "suspend", "--container", cid+"-absent", "--config", env.cfg, "--key", env.key, "--run", "no-3", "--out", refPath); code != 2 {
		t.Fatalf("absent container: exit %d, want 2", code)
	}
	if _, err := os.Stat(refPath); err == nil {
		t.Fatal("a refused suspend wrote a ref file")
	}
	// Nothing was created and the task still runs.
	rt := d.Connect(t, "")
	c, err := rt.Container(d.Context(t), cid)
	if err != nil || c.Task != snapshot.TaskRunning {
		t.Fatalf("task %q (err %v), want running", c.Task, err)
	}
	if _, err := rt.Lease(d.Context(t), snapshot.RunLease("no-1")); !errdefs.IsNotFound(err) {
		t.Fatalf("run lease after a refusal: err %v", err)
	}
}

func TestSuspendKeepRunning(t *testing.T) {
	d := harness.Start(t, "suspendkeep")
	im := harness.ImportBusybox(t, d, "busybox:1")
	cid := runningContainer(t, d, im.Name, "keep")
	env := newSuspendEnv(t, "busybox:1")
	refPath := filepath.Join(env.dir, "ref.json")
	if _, code := runCLI(t, d, "suspend", "--container", cid, "--config", env.cfg, "--key", env.key, "--keep-running", "--out", refPath); code != 0 {
		t.Fatalf("exit %d", code)
	}
	file, err := os.ReadFile(refPath)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := snapshot.OpenRef(file, env.trust)
	if err != nil {
		t.Fatal(err)
	}
	if !ref.KeptRunning || ref.Run != cid {
		t.Fatalf("keptRunning %t run %q", ref.KeptRunning, ref.Run)
	}
	rt := d.Connect(t, "")
	c, err := rt.Container(d.Context(t), cid)
	if err != nil || c.Task != snapshot.TaskRunning {
		t.Fatalf("task %q (err %v), want running", c.Task, err)
	}
	// The container holds the run: live in the ledger, its fence on the
	// fence label; suspending it again writes generation 2 (stopping it:
	// labelled suspended = 2, not deleted: it is the runtime's).
	l := daemonLedger(t, d, "")
	rec, err := l.Get(d.Context(t), cid)
	l.Close()
	if err != nil || rec.State != ledger.StateLive || rec.Fence != 1 || rec.Holder == nil || rec.Holder.ID != cid ||
		c.Labels[snapshot.LabelFence] != "1" || c.Labels[snapshot.LabelSuspending] != "" || c.Labels[snapshot.LabelSuspended] != "" {
		t.Fatalf("record %+v (err %v), labels %v", rec, err, c.Labels)
	}
	out, code := runCLI(t, d, "--output", "json", "suspend", "--container", cid, "--config", env.cfg, "--key", env.key, "--out", refPath+".2")
	if code != 0 || !strings.Contains(out, `"generation": 2`) {
		t.Fatalf("suspend of a container holding its run: exit %d %s, want generation 2", code, out)
	}
	file2, err := os.ReadFile(refPath + ".2")
	if err != nil {
		t.Fatal(err)
	}
	ref2, err := snapshot.OpenRef(file2, env.trust)
	if err != nil || ref2.Generation != 2 || ref2.Parent != digest.FromBytes(file) || ref2.Fence != 1 || ref2.KeptRunning {
		t.Fatalf("generation 2: %+v (err %v)", ref2, err)
	}
	// Generation 2 keeps generation 1's run UID and lists it as its one
	// ancestor.
	if ref1, err := snapshot.OpenRef(file, env.trust); err != nil || ref2.RunUID != ref1.RunUID || !snapshot.ValidRunUID(ref2.RunUID) ||
		len(ref2.Ancestors) != 1 || ref2.Ancestors[0] != ref2.Parent {
		t.Fatalf("generation 2: run UID %q (generation 1's %q), ancestors %v (err %v)", ref2.RunUID, ref1.RunUID, ref2.Ancestors, err)
	}
	if c, err := rt.Container(d.Context(t), cid); err != nil || c.Task != snapshot.TaskNone || c.Labels[snapshot.LabelSuspended] != "2" {
		t.Fatalf("task %q labels %v (err %v), want stopped and suspended = 2", c.Task, c.Labels, err)
	}
}

// TestSuspendSameRunOtherContainer: a second suspend of the same run id
// from another container is 8 (the run id is taken), before anything is
// paused or written; so is one after the run was discarded (a tombstone).
func TestSuspendSameRunOtherContainer(t *testing.T) {
	d := harness.Start(t, "suspendtwice")
	im := harness.ImportBusybox(t, d, "busybox:1")
	env := newSuspendEnv(t, "busybox:1")
	first := runningContainer(t, d, im.Name, "first")
	second := runningContainer(t, d, im.Name, "second")
	refPath := filepath.Join(env.dir, "ref.json")
	if _, code := runCLI(t, d, "suspend", "--container", first, "--config", env.cfg, "--key", env.key, "--run", "twice-1", "--out", refPath); code != 0 {
		t.Fatalf("first suspend: exit %d", code)
	}
	want, err := os.ReadFile(refPath)
	if err != nil {
		t.Fatal(err)
	}
	rt := d.Connect(t, "")
	ctx := d.Context(t)
	refused := func(what string) {
		t.Helper()
		out := filepath.Join(env.dir, what+".json")
		stdout, code := runCLI(t, d, "--output", "json", "suspend", "--container", second, "--config", env.cfg, "--key", env.key, "--run", "twice-1", "--out", out)
		if code != 8 || !strings.Contains(stdout, `"claim-conflict"`) || !strings.Contains(stdout, "taken") {
			t.Fatalf("%s: exit %d, %s; want 8 claim-conflict naming the run id taken", what, code, stdout)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: a ref file was written", what)
		}
		c, err := rt.Container(ctx, second)
		if err != nil || c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelSuspending] != "" || c.Labels[snapshot.LabelRun] != "" {
			t.Fatalf("%s: the second container: task %q labels %v (err %v)", what, c.Task, c.Labels, err)
		}
	}
	refused("recorded")
	l := daemonLedger(t, d, "")
	rec, err := l.Get(ctx, "twice-1")
	l.Close()
	if err != nil || rec.Ref != digest.FromBytes(want) || rec.SuspendedBy == nil || rec.SuspendedBy.ID != first {
		t.Fatalf("record %+v (err %v): the refused suspend changed it", rec, err)
	}
	if _, code := runCLI(t, d, "discard", "--run", "twice-1"); code != 0 {
		t.Fatalf("discard: exit %d", code)
	}
	refused("discarded")
}
