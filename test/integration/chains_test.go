package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// chainRun is a run suspended through the CLI from a container this test
// made: its id, the ref file, the declaration and the signing key pair.
type chainRun struct {
	d                  *harness.Daemon
	run, src           string
	ref, cfg, pub, key string
}

// taskContainer creates container d.ID(id) from image name with the
// container options copts (a runtime and its options) and the spec options
// sopts applied after the image config and `/bin/sh -c script`, starts it
// and waits until it printed READY.
func taskContainer(t *testing.T, d *harness.Daemon, name, id, script string, copts []client.NewContainerOpts, sopts ...oci.SpecOpts) string {
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
	opts := append([]client.NewContainerOpts{client.WithImage(img), client.WithSnapshotter("overlayfs"), client.WithNewSnapshot(cid, img)}, copts...)
	opts = append(opts, client.WithNewSpec(append([]oci.SpecOpts{oci.WithImageConfig(img), oci.WithProcessArgs("/bin/sh", "-c", script)}, sopts...)...))
	c, err := d.Client.NewContainer(ctx, cid, opts...)
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
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "READY"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("container %s did not print READY: %q", cid, out.String())
		}
	}
	return cid
}

// suspendChain suspends container cid as run with the declaration config
// through the CLI (the task is stopped) and returns the run.
func suspendChain(t *testing.T, d *harness.Daemon, cid, run, config string) *chainRun {
	t.Helper()
	dir := t.TempDir()
	r := &chainRun{d: d, run: run, src: cid, cfg: filepath.Join(dir, "devcontainer.json"), ref: filepath.Join(dir, run+".ref.json")}
	if err := os.WriteFile(r.cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.pub, r.key, err = envelope.WriteKeyPair(filepath.Join(dir, "signer"), false); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, d, "", nil, "suspend", "--container", cid, "--config", r.cfg, "--key", r.key, "--run", run, "--out", r.ref)
	return r
}

// resumeChain runs `resume` with --output json in the daemon's namespace
// and returns the exit code and the verdict.
func resumeChain(t *testing.T, r *chainRun, extra ...string) (int, *resume.Verdict) {
	t.Helper()
	code, stdout, stderr := srcli(t, r.d, "", append([]string{"resume", "--ref", r.ref, "--config", r.cfg, "--trust", r.pub}, extra...)...)
	var v resume.Verdict
	if err := json.Unmarshal(stdout, &v); err != nil {
		t.Fatalf("resume exit %d: stdout is not a verdict: %v\n%s\nstderr: %s", code, err, stdout, stderr)
	}
	if code != v.ExitCode {
		t.Errorf("resume exit %d, verdict says %d", code, v.ExitCode)
	}
	return code, &v
}

// recordedSpec returns the recorded runtime spec blob of ref file path.
func recordedSpec(t *testing.T, d *harness.Daemon, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := snapshot.OpenRefUnsafe(b)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := content.ReadBlob(d.Context(t), d.Client.ContentStore(), ocispec.Descriptor{Digest: ref.Spec.Digest, Size: ref.Spec.Size})
	if err != nil {
		t.Fatalf("recorded spec %s: %v", ref.Spec.Digest, err)
	}
	return spec
}

// execIn executes script with /bin/sh -c inside the running task of
// container id, as the user of its spec, and returns its output.
func execIn(t *testing.T, d *harness.Daemon, id, script string) string {
	t.Helper()
	ctx := d.Context(t)
	c, err := d.Client.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		t.Fatalf("task of %s: %v", id, err)
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps := *spec.Process
	ps.Args, ps.Terminal, ps.Cwd = []string{"/bin/sh", "-c", script}, false, "/"
	out := &syncBuffer{}
	p, err := task.Exec(ctx, "probe", &ps, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(filepath.Join(d.Dir, "fifo"))))
	if err != nil {
		t.Fatalf("exec in %s: %v", id, err)
	}
	defer p.Delete(context.WithoutCancel(ctx))
	exitCh, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatalf("start exec in %s: %v", id, err)
	}
	select {
	case <-exitCh:
	case <-time.After(30 * time.Second):
		t.Fatalf("exec in %s did not exit; output %q", id, out.String())
	}
	for i := 0; i < 50 && !strings.Contains(out.String(), "END"); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	return out.String()
}

// probeScript prints what the test compares about pid 1 of a container:
// its command line (NUL-separated), its working directory, its uid line
// and its environment.
const probeScript = `cat /proc/1/cmdline; echo; echo "cwd $(cd /proc/1/cwd && pwd -P)"; grep Uid /proc/1/status; cat /proc/1/environ; echo; echo END`

// taskRunning reports whether container id has a running task.
func taskRunning(t *testing.T, d *harness.Daemon, id string) bool {
	t.Helper()
	ctx := d.Context(t)
	c, err := d.Client.LoadContainer(ctx, id)
	if err != nil {
		return false
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return false
	}
	st, err := task.Status(ctx)
	return err == nil && st.Status == client.Running
}

// TestResumedTaskRunsRecordedProcess: a container running `sh -c '…; exec
// sleep 86400'` as uid 1000 in /tmp with its own environment is suspended
// and resumed with --start: pid 1 of the incarnation has the same command
// line, working directory, uid and environment, and still runs a second
// later (the image's default /bin/sh would have exited at once).
func TestResumedTaskRunsRecordedProcess(t *testing.T) {
	d := harness.Start(t, "chproc")
	im := harness.ImportBusybox(t, d, "busybox:1")
	cid := taskContainer(t, d, im.Name, "proc-src", `echo READY; exec sleep 86400`, nil,
		oci.WithProcessCwd("/tmp"), oci.WithUIDGID(1000, 1000), oci.WithEnv([]string{"SR_PROBE=from-the-recorded-spec"}))
	before := execIn(t, d, cid, probeScript)
	for _, want := range []string{"sleep\x0086400\x00", "cwd /tmp\n", "Uid:\t1000\t1000", "SR_PROBE=from-the-recorded-spec"} {
		if !strings.Contains(before, want) {
			t.Fatalf("source container probe %q lacks %q", before, want)
		}
	}
	r := suspendChain(t, d, cid, "proc-1", `{"image": "busybox:1"}`)

	code, v := resumeChain(t, r, "--start")
	if code != 0 || v.Pid == 0 {
		t.Fatalf("resume --start: exit %d pid %d: %s", code, v.Pid, failDetail(v))
	}
	id := resume.DefaultContainerID(r.run, 1)
	if v.Container != id {
		t.Fatalf("container %q, want %q", v.Container, id)
	}
	time.Sleep(time.Second)
	if !taskRunning(t, d, id) {
		t.Fatalf("the incarnation's task does not run a second after it started")
	}
	after := execIn(t, d, id, probeScript)
	if after != before {
		t.Errorf("pid 1 of the incarnation differs from the suspended container's:\n got %q\nwant %q", after, before)
	}
	// The container holds the recorded spec, edited for it.
	ctx := d.Context(t)
	c, err := d.Client.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Process.Cwd != "/tmp" || s.Process.User.UID != 1000 || s.Root.Path != "rootfs" || s.Linux.CgroupsPath != "/"+d.Namespace+"/"+id {
		t.Errorf("incarnation spec: cwd %q uid %d root %q cgroupsPath %q", s.Process.Cwd, s.Process.User.UID, s.Root.Path, s.Linux.CgroupsPath)
	}
}

// TestRuntimeOptionsCarryOver: a container created under runc options
// comes back under the same options — NoNewKeyring set, and the empty
// options message of a plain runc container (recorded as "value": "",
// which the previous writer wrote as null and check 3 refused).
func TestRuntimeOptionsCarryOver(t *testing.T) {
	d := harness.Start(t, "chrt")
	im := harness.ImportBusybox(t, d, "busybox:1")
	for _, tc := range []struct {
		name string
		opts *runcoptions.Options
		want string // the ref's runtime member
	}{
		{"plain", &runcoptions.Options{}, `"options":{"typeUrl":"containerd.runc.v1.Options","value":""}`},
		{"nonewkeyring", &runcoptions.Options{NoNewKeyring: true}, `"options":{"typeUrl":"containerd.runc.v1.Options","value":"EAE="}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cid := taskContainer(t, d, im.Name, "rt-"+tc.name, `echo READY; exec sleep 86400`,
				[]client.NewContainerOpts{client.WithRuntime("io.containerd.runc.v2", tc.opts)})
			ctx := d.Context(t)
			src, err := d.Client.ContainerService().Get(ctx, cid)
			if err != nil {
				t.Fatal(err)
			}
			r := suspendChain(t, d, cid, "rt-"+tc.name, `{"image": "busybox:1"}`)
			refFile, err := os.ReadFile(r.ref)
			if err != nil {
				t.Fatal(err)
			}
			compact := strings.Join(strings.Fields(string(refFile)), "")
			if !strings.Contains(compact, strings.ReplaceAll(tc.want, " ", "")) {
				t.Errorf("ref file lacks %s:\n%s", tc.want, refFile)
			}
			code, v := resumeChain(t, r, "--start")
			if code != 0 {
				t.Fatalf("resume --start: exit %d: %s", code, failDetail(v))
			}
			got, err := d.Client.ContainerService().Get(ctx, v.Container)
			if err != nil {
				t.Fatal(err)
			}
			so, go_ := src.Runtime.Options, got.Runtime.Options
			if got.Runtime.Name != src.Runtime.Name || so == nil || go_ == nil || so.GetTypeUrl() != go_.GetTypeUrl() || !bytes.Equal(so.GetValue(), go_.GetValue()) {
				t.Errorf("incarnation runtime %s %v, want the suspended container's %s %v", got.Runtime.Name, go_, src.Runtime.Name, so)
			}
			time.Sleep(500 * time.Millisecond)
			if !taskRunning(t, d, v.Container) {
				t.Errorf("the incarnation's task does not run under its options")
			}
		})
	}
}

// TestResumeWithOfferedSpec: an offered spec whose bind mount source
// differs is accepted (the difference listed as allowed) and the
// incarnation binds the new source; one that adds CAP_SYS_ADMIN is 3 and
// creates nothing.
func TestResumeWithOfferedSpec(t *testing.T) {
	d := harness.Start(t, "chspec")
	im := harness.ImportBusybox(t, d, "busybox:1")
	hostA, hostB := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(hostA, "a.txt"), []byte("A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostB, "b.txt"), []byte("B\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cid := taskContainer(t, d, im.Name, "spec-src", `echo READY; exec sleep 86400`, nil,
		oci.WithMounts([]specs.Mount{{Destination: "/work", Type: "bind", Source: hostA, Options: []string{"rbind", "rw"}}}))
	r := suspendChain(t, d, cid, "spec-1", `{"image": "busybox:1"}`)
	recorded := recordedSpec(t, d, r.ref)

	edit := func(name string, f func(s map[string]any)) string {
		dec := json.NewDecoder(bytes.NewReader(recorded))
		dec.UseNumber()
		var s map[string]any
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		f(s)
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	moved := edit("moved.json", func(s map[string]any) {
		for _, m := range s["mounts"].([]any) {
			if mm := m.(map[string]any); mm["destination"] == "/work" {
				mm["source"] = hostB
			}
		}
	})
	widened := edit("widened.json", func(s map[string]any) {
		caps := s["process"].(map[string]any)["capabilities"].(map[string]any)
		caps["bounding"] = append(caps["bounding"].([]any), "CAP_SYS_ADMIN")
	})

	code, v := resumeChain(t, r, "--spec", widened, "--start")
	if code != 3 || v.Class != resume.ClassSpecDrift || v.Check(resume.CheckSpec).Result != resume.ResultFail {
		t.Fatalf("widened spec: exit %d class %s: %s", code, v.Class, failDetail(v))
	}
	if len(v.SpecDrift) != 1 || !strings.HasPrefix(v.SpecDrift[0].Pointer, "/process/capabilities/bounding/") || string(v.SpecDrift[0].Offered) != `"CAP_SYS_ADMIN"` {
		t.Errorf("specDrift %s, want the added CAP_SYS_ADMIN", mustJSON(t, v.SpecDrift))
	}
	if containers(t, d)[resume.DefaultContainerID(r.run, 1)] {
		t.Fatal("a widened spec created a container")
	}

	code, v = resumeChain(t, r, "--spec", moved, "--start")
	if code != 0 {
		t.Fatalf("moved bind source: exit %d: %s", code, failDetail(v))
	}
	if len(v.SpecDrift) != 1 || !v.SpecDrift[0].Allowed || string(v.SpecDrift[0].Offered) != `"`+hostB+`"` {
		t.Errorf("specDrift %s, want the bind source listed as allowed", mustJSON(t, v.SpecDrift))
	}
	if out := execIn(t, d, v.Container, `ls /work; echo END`); !strings.Contains(out, "b.txt") || strings.Contains(out, "a.txt") {
		t.Errorf("/work in the incarnation: %q, want the offered source's b.txt", out)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestImportAnotherNamespaceResumesByName: an unpinned run exported with
// its base and imported into another namespace of the same daemon (one
// host, one ledger) resumes by name: the import created the base's name
// there, pointing at the recorded index. In a namespace where the name
// already points at another image, the import leaves it (and says so) and
// resume's image check refuses it (5).
func TestImportAnotherNamespaceResumesByName(t *testing.T) {
	d := harness.Start(t, "chns")
	im := harness.ImportBusybox(t, d, "busybox:1")
	cid := taskContainer(t, d, im.Name, "ns-src", `echo READY; exec sleep 86400`, nil)
	r := suspendChain(t, d, cid, "ns-1", `{"image": "busybox:1"}`)
	archive := filepath.Join(t.TempDir(), "run.tar")
	mustCLI(t, d, "", nil, "export", "--ref", r.ref, "--out", archive, "--with-base")
	hostLedger := "SANDBOX_RESUME_LEDGER=" + ledgerPath(d.Address, d.Namespace)

	nsB := d.NewNamespace()
	refB := filepath.Join(t.TempDir(), "ref.json")
	var res struct {
		BaseName struct {
			Name, Target, Note string
			Created            bool
		} `json:"baseName"`
	}
	mustCLI(t, d, nsB, &res, "import", archive, "--trust", r.pub, "--out", refB)
	if !res.BaseName.Created || res.BaseName.Name != im.Name || res.BaseName.Target != im.Index.String() {
		t.Fatalf("import into %s: baseName %+v, want %s created pointing at %s", nsB, res.BaseName, im.Name, im.Index)
	}
	code, stdout, stderr := srcliEnv(t, d, nsB, []string{hostLedger}, "resume", "--ref", refB, "--config", r.cfg, "--trust", r.pub, "--start")
	var v resume.Verdict
	if err := json.Unmarshal(stdout, &v); err != nil {
		t.Fatalf("resume in %s: exit %d: %v\n%s", nsB, code, err, stderr)
	}
	if code != 0 || v.Check(resume.CheckHost).Result != resume.ResultPass || v.Pid == 0 {
		t.Fatalf("resume in %s: exit %d: %s", nsB, code, failDetail(&v))
	}
	if d := v.Check(resume.CheckImage).Detail; !strings.Contains(d, "resolves to index "+im.Index.String()) {
		t.Errorf("image check detail %q: want the name resolved to the recorded index", d)
	}

	// Another namespace whose busybox:1 is another image: not re-pointed.
	nsC := d.NewNamespace()
	other := harness.Busybox(t, "other busybox")
	d.Put(t, nsC, other)
	d.Tag(t, nsC, im.Name, other.Index)
	refC := filepath.Join(t.TempDir(), "ref.json")
	mustCLI(t, d, nsC, &res, "import", archive, "--trust", r.pub, "--out", refC)
	if res.BaseName.Created || !strings.Contains(res.BaseName.Note, "not re-pointed") {
		t.Fatalf("import into %s: baseName %+v, want the existing name left", nsC, res.BaseName)
	}
	code, stdout, _ = srcli(t, d, nsC, "--output", "text", "import", archive, "--trust", r.pub)
	if code != 0 || !strings.Contains(string(stdout), "base name "+im.Name+": exists, pointing at "+other.Index.Digest.String()) {
		t.Errorf("import text output (exit %d):\n%s", code, stdout)
	}
	code, stdout, _ = srcli(t, d, nsC, "resume", "--ref", refC, "--config", r.cfg, "--trust", r.pub, "--check")
	v = resume.Verdict{}
	if err := json.Unmarshal(stdout, &v); err != nil || code != 5 || v.Class != resume.ClassImageDrifted {
		t.Errorf("resume --check in %s: exit %d class %s (%v), want 5 image-drifted", nsC, code, v.Class, err)
	}
}

// TestMovedRunRunsRecordedProcess: a run suspended on daemon A travels with
// its layer and spec blob to daemon B in an archive and to daemon C through
// a registry (separate ledgers, a pinned declaration); on each, resume
// --start runs the recorded process, env and cwd, under the recorded
// runtime options, and the base name was created on the target.
func TestMovedRunRunsRecordedProcess(t *testing.T) {
	a, b, c := harness.Start(t, "chmva"), harness.Start(t, "chmvb"), harness.Start(t, "chmvc")
	reg := harness.StartRegistry(t)
	bb := harness.ImportBusybox(t, a, "busybox:1")
	cid := taskContainer(t, a, bb.Name, "mv-src", `echo READY; exec sleep 86400`,
		[]client.NewContainerOpts{client.WithRuntime("io.containerd.runc.v2", &runcoptions.Options{NoNewKeyring: true})},
		oci.WithProcessCwd("/var"), oci.WithEnv([]string{"SR_PROBE=moved"}))
	before := execIn(t, a, cid, probeScript)
	r := suspendChain(t, a, cid, "mv-1", `{"image": "busybox@`+bb.Index.String()+`"}`)

	archive := filepath.Join(t.TempDir(), "run.tar")
	mustCLI(t, a, "", nil, "export", "--ref", r.ref, "--out", archive, "--with-base")
	target := reg.Host + "/runs/mv:" + r.run
	mustCLI(t, a, "", nil, "push", "--plain-http", "--ref", r.ref, target)

	for _, hop := range []struct {
		d    *harness.Daemon
		args []string
	}{
		{b, []string{"import", archive, "--trust", r.pub}},
		{c, []string{"pull", "--plain-http", "--trust", r.pub, target}},
	} {
		t.Run(hop.d.Name, func(t *testing.T) {
			ref := filepath.Join(t.TempDir(), "ref.json")
			var res struct {
				BaseName struct {
					Created bool   `json:"created"`
					Target  string `json:"target"`
				} `json:"baseName"`
			}
			mustCLI(t, hop.d, "", &res, append(hop.args, "--out", ref)...)
			if !res.BaseName.Created || res.BaseName.Target != bb.Index.String() {
				t.Errorf("%s: baseName %+v, want created pointing at the index %s", hop.args[0], res.BaseName, bb.Index)
			}
			moved := *r
			moved.d, moved.ref = hop.d, ref
			// Another daemon's ledger never recorded the generation: a copy.
			code, v := resumeChain(t, &moved, "--copy", "--start")
			if code != 0 {
				t.Fatalf("resume on %s: exit %d: %s", hop.d.Name, code, failDetail(v))
			}
			time.Sleep(time.Second)
			if !taskRunning(t, hop.d, v.Container) {
				t.Fatalf("the task on %s does not run a second after it started", hop.d.Name)
			}
			if after := execIn(t, hop.d, v.Container, probeScript); after != before {
				t.Errorf("pid 1 on %s differs from the suspended container's:\n got %q\nwant %q", hop.d.Name, after, before)
			}
			got, err := hop.d.Client.ContainerService().Get(hop.d.Context(t), v.Container)
			if err != nil {
				t.Fatal(err)
			}
			if o := got.Runtime.Options; o == nil || o.GetTypeUrl() != "containerd.runc.v1.Options" || !bytes.Equal(o.GetValue(), []byte{0x10, 0x01}) {
				t.Errorf("runtime options on %s: %v, want NoNewKeyring", hop.d.Name, o)
			}
		})
	}
}
