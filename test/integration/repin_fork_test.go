package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// The operators' commands against real daemons (issue 33, docs/design.md
// "Repin and fork"): repin, fork and inspect's view of the recorded spec.

// operatorRun is a run suspended unpinned on a daemon: its declaration (a
// tag-based adoptConfig with its lockfile), the signing key pair and the
// generation 1 ref file.
type operatorRun struct {
	cfg, pub, key, ref, dir string
}

// suspendUnpinned starts a container of busybox:1 on d running script,
// writes the run id into its /moved.txt, and suspends it as generation 1
// of run with an unpinned declaration.
func suspendUnpinned(t *testing.T, d *harness.Daemon, image, run, script string) operatorRun {
	t.Helper()
	dir := t.TempDir()
	pub, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
	if err != nil {
		t.Fatal(err)
	}
	o := operatorRun{cfg: writeAdopt(t, "busybox:1"), pub: pub, key: key, ref: filepath.Join(dir, run+".g1.json"), dir: dir}
	cid := scriptContainerWith(t, d, image, run, script, oci.WithEnv([]string{"LANG=C.UTF-8"})) // as declared (suspend checks it)
	shIn(t, d, cid, "echo "+run+" > /moved.txt")
	if _, code := runCLI(t, d, "suspend", "--container", cid, "--config", o.cfg, "--key", key, "--run", run, "--out", o.ref); code != 0 {
		t.Fatalf("suspend %s: exit %d", run, code)
	}
	return o
}

// TestRepinAcrossHosts: a run suspended unpinned on A is refused on B (4);
// a repin with the wrong digest is refused (3, naming /image) and changes
// nothing; repinned on A, generation 1 is superseded there (9), and
// generation 2 is handed off to B (export --with-base --handoff, import)
// and resumes there without --copy (and no longer on A: 9).
func TestRepinAcrossHosts(t *testing.T) {
	a := harness.Start(t, "rpa")
	b := harness.Start(t, "rpb")
	bb := harness.ImportBusybox(t, a, "busybox:1")
	const run = "repin-1"
	o := suspendUnpinned(t, a, bb.Name, run, workload)

	// export of the unpinned generation says it cannot move, and names repin.
	tar1 := filepath.Join(o.dir, "g1.tar")
	code, _, stderr := srcli(t, a, "", "export", "--ref", o.ref, "--out", tar1, "--with-base")
	if code != 0 || !strings.Contains(stderr, "cannot resume on another host") || !strings.Contains(stderr, "repin") {
		t.Errorf("export of the unpinned generation: exit %d, stderr %q", code, stderr)
	}
	nsB := "" // b.Namespace
	g1B := filepath.Join(o.dir, "g1.b.json")
	mustCLI(t, b, nsB, nil, "import", tar1, "--trust", o.pub, "--out", g1B)
	if code, v := checkRef(t, b, nsB, g1B, o.cfg, o.pub, "--copy"); code != 4 || v.Class != resume.ClassUnpinnedCrossHost {
		t.Errorf("the unpinned generation on B: exit %d class %q", code, v.Class)
	}

	// The wrong digest is refused, naming the field.
	wrong := filepath.Join(filepath.Dir(o.cfg), "wrong.json")
	if err := os.WriteFile(wrong, []byte(pinnedAdopt("busybox:1", digest.FromString("another image"))), 0o644); err != nil {
		t.Fatal(err)
	}
	g2 := filepath.Join(o.dir, run+".g2.json")
	code, stdout, _ := srcli(t, a, "", "repin", "--ref", o.ref, "--trust", o.pub, "--config", wrong, "--key", o.key, "--out", g2)
	if code != 3 || !strings.Contains(string(stdout), `"class": "manifest-mismatch"`) || !strings.Contains(string(stdout), "/image: offered") {
		t.Errorf("repin to the wrong digest: exit %d, want 3 naming /image: %s", code, stdout)
	}
	if _, err := os.Stat(g2); !os.IsNotExist(err) {
		t.Errorf("a refused repin wrote %s (%v)", g2, err)
	}
	if rec := ledgerRecord(t, a, "", run); rec.Generation != 1 {
		t.Errorf("a refused repin moved the record: %+v", rec)
	}

	// Repin with the file pin writes.
	pinned := filepath.Join(filepath.Dir(o.cfg), "pinned.json")
	if err := os.WriteFile(pinned, []byte(pinnedAdopt("busybox:1", bb.Index)), 0o644); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Run          string `json:"run"`
		Generation   uint64 `json:"generation"`
		Ref          string `json:"ref"`
		RepinnedFrom string `json:"repinnedFrom"`
	}
	mustCLI(t, a, "", &out, "repin", "--ref", o.ref, "--trust", o.pub, "--config", pinned, "--key", o.key, "--out", g2)
	g2File, err := os.ReadFile(g2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := snapshot.OpenRefUnsafe(g2File)
	g1File, _ := os.ReadFile(o.ref)
	if err != nil || out.Generation != 2 || out.Ref != digest.FromBytes(g2File).String() || !ref.Pinned || ref.Parent != digest.FromBytes(g1File) ||
		ref.RepinnedFrom != out.RepinnedFrom || ref.Base.IndexDigest != bb.Index {
		t.Fatalf("repin wrote %+v (%v), printed %+v", ref, err, out)
	}
	if rec := ledgerRecord(t, a, "", run); rec.Generation != 2 || rec.State != ledger.StateSuspended || rec.Ref.String() != out.Ref {
		t.Errorf("the record after repin: %+v", rec)
	}
	if code, v := checkRef(t, a, "", o.ref, o.cfg, o.pub); code != 9 || v.Class != resume.ClassSuperseded {
		t.Errorf("generation 1 on A after the repin: exit %d class %q, want 9", code, v.Class)
	}

	// Generation 2 is handed off to B and resumes there, exactly once.
	tar2 := filepath.Join(o.dir, "g2.tar")
	code, _, stderr = srcli(t, a, "", "export", "--ref", g2, "--out", tar2, "--with-base", "--handoff", hostID(t, b), "--key", o.key)
	if code != 0 || strings.Contains(stderr, "warning") {
		t.Errorf("export --handoff of the repinned generation: exit %d, stderr %q", code, stderr)
	}
	g2B := filepath.Join(o.dir, "g2.b.json")
	mustCLI(t, b, nsB, nil, "import", tar2, "--trust", o.pub, "--out", g2B)
	if rec := ledgerRecord(t, b, nsB, run); rec.Generation != 2 || rec.State != ledger.StateSuspended || rec.Received == nil {
		t.Errorf("B's record after the import: %+v", rec)
	}
	var v resume.Verdict
	mustCLI(t, b, nsB, &v, "resume", "--ref", g2B, "--config", pinned, "--trust", o.pub, "--container", b.ID(run), "--start")
	if !v.Accepted || v.Generation != 2 || v.Copy {
		t.Fatalf("resume of the repinned generation on B: %+v", v)
	}
	if code, v := checkRef(t, a, "", g2, pinned, o.pub); code != 9 {
		t.Errorf("generation 2 on A after its handoff: exit %d class %q, want 9", code, v.Class)
	}
	if got := shIn(t, b, b.ID(run), "cat /moved.txt"); strings.TrimSpace(got) != run {
		t.Errorf("the incarnation on B reads /moved.txt = %q, want %q", got, run)
	}
}

// TestForkBesideParent: generation 1 of a run is forked on the same host;
// the fork (a new run UID, forkedFrom, its own lease) and its source both
// resume, each into its own incarnation, and both are suspended again as
// their generation 2; the fork's generation 2 still resumes once the source
// is discarded with its lease; runs shows the lineage both ways and inspect
// names the source.
func TestForkBesideParent(t *testing.T) {
	a := harness.Start(t, "fka")
	bb := harness.ImportBusybox(t, a, "busybox:1")
	const src, fork = "fork-src", "fork-new"
	o := suspendUnpinned(t, a, bb.Name, src, workload)
	forkRef := filepath.Join(o.dir, fork+".g1.json")
	var fo struct {
		Run        string               `json:"run"`
		RunUID     string               `json:"runUID"`
		ForkedFrom *snapshot.ForkedFrom `json:"forkedFrom"`
		Lease      string               `json:"lease"`
	}
	mustCLI(t, a, "", &fo, "fork", "--ref", o.ref, "--trust", o.pub, "--as", fork, "--key", o.key, "--out", forkRef)
	srcRec := ledgerRecord(t, a, "", src)
	if fo.Run != fork || fo.ForkedFrom == nil || fo.ForkedFrom.Run != src || fo.RunUID == srcRec.RunUID || fo.Lease != snapshot.RunLease(fork) {
		t.Fatalf("fork printed %+v (source record %+v)", fo, srcRec)
	}
	if rec := ledgerRecord(t, a, "", fork); rec.Generation != 1 || rec.ForkedFrom == nil || rec.ForkedFrom.Run != src {
		t.Fatalf("the fork's record: %+v", rec)
	}

	// Both resume beside each other.
	incs := map[string]string{src: a.ID(src + "-i"), fork: a.ID(fork + "-i")}
	for run, ref := range map[string]string{src: o.ref, fork: forkRef} {
		var v resume.Verdict
		mustCLI(t, a, "", &v, "resume", "--ref", ref, "--config", o.cfg, "--trust", o.pub, "--container", incs[run], "--start")
		if !v.Accepted || v.Run != run {
			t.Fatalf("resume of %s: %+v", run, v)
		}
	}
	for run, inc := range incs {
		if got := shIn(t, a, inc, "cat /moved.txt && echo "+run+" > /who.txt"); strings.TrimSpace(got) != src {
			t.Errorf("%s's incarnation reads /moved.txt = %q, want %q", run, got, src)
		}
	}
	// … and both are suspended again.
	for run, inc := range incs {
		out := filepath.Join(o.dir, run+".g2.json")
		if _, code := runCLI(t, a, "suspend", "--container", inc, "--config", o.cfg, "--key", o.key, "--out", out); code != 0 {
			t.Fatalf("suspend of %s's incarnation: exit %d", run, code)
		}
		file, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := snapshot.OpenRefUnsafe(file)
		if err != nil || ref.Run != run || ref.Generation != 2 || len(ref.Layers) != 2 {
			t.Errorf("%s generation 2: %+v (%v)", run, ref, err)
		}
		if rec := ledgerRecord(t, a, "", run); rec.Generation != 2 || rec.State != ledger.StateSuspended || (run == fork) != (rec.ForkedFrom != nil) {
			t.Errorf("%s's record after the second suspend: %+v", run, rec)
		}
	}

	// The fork's content is its own lease's: with the source discarded and
	// its lease deleted, the fork's generation 2 still finds every blob.
	mustCLI(t, a, "", nil, "discard", "--run", src, "--purge")
	if code, v := checkRef(t, a, "", filepath.Join(o.dir, fork+".g2.json"), o.cfg, o.pub); code != 0 {
		t.Errorf("the fork's generation 2 after the source's discard: exit %d %+v", code, v.Checks)
	}

	// Lineage both ways.
	var runs struct {
		Runs  []ledger.Record `json:"runs"`
		Forks []struct {
			Run string `json:"run"`
		} `json:"forks"`
	}
	mustCLI(t, a, "", &runs, "runs", "--run", src)
	if len(runs.Forks) != 1 || runs.Forks[0].Run != fork {
		t.Errorf("runs --run %s: forks %+v", src, runs.Forks)
	}
	var ins struct {
		ForkedFrom *snapshot.ForkedFrom `json:"forkedFrom"`
	}
	mustCLI(t, a, "", &ins, "inspect", forkRef)
	if ins.ForkedFrom == nil || ins.ForkedFrom.Run != src || ins.ForkedFrom.RunUID != srcRec.RunUID {
		t.Errorf("inspect of the fork: forkedFrom %+v", ins.ForkedFrom)
	}
}

// TestInspectShowsProcess: inspect of a ref reads the recorded spec
// through the daemon and from the run's archive and shows what it will
// run: the process's args, cwd, user and environment names (the values
// only with --show-env), mounts and namespaces.
func TestInspectShowsProcess(t *testing.T) {
	a := harness.Start(t, "ina")
	bb := harness.ImportBusybox(t, a, "busybox:1")
	o := suspendUnpinned(t, a, bb.Name, "inspect-1", workload)
	type inspected struct {
		RuntimeSpec struct {
			Process struct {
				Args      []string `json:"args"`
				Cwd       string   `json:"cwd"`
				Env       []string `json:"env"`
				EnvValues []string `json:"envValues"`
				User      struct {
					UID uint32 `json:"uid"`
				} `json:"user"`
			} `json:"process"`
			Mounts []struct {
				Destination string `json:"destination"`
			} `json:"mounts"`
			Namespaces []struct {
				Type string `json:"type"`
			} `json:"namespaces"`
			Spec json.RawMessage `json:"spec"`
		} `json:"runtimeSpec"`
		SpecFrom string `json:"specFrom"`
	}
	check := func(name string, in inspected, showEnv bool) {
		t.Helper()
		p := in.RuntimeSpec.Process
		if len(p.Args) < 3 || p.Args[len(p.Args)-1] != workload || p.Cwd != "/" || !slices.Contains(p.Env, "LANG") {
			t.Errorf("%s: process %+v", name, p)
		}
		if got := slices.Contains(p.EnvValues, "LANG=C.UTF-8"); got != showEnv || strings.Contains(string(in.RuntimeSpec.Spec), "C.UTF-8") != showEnv {
			t.Errorf("%s: env values shown %t, want %t: %v", name, got, showEnv, p.EnvValues)
		}
		var mounts, ns []string
		for _, m := range in.RuntimeSpec.Mounts {
			mounts = append(mounts, m.Destination)
		}
		for _, n := range in.RuntimeSpec.Namespaces {
			ns = append(ns, n.Type)
		}
		if !slices.Contains(mounts, "/proc") || !slices.Contains(ns, "pid") || !slices.Contains(ns, "mount") {
			t.Errorf("%s: mounts %v namespaces %v", name, mounts, ns)
		}
	}
	var viaDaemon inspected
	mustCLI(t, a, "", &viaDaemon, "inspect", "--trust", o.pub, o.ref)
	if !strings.HasPrefix(viaDaemon.SpecFrom, "containerd ") {
		t.Errorf("inspect with --address: spec from %q", viaDaemon.SpecFrom)
	}
	check("through the daemon", viaDaemon, false)
	var shown inspected
	mustCLI(t, a, "", &shown, "inspect", "--show-env", o.ref)
	check("--show-env", shown, true)

	archive := filepath.Join(o.dir, "run.tar")
	mustCLI(t, a, "", nil, "export", "--ref", o.ref, "--out", archive)
	cmd := exec.Command(cli(t), "--output", "json", "inspect", "--archive", archive, o.ref)
	cmd.Env = cliEnv(nil)
	var stdoutB, stderrB bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdoutB, &stderrB
	err := cmd.Run()
	code, stdout, stderr := cmd.ProcessState.ExitCode(), stdoutB.Bytes(), stderrB.String()
	if err != nil && code <= 0 {
		t.Fatal(err)
	}
	var fromArchive inspected
	if code != 0 || json.Unmarshal(stdout, &fromArchive) != nil {
		t.Fatalf("inspect --archive: exit %d\n%s\n%s", code, stdout, stderr)
	}
	check("--archive", fromArchive, false)

	// Text: one screen with the process.
	text, code := runCLI(t, a, "inspect", o.ref)
	for _, want := range []string{"process", "cwd", "user", "env", "LANG (values hidden: --show-env)", "namespaces", "mounts"} {
		if code != 0 || !strings.Contains(text, want) {
			t.Errorf("inspect text (exit %d) lacks %q:\n%s", code, want, text)
		}
	}
}

// checkRef runs resume --check of ref with config on d in ns and returns
// the exit code and the verdict.
func checkRef(t *testing.T, d *harness.Daemon, ns, ref, config, pub string, extra ...string) (int, resume.Verdict) {
	t.Helper()
	args := append([]string{"resume", "--check", "--ref", ref, "--config", config, "--trust", pub}, extra...)
	code, stdout, stderr := srcli(t, d, ns, args...)
	var v resume.Verdict
	if err := json.Unmarshal(stdout, &v); err != nil {
		t.Fatalf("resume --check: exit %d, not a verdict: %v\n%s\n%s", code, err, stdout, stderr)
	}
	return code, v
}

// ledgerRecord is the record of run in the ledger the CLI uses on d in ns.
func ledgerRecord(t *testing.T, d *harness.Daemon, ns, run string) ledger.Record {
	t.Helper()
	l := daemonLedger(t, d, ns)
	defer l.Close()
	rec, err := l.Get(d.Context(t), run)
	if err != nil {
		t.Fatalf("ledger record of %s: %v", run, err)
	}
	return rec
}
