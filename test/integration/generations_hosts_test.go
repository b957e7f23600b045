package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// TestGenerationsAcrossHosts: a run goes through five generations and
// two hosts (issue 16). On daemon A a runtime container (a pinned
// declaration, so the run may cross hosts) is suspended as generation 1,
// resumed, changed and suspended as generation 2 from the incarnation,
// then again as generation 3. Generation 3 travels to daemon B in an
// archive with its base and to daemon C through a registry (each daemon
// with its own ledger); it resumes on both to the expected tree (paths,
// kinds, modes, contents, files deleted in earlier generations absent).
// On B the incarnation is changed and suspended as generation 4, whose ref
// chains to generation 3's and lists its three layers plus one, and which
// resumes on B to the expected tree.
func TestGenerationsAcrossHosts(t *testing.T) {
	a, b, c := harness.Start(t, "ghosta"), harness.Start(t, "ghostb"), harness.Start(t, "ghostc")
	reg := harness.StartRegistry(t)
	bb := harness.ImportBusybox(t, a, "busybox:1")
	ra := &genRig{d: a, im: bb, env: newSuspendEnv(t, "busybox@"+bb.Index.String())}
	const run = "hosts-1"

	// On A: generations 1, 2 and 3.
	holder := scriptContainer(t, a, bb.Name, "h1", idle)
	want := readTree(t, a, holder)
	work(t, a, holder, want, genWork(1)...)
	var g3 *snapshot.Ref
	var g3Path, g3Digest string
	for g := 1; g <= 3; g++ {
		out := filepath.Join(ra.env.dir, fmt.Sprintf("hosts.g%d.json", g))
		runFlag := ""
		if g == 1 {
			runFlag = run
		}
		o, ref := ra.suspend(t, holder, runFlag, out)
		if o.Generation != uint64(g) || o.Run != run || len(ref.Layers) != g {
			t.Fatalf("generation %d on A: printed %+v, %d layers", g, o, len(ref.Layers))
		}
		if g == 3 {
			g3, g3Path, g3Digest = ref, out, o.Ref
			break
		}
		inc := a.ID(fmt.Sprintf("h%d", g+1))
		ra.resume(t, out, inc)
		startWaiting(t, a, inc)
		sameTree(t, fmt.Sprintf("incarnation of generation %d on A", g), walkTree(t, a, inc), want)
		work(t, a, inc, want, genWork(g+1)...)
		holder = inc
	}
	g3File, err := os.ReadFile(g3Path)
	if err != nil {
		t.Fatal(err)
	}

	// Generation 3 leaves A: an archive with its base, and a registry.
	archive := filepath.Join(t.TempDir(), "g3.tar")
	mustCLI(t, a, "", nil, "export", "--ref", g3Path, "--out", archive, "--with-base")
	target := reg.Host + "/runs/hosts:g3"
	mustCLI(t, a, "", nil, "push", "--plain-http", "--ref", g3Path, target)
	refB := filepath.Join(t.TempDir(), "b.g3.json")
	mustCLI(t, b, "", nil, "import", archive, "--trust", ra.env.pub, "--out", refB)
	refC := filepath.Join(t.TempDir(), "c.g3.json")
	mustCLI(t, c, "", nil, "pull", "--plain-http", "--trust", ra.env.pub, target, "--out", refC)
	for _, p := range []string{refB, refC} {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, g3File) {
			t.Fatalf("ref file %s differs from generation 3's on A (err %v)", p, err)
		}
	}

	// Generation 3 resumes on B and on C (separate ledgers) to its tree.
	rb := &genRig{d: b, env: ra.env}
	rc := &genRig{d: c, env: ra.env}
	incB := b.ID("b-g3")
	// B's and C's ledgers never recorded generation 3: copies (no handoff).
	if v := rb.resume(t, refB, incB, "--copy"); v.Generation != 3 || v.Container != incB {
		t.Fatalf("resume of generation 3 on B: generation %d container %q", v.Generation, v.Container)
	}
	startWaiting(t, b, incB)
	sameTree(t, "incarnation of generation 3 on B", walkTree(t, b, incB), want)
	incC := c.ID("c-g3")
	if v := rc.resume(t, refC, incC, "--copy"); v.Generation != 3 || v.Container != incC {
		t.Fatalf("resume of generation 3 on C: generation %d container %q", v.Generation, v.Container)
	}
	startWaiting(t, c, incC)
	sameTree(t, "incarnation of generation 3 on C", walkTree(t, c, incC), want)

	// On B: generation 4 from the incarnation, and its resume.
	work(t, b, incB, want, genWork(4)...)
	g4Path := filepath.Join(ra.env.dir, "hosts.b.g4.json")
	o4, g4 := rb.suspend(t, incB, "", g4Path)
	if o4.Generation != 4 || o4.Run != run || len(g4.Layers) != 4 || !slices.Equal(g4.Layers[:3], g3.Layers) ||
		g4.Parent.String() != g3Digest || g4.Parent != digest.FromBytes(g3File) || g4.Manifest != g3.Manifest {
		t.Fatalf("generation 4 on B: printed %+v, parent %s (want %s), layers %v (generation 3's %v)", o4, g4.Parent, g3Digest, g4.Layers, g3.Layers)
	}
	if rec := rb.record(t, run); rec.State != ledger.StateSuspended || rec.Generation != 4 || rec.Ref.String() != o4.Ref {
		t.Fatalf("B's record after generation 4: %+v", rec)
	}
	incB4 := b.ID("b-g4")
	if v := rb.resume(t, g4Path, incB4); v.Generation != 4 || v.Container != incB4 {
		t.Fatalf("resume of generation 4 on B: generation %d container %q", v.Generation, v.Container)
	}
	startWaiting(t, b, incB4)
	sameTree(t, "incarnation of generation 4 on B", walkTree(t, b, incB4), want)
	if rec := rb.record(t, run); rec.State != ledger.StateLive || rec.Generation != 4 || rec.Holder == nil || rec.Holder.ID != incB4 {
		t.Fatalf("B's record after the resume of generation 4: %+v", rec)
	}
}
