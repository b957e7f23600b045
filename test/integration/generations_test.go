package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host/hosttest"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// The integration tests of later generations (docs/design.md "Suspend",
// "SnapshotRef": layers, flattening, retention): a run goes through
// generations on a real daemon, each incarnation made by `resume` and
// suspended again by `suspend`, and what every incarnation sees is
// compared with what the test did to the file system.

// idle is what the runtime's containers of these tests run: they write
// nothing themselves (the tests write through exec), so the file system
// is exactly what the test made of it whatever process a resume starts.
const idle = `echo READY && exec sleep 3600`

// node is one entry of the tree a test expects: kind 'd' (directory),
// 'f' (regular file, with the sha256 of its content, hex) or 'l'
// (symbolic link), and its permission bits.
type node struct {
	kind byte
	mode uint32
	sum  string
}

// tree is the expected state of /w and /etc: absolute path → node.
type tree map[string]node

// walkScript prints every entry under /w and /etc: "<kind> <mode> <path>
// [<sha256 of the content>]", then END (busybox sh, stat and sha256sum).
const walkScript = `walk() {
  for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    if [ -h "$f" ]; then echo "l $(stat -c %a "$f") $f"
    elif [ -d "$f" ]; then echo "d $(stat -c %a "$f") $f"; walk "$f"
    elif [ -e "$f" ]; then set -- "$1" $(sha256sum "$f"); echo "f $(stat -c %a "$f") $f $2"
    fi
  done
}
if [ -d /w ]; then echo "d $(stat -c %a /w) /w"; walk /w; fi; walk /etc; echo END`

// walkTree lists /w and /etc inside the running task of container id, as
// lines sorted by path.
func walkTree(t testing.TB, d *harness.Daemon, id string) []string {
	t.Helper()
	out := shIn(t, d, id, walkScript)
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if l != "END" && l != "" {
			lines = append(lines, l)
		}
	}
	sort.Slice(lines, func(i, j int) bool { return strings.Fields(lines[i])[2] < strings.Fields(lines[j])[2] })
	return lines
}

// lines renders the tree as walkTree prints it.
func (tr tree) lines() []string {
	var out []string
	for p, n := range tr {
		l := fmt.Sprintf("%c %o %s", n.kind, n.mode, p)
		if n.kind == 'f' {
			l += " " + n.sum
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Fields(out[i])[2] < strings.Fields(out[j])[2] })
	return out
}

// readTree reads what container id sees into a tree: the start of a
// test's expectations.
func readTree(t testing.TB, d *harness.Daemon, id string) tree {
	t.Helper()
	tr := tree{}
	for _, l := range walkTree(t, d, id) {
		f := strings.Fields(l)
		var mode uint32
		if _, err := fmt.Sscanf(f[1], "%o", &mode); err != nil {
			t.Fatalf("walk line %q: %v", l, err)
		}
		n := node{kind: f[0][0], mode: mode}
		if n.kind == 'f' && len(f) > 3 {
			n.sum = f[3]
		}
		tr[f[2]] = n
	}
	return tr
}

// sum is the hex sha256 of data.
func sum(data string) string {
	s := sha256.Sum256([]byte(data))
	return hex.EncodeToString(s[:])
}

// fsOp is one change a test makes to a container's file system: the shell
// that makes it, and the same change to the expected tree.
type fsOp struct {
	sh    string
	apply func(tree)
}

func mkdirOp(p string, mode uint32) fsOp {
	return fsOp{fmt.Sprintf("mkdir -p %s && chmod %o %s", p, mode, p), func(tr tree) { tr[p] = node{kind: 'd', mode: mode} }}
}

func writeOp(p, data string, mode uint32) fsOp {
	return fsOp{fmt.Sprintf("printf '%%s' '%s' > %s && chmod %o %s", data, p, mode, p), func(tr tree) { tr[p] = node{kind: 'f', mode: mode, sum: sum(data)} }}
}

func removeOp(p string) fsOp {
	return fsOp{"rm -rf " + p, func(tr tree) {
		for q := range tr {
			if q == p || strings.HasPrefix(q, p+"/") {
				delete(tr, q)
			}
		}
	}}
}

func chmodOp(p string, mode uint32) fsOp {
	return fsOp{fmt.Sprintf("chmod %o %s", mode, p), func(tr tree) {
		n := tr[p]
		n.mode = mode
		tr[p] = n
	}}
}

func symlinkOp(target, p string) fsOp {
	return fsOp{fmt.Sprintf("ln -s %s %s", target, p), func(tr tree) { tr[p] = node{kind: 'l', mode: 0o777} }}
}

// work runs ops in container id and applies them to want, then checks
// that the container sees want.
func work(t testing.TB, d *harness.Daemon, id string, want tree, ops ...fsOp) {
	t.Helper()
	var sh []string
	for _, op := range ops {
		sh = append(sh, op.sh)
		op.apply(want)
	}
	shIn(t, d, id, "set -e; "+strings.Join(sh, "; ")+"; echo END")
	sameTree(t, "after the work in "+id, walkTree(t, d, id), want)
}

// sameTree compares what a container sees with the expected tree
// (contents by digest).
func sameTree(t testing.TB, what string, got []string, want tree) {
	t.Helper()
	if w := want.lines(); !slices.Equal(got, w) {
		var missing, extra []string
		for _, l := range w {
			if !slices.Contains(got, l) {
				missing = append(missing, l)
			}
		}
		for _, l := range got {
			if !slices.Contains(w, l) {
				extra = append(extra, l)
			}
		}
		t.Fatalf("%s: the tree differs\n  expected, not found: %q\n  found, not expected: %q", what, missing, extra)
	}
}

// startWaiting starts container id's task with its own process (from its
// spec) and a standard input kept open until the test ends, so that a
// shell reading it waits and exec has a task to run in.
func startWaiting(t testing.TB, d *harness.Daemon, id string) {
	t.Helper()
	ctx := d.Context(t)
	c, err := d.Client.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(pr, io.Discard, io.Discard), cio.WithFIFODir(filepath.Join(d.Dir, "fifo"))))
	if err != nil {
		t.Fatalf("new task %s: %v", id, err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
}

// shIn runs script under /bin/sh -c in the running task of container id
// (as `ctr task exec` does) and returns its output; a script that does not
// exit 0 within 30 s fails the test.
func shIn(t testing.TB, d *harness.Daemon, id, script string) string {
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
	ps.Args, ps.Terminal = []string{"/bin/sh", "-c", script}, false
	out := &syncBuffer{}
	execID := fmt.Sprintf("x%d", time.Now().UnixNano())
	p, err := task.Exec(ctx, execID, &ps, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(filepath.Join(d.Dir, "fifo"))))
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
	var st uint32
	select {
	case s := <-exitCh:
		st = s.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatalf("exec in %s did not exit; output %q", id, out.String())
	}
	// The copy of stdout may finish a little after the exit.
	for i := 0; i < 50 && !strings.Contains(out.String(), "END"); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if st != 0 {
		t.Fatalf("exec in %s: exit %d: %s", id, st, out.String())
	}
	return out.String()
}

// genRig is a daemon with the busybox image, a declaration of it and a
// signer, for runs going through generations.
type genRig struct {
	d   *harness.Daemon
	im  harness.BusyboxImage
	env suspendEnv
}

func newGenRig(t *testing.T, name string) *genRig {
	d := harness.Start(t, name)
	return &genRig{d: d, im: harness.ImportBusybox(t, d, "busybox:1"), env: newSuspendEnv(t, "busybox:1")}
}

// suspendOut is what `suspend --output json` prints.
type suspendOut struct {
	Run         string `json:"run"`
	Generation  uint64 `json:"generation"`
	Ref         string `json:"ref"`
	Out         string `json:"out"`
	KeptRunning bool   `json:"keptRunning"`
	Fence       uint64 `json:"fence"`
}

// suspend runs `suspend` of container cid (run, when not "") with extra
// flags, writing out; it fails the test unless the exit code is 0, and
// returns what it printed and the verified ref.
func (r *genRig) suspend(t testing.TB, cid, run, out string, extra ...string) (suspendOut, *snapshot.Ref) {
	t.Helper()
	args := []string{"--output", "json", "suspend", "--container", cid, "--config", r.env.cfg, "--key", r.env.key, "--out", out}
	if run != "" {
		args = append(args, "--run", run)
	}
	stdout, code := runCLI(t, r.d, append(args, extra...)...)
	if code != 0 {
		t.Fatalf("suspend %s: exit %d: %s", cid, code, stdout)
	}
	var o suspendOut
	if err := json.Unmarshal([]byte(stdout), &o); err != nil {
		t.Fatalf("suspend printed %s: %v", stdout, err)
	}
	file, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := snapshot.OpenRef(file, r.env.trust)
	if err != nil {
		t.Fatal(err)
	}
	if o.Ref != digest.FromBytes(file).String() || o.Generation != ref.Generation {
		t.Fatalf("suspend printed %+v for a ref of generation %d", o, ref.Generation)
	}
	return o, ref
}

// resume runs `resume` of the ref file into container id with extra
// flags; it fails the test unless the resume is accepted.
func (r *genRig) resume(t testing.TB, refPath, id string, extra ...string) *resume.Verdict {
	t.Helper()
	args := append([]string{"--output", "json", "resume", "--ref", refPath, "--config", r.env.cfg, "--trust", r.env.pub, "--container", id}, extra...)
	stdout, code := runCLI(t, r.d, args...)
	var v resume.Verdict
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("resume: exit %d, not a verdict: %v\n%s", code, err, stdout)
	}
	if code != 0 || !v.Accepted {
		t.Fatalf("resume %s into %s: exit %d: %s", refPath, id, code, failDetail(&v))
	}
	return &v
}

// record returns the ledger's record of run.
func (r *genRig) record(t testing.TB, run string) ledger.Record {
	t.Helper()
	l := daemonLedger(t, r.d, "")
	defer l.Close()
	rec, err := l.Get(r.d.Context(t), run)
	if err != nil {
		t.Fatalf("ledger record of %s: %v", run, err)
	}
	return rec
}

// gone reports whether container id no longer exists.
func (r *genRig) gone(t testing.TB, id string) bool {
	t.Helper()
	_, err := r.d.Client.LoadContainer(r.d.Context(t), id)
	if err != nil && !errdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	return err != nil
}

// genWork is what the test does to the file system before suspending
// generation g (1 to 5): files added, changed, deleted and re-created,
// directories deleted and re-created (their old content must not come
// back), modes changed, a file of the image deleted, re-created, changed
// and deleted again, a symbolic link.
func genWork(g int) []fsOp {
	switch g {
	case 1:
		return []fsOp{mkdirOp("/w", 0o755), writeOp("/w/common", "c1", 0o644), mkdirOp("/w/g1", 0o755), writeOp("/w/g1/a", "a1", 0o640),
			writeOp("/w/keep", "k", 0o600), mkdirOp("/w/dir1", 0o750), mkdirOp("/w/dir1/sub", 0o700), writeOp("/w/dir1/sub/x", "x1", 0o644)}
	case 2:
		return []fsOp{mkdirOp("/w/g2", 0o755), writeOp("/w/g2/a", "a2", 0o644), writeOp("/w/common", "c2", 0o644), removeOp("/w/g1/a"),
			removeOp("/" + snapshotMarker), chmodOp("/w/keep", 0o644)}
	case 3:
		return []fsOp{mkdirOp("/w/g3", 0o755), writeOp("/w/g3/a", "a3", 0o644), writeOp("/w/common", "c3", 0o644), removeOp("/w/g2"),
			writeOp("/w/g1/a", "a1 re-created", 0o600), writeOp("/"+snapshotMarker, "back", 0o600), removeOp("/w/dir1")}
	case 4:
		return []fsOp{mkdirOp("/w/g4", 0o755), writeOp("/w/g4/a", "a4", 0o644), writeOp("/w/common", "c4", 0o664), removeOp("/w/g3/a"),
			mkdirOp("/w/dir1", 0o755), writeOp("/w/dir1/y", "y4", 0o644), mkdirOp("/w/g2", 0o711), writeOp("/w/g2/b", "b4", 0o644),
			chmodOp("/"+snapshotMarker, 0o644)}
	case 5:
		return []fsOp{mkdirOp("/w/g5", 0o755), writeOp("/w/g5/a", "a5", 0o644), writeOp("/w/common", "c5", 0o644), removeOp("/" + snapshotMarker),
			removeOp("/w/g1"), writeOp("/w/keep", "k5", 0o644), symlinkOp("common", "/w/link")}
	}
	return nil
}

// snapshotMarker is the image file (testimage.MarkerPath) the tests delete
// and re-create.
const snapshotMarker = "etc/sandbox-resume-marker"

// TestGenerationsFiveResumes: resume → work → suspend → resume through
// five generations, with files added, changed, deleted and re-created in
// every one: each incarnation's tree (paths, kinds, modes, contents,
// deletions across generations) is exactly the expected one. Each
// generation's ref chains to its parent with the fence of the incarnation
// that wrote it and lists its parent's layers plus one; each stopped
// incarnation is deleted with its snapshot.
func TestGenerationsFiveResumes(t *testing.T) {
	r := newGenRig(t, "gens")
	d := r.d
	const run = "five-1"
	holder := scriptContainer(t, d, r.im.Name, "g1", idle)
	want := readTree(t, d, holder)
	work(t, d, holder, want, genWork(1)...)
	var prev *snapshot.Ref
	var prevRef string
	for g := 1; g <= 5; g++ {
		out := filepath.Join(r.env.dir, fmt.Sprintf("five.g%d.json", g))
		runFlag := ""
		if g == 1 {
			runFlag = run
		}
		o, ref := r.suspend(t, holder, runFlag, out)
		if o.Generation != uint64(g) || o.Run != run || len(ref.Layers) != g || o.KeptRunning {
			t.Fatalf("generation %d: printed %+v, %d layers", g, o, len(ref.Layers))
		}
		if g > 1 {
			if ref.Parent.String() != prevRef || ref.Fence == 0 || !slices.Equal(ref.Layers[:g-1], prev.Layers) || ref.Manifest != prev.Manifest ||
				ref.Base.ManifestDigest != prev.Base.ManifestDigest {
				t.Fatalf("generation %d: parent %s (want %s) fence %d layers %v (parent's %v)", g, ref.Parent, prevRef, ref.Fence, ref.Layers, prev.Layers)
			}
			if !r.gone(t, holder) {
				t.Fatalf("generation %d: incarnation %s was not deleted", g, holder)
			}
			if _, err := d.Client.SnapshotService("overlayfs").Stat(d.Context(t), holder); !errdefs.IsNotFound(err) {
				t.Fatalf("generation %d: the snapshot of %s: %v, want not found", g, holder, err)
			}
		}
		if rec := r.record(t, run); rec.State != ledger.StateSuspended || rec.Generation != uint64(g) || rec.Ref.String() != o.Ref {
			t.Fatalf("generation %d: record %+v", g, rec)
		}
		inc := d.ID(fmt.Sprintf("g%d", g+1))
		v := r.resume(t, out, inc)
		if v.Generation != uint64(g) || v.Container != inc {
			t.Fatalf("resume of generation %d: verdict generation %d container %q", g, v.Generation, v.Container)
		}
		startWaiting(t, d, inc)
		sameTree(t, fmt.Sprintf("incarnation %s of generation %d", inc, g), walkTree(t, d, inc), want)
		if g < 5 {
			work(t, d, inc, want, genWork(g+1)...)
		}
		holder, prev, prevRef = inc, ref, o.Ref
	}
	if rec := r.record(t, run); rec.State != ledger.StateLive || rec.Generation != 5 || rec.Holder == nil || rec.Holder.ID != holder {
		t.Fatalf("after the last resume: record %+v", rec)
	}
}

// TestGenerationsKeepRunningTwice: a runtime container suspended with
// --keep-running is suspended again as generation 2; two --keep-running
// suspends in a row, a file created before the first and deleted before
// the second: the second generation's layers do not hold it and its
// resumed tree has no such file — for the runtime's container and for an
// incarnation (whose last layer holds everything since its resume).
func TestGenerationsKeepRunningTwice(t *testing.T) {
	r := newGenRig(t, "keeptwice")
	d := r.d
	const run = "keep-1"
	probe := captureProbe{d.Connect(t, "")}
	cid := scriptContainer(t, d, r.im.Name, "k1", idle)
	want := readTree(t, d, cid)
	work(t, d, cid, want, mkdirOp("/w", 0o755), writeOp("/w/base", "b", 0o644))

	// The runtime's container: a file created, generation 1 kept running,
	// the file deleted, generation 2 kept running, generation 3 stopped.
	work(t, d, cid, want, writeOp("/w/tmp", "created before the first", 0o644))
	o1, g1 := r.suspend(t, cid, run, filepath.Join(r.env.dir, "k.g1.json"), "--keep-running")
	if _, ok := hosttest.LayerEntries(t, probe, g1.Layers[0])["w/tmp"]; !ok {
		t.Fatalf("generation 1's layer lacks w/tmp")
	}
	work(t, d, cid, want, removeOp("/w/tmp"))
	o2, g2 := r.suspend(t, cid, "", filepath.Join(r.env.dir, "k.g2.json"), "--keep-running")
	if o1.Generation != 1 || o2.Generation != 2 || !o2.KeptRunning || o2.Fence != o1.Fence || g2.Parent.String() != o1.Ref || g2.Fence != o1.Fence || len(g2.Layers) != 1 {
		t.Fatalf("kept running twice: %+v then %+v (%d layers)", o1, o2, len(g2.Layers))
	}
	if _, ok := hosttest.LayerEntries(t, probe, g2.Layers[0])["w/tmp"]; ok {
		t.Fatalf("generation 2's layer holds w/tmp, deleted before it")
	}
	// Still running and holding the run: exec works; then a stopping
	// suspend leaves the runtime's container stopped and labelled.
	shIn(t, d, cid, "echo END")
	o3, _ := r.suspend(t, cid, "", filepath.Join(r.env.dir, "k.g3.json"))
	if o3.Generation != 3 || r.gone(t, cid) {
		t.Fatalf("stopping suspend: %+v; the runtime's container must stay", o3)
	}
	c, err := d.Connect(t, "").Container(d.Context(t), cid)
	if err != nil || c.Task != snapshot.TaskNone || c.Labels[snapshot.LabelSuspended] != "3" || c.Labels[snapshot.LabelSuspending] != "" {
		t.Fatalf("the runtime's container after the stopping suspend: task %q labels %v (err %v)", c.Task, c.Labels, err)
	}
	if _, code := runCLI(t, d, "suspend", "--container", cid, "--config", r.env.cfg, "--key", r.env.key, "--out", filepath.Join(r.env.dir, "k.again.json")); code != 8 {
		t.Fatalf("suspend of a suspended container: exit %d, want 8", code)
	}
	inc0 := d.ID("k-g3")
	r.resume(t, filepath.Join(r.env.dir, "k.g3.json"), inc0)
	startWaiting(t, d, inc0)
	sameTree(t, "incarnation of generation 3", walkTree(t, d, inc0), want)

	// The incarnation: a file created (and one of its generation deleted)
	// before its first kept-running suspend, the file deleted before the
	// second: the second's last layer holds everything since the resume
	// but that file.
	work(t, d, inc0, want, writeOp("/w/tmp2", "created before the first", 0o644), removeOp("/w/base"))
	_, g4 := r.suspend(t, inc0, "", filepath.Join(r.env.dir, "k.g4.json"), "--keep-running")
	work(t, d, inc0, want, removeOp("/w/tmp2"), writeOp("/w/after", "a", 0o600))
	_, g5 := r.suspend(t, inc0, "", filepath.Join(r.env.dir, "k.g5.json"), "--keep-running")
	if len(g4.Layers) != 2 || len(g5.Layers) != 2 || g5.Layers[0] != g4.Layers[0] || g4.Layers[1] == g5.Layers[1] {
		t.Fatalf("layers %v then %v", g4.Layers, g5.Layers)
	}
	if _, ok := hosttest.LayerEntries(t, probe, g4.Layers[1])["w/tmp2"]; !ok {
		t.Fatalf("generation 4's last layer lacks w/tmp2")
	}
	last := hosttest.LayerEntries(t, probe, g5.Layers[1])
	if _, ok := last["w/tmp2"]; ok {
		t.Fatalf("generation 5's last layer holds w/tmp2, deleted before it")
	}
	if _, ok := last["w/.wh.base"]; !ok {
		t.Fatalf("generation 5's last layer lacks the whiteout of w/base, deleted since the resume: %v", last)
	}
	// The run is live, held by the incarnation: generation 5 comes back
	// with --take-over (an operator's decision), which fences the
	// incarnation out (on this host it is deleted); its tree has no w/tmp2.
	other := d.ID("k-other")
	r.resume(t, filepath.Join(r.env.dir, "k.g5.json"), other, "--take-over", "--force") // turn 3: its task runs here (the holder-deletion guard)
	startWaiting(t, d, other)
	sameTree(t, "taken-over incarnation of generation 5", walkTree(t, d, other), want)
	if !r.gone(t, inc0) {
		t.Fatalf("the fenced-out incarnation %s is still there", inc0)
	}
}

// TestGenerationsFlatten: --flatten, and a generation past 16 layers, give
// one layer whose tree is the unflattened one; once a flattened generation
// and the two after it are the latest three, the layers before it are
// released from the run lease (--keep-generations 3).
func TestGenerationsFlatten(t *testing.T) {
	r := newGenRig(t, "flatten")
	d := r.d
	const run = "flat-1"
	rt := d.Connect(t, "")
	holder := scriptContainer(t, d, r.im.Name, "f1", idle)
	want := readTree(t, d, holder)
	work(t, d, holder, want, mkdirOp("/w", 0o755), writeOp("/w/f1", "1", 0o644), removeOp("/"+snapshotMarker))
	var refs []*snapshot.Ref
	last := snapshot.MaxLayers + 3
	for g := 1; g <= last; g++ {
		out := filepath.Join(r.env.dir, fmt.Sprintf("flat.g%d.json", g))
		runFlag := ""
		if g == 1 {
			runFlag = run
		}
		var extra []string
		if g == 3 {
			extra = append(extra, "--flatten")
		}
		_, ref := r.suspend(t, holder, runFlag, out, extra...)
		// Generation 3 is flattened (1 layer), so generation g ≥ 3 has g-2
		// layers: past 16 at g = 19, flattened again.
		wantLayers := g
		if g >= 3 {
			wantLayers = g - 2
		}
		if g == snapshot.MaxLayers+3 {
			wantLayers = 1
		}
		if len(ref.Layers) != wantLayers {
			t.Fatalf("generation %d: %d layers, want %d", g, len(ref.Layers), wantLayers)
		}
		refs = append(refs, ref)
		if g == 3 || g == last || g == 4 {
			// The flattened generations, and the one after the first,
			// resume to the expected tree.
			inc := d.ID(fmt.Sprintf("f%d-check", g))
			r.resume(t, out, inc)
			startWaiting(t, d, inc)
			sameTree(t, fmt.Sprintf("incarnation of generation %d (%d layers)", g, len(ref.Layers)), walkTree(t, d, inc), want)
			holder = inc
		} else {
			inc := d.ID(fmt.Sprintf("f%d", g+1))
			r.resume(t, out, inc)
			startWaiting(t, d, inc)
			holder = inc
		}
		if g < last {
			work(t, d, holder, want, writeOp(fmt.Sprintf("/w/f%d", g+1), fmt.Sprint(g+1), 0o644), removeOp(fmt.Sprintf("/w/f%d", g-1)))
		}
		if g == 5 {
			// Generations 3, 4 and 5 are the latest three: the layers of
			// 1 and 2, named by none of them, are no longer held.
			for _, old := range []*snapshot.Ref{refs[0], refs[1]} {
				for _, l := range old.Layers {
					if ok, err := rt.LeaseHolds(d.Context(t), snapshot.RunLease(run), l.Digest); err != nil || ok {
						t.Fatalf("generation %d's layer %s still held by the run lease (err %v)", old.Generation, l.Digest, err)
					}
				}
			}
			for _, keep := range refs[2:] {
				for _, l := range keep.Layers {
					if ok, err := rt.LeaseHolds(d.Context(t), snapshot.RunLease(run), l.Digest); err != nil || !ok {
						t.Fatalf("generation %d's layer %s released (err %v)", keep.Generation, l.Digest, err)
					}
				}
			}
		}
	}
	// Every ref and spec blob of the chain stays.
	cs := d.Client.ContentStore()
	for _, ref := range refs {
		if got := present(t, d.Context(t), cs, ref.Spec.Digest); !got[0] {
			t.Fatalf("generation %d's spec blob is gone", ref.Generation)
		}
		if ref.Parent != "" {
			if ok, err := rt.LeaseHolds(d.Context(t), snapshot.RunLease(run), ref.Parent); err != nil || !ok {
				t.Fatalf("generation %d's ref blob released (err %v)", ref.Generation-1, err)
			}
		}
	}
}

// TestSuspendDiffProgress: a snapshot.Progress in the context of
// CreateDiff and CreateFlatDiff gets the bytes of the layer the daemon
// writes; the CLI's suspend draws its "diff" progress on a terminal's
// stderr and writes nothing to a piped one.
func TestSuspendDiffProgress(t *testing.T) {
	r := newGenRig(t, "diffprog")
	d := r.d
	ctx := d.Context(t)
	rt := d.Connect(t, "")
	cid := scriptContainer(t, d, r.im.Name, "p1", idle)
	shIn(t, d, cid, "i=0; while [ $i -lt 64 ]; do head -c 65536 /dev/urandom > /f$i; i=$((i+1)); done; echo END")
	c, err := rt.Container(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	lease := snapshot.RunLease("diffprog-1")
	if err := rt.CreateLease(ctx, lease, nil); err != nil {
		t.Fatal(err)
	}
	for _, flat := range []bool{false, true} {
		p := &progressLog{}
		var l snapshot.Layer
		if flat {
			l, err = rt.CreateFlatDiff(ctx, lease, c, r.im.DiffIDs, p)
		} else {
			l, err = rt.CreateDiff(ctx, lease, c, p)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(p.bytes) != 1 || p.bytes[0] != l.Size || l.Size < 4<<20 {
			t.Fatalf("flat %t: progress %s, the layer has %d bytes", flat, p, l.Size)
		}
	}

	out := filepath.Join(r.env.dir, "p.json")
	args := []string{"--address", d.Address, "--namespace", d.Namespace, "suspend", "--container", cid,
		"--config", r.env.cfg, "--key", r.env.key, "--run", "prog-1", "--keep-running"}
	cmd := exec.Command(cli(t), append(args, "--out", out)...)
	cmd.Env = cliEnv(args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("suspend: %v: %s", err, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("suspend wrote %q to a non-terminal stderr", stderr.String())
	}
	master, slave := openPTY(t)
	cmd = exec.Command(cli(t), append(args, "--out", out+".2")...)
	cmd.Env = cliEnv(args)
	stdout.Reset()
	cmd.Stdout, cmd.Stderr = &stdout, slave
	var drawn bytes.Buffer
	copied := make(chan struct{})
	go func() {
		io.Copy(&drawn, master) // ends with EIO once the slave is closed
		close(copied)
	}()
	err = cmd.Run()
	slave.Close()
	<-copied
	if err != nil {
		t.Fatalf("suspend on a terminal: %v", err)
	}
	if !strings.Contains(drawn.String(), "diff") || strings.Contains(stdout.String(), "diff ") {
		t.Errorf("suspend drew %q on the terminal, printed %q", drawn.String(), stdout.String())
	}
	t.Logf("drawn on the terminal: %q", drawn.String())
}
