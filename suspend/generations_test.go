package suspend_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
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

// The tests of later generations (docs/design.md "Suspend", steps 2, 3, 5,
// 6 and 7; "SnapshotRef": layers, flattening, retention, what a later
// generation copies from its parent).

// resumeInto does in the fakes what resume does on a host: Claim the
// generation res wrote, create incarnation id from its layers (its files
// are the tree the layers give, its snapshot's parent the chain of the
// base and the layers), labelled run, manifest, generation, ref and fence,
// running, and take the claim Live. It returns the fence.
func resumeInto(t *testing.T, f *memhost.Machine, l ledger.Ledger, res *suspend.Result, id string) uint64 {
	t.Helper()
	ctx := context.Background()
	ref := res.Ref
	claim, err := l.Claim(ctx, ledger.ClaimRequest{Run: ref.Run, Generation: ref.Generation, Ref: res.RefBlob,
		RunUID: ref.RunUID, Parent: ref.Parent, Ancestors: ref.Ancestors,
		Holder: ledger.Holder{Container: ledger.Container{Host: testHost.ID, Namespace: memhost.DefaultNamespace, ID: id}, PID: 7, Start: "s", Boot: "b"}})
	if err != nil {
		t.Fatalf("claim generation %d: %v", ref.Generation, err)
	}
	files, err := f.Tree(ref.Layers)
	if err != nil {
		t.Fatal(err)
	}
	var diffIDs []digest.Digest
	for _, l := range ref.Layers {
		diffIDs = append(diffIDs, l.DiffID)
	}
	f.AddContainer(memhost.Container{ID: id, Image: ref.Base.Name, Task: snapshot.TaskRunning, Files: files, Lower: files, Layers: diffIDs,
		Labels: map[string]string{
			snapshot.LabelRun: ref.Run, snapshot.LabelManifest: ref.Manifest, snapshot.LabelGeneration: strconv.FormatUint(ref.Generation, 10),
			snapshot.LabelRef: res.RefBlob.String(), snapshot.LabelFence: strconv.FormatUint(claim.Fence(), 10),
		}})
	if _, err := claim.Live(ctx, ledger.Container{Host: testHost.ID, Namespace: memhost.DefaultNamespace, ID: id}); err != nil {
		t.Fatal(err)
	}
	return claim.Fence()
}

// tree returns the files a ref's layers give.
func tree(t *testing.T, f *memhost.Machine, ref *snapshot.Ref) map[string][]byte {
	t.Helper()
	files, err := f.Tree(ref.Layers)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameFiles(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if !maps.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("%s: files %q, want %q", what, got, want)
	}
}

func filesOf(t *testing.T, f *memhost.Machine, id string) map[string][]byte {
	t.Helper()
	files, err := f.Files(id)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func edit(t *testing.T, f *memhost.Machine, id string, fn func(map[string][]byte)) {
	t.Helper()
	if err := f.EditFiles(id, fn); err != nil {
		t.Fatal(err)
	}
}

func noOps(t *testing.T, f *memhost.Machine, from int, ops ...string) {
	t.Helper()
	for _, op := range f.Ops()[from:] {
		if slices.Contains(ops, op) {
			t.Fatalf("%s happened before the refusal (operations %v)", op, f.Ops()[from:])
		}
	}
}

// TestSuspendFiveGenerations: resume → work → suspend through five
// generations, files added, changed, deleted and re-created each time:
// every ref chains to its parent, carries the fence of the incarnation
// that wrote it, copies core, manifest, pinned, policy, lockfile and base,
// its layers are its parent's plus one and give exactly the incarnation's
// files; the ledger records each generation; each stopped incarnation is
// deleted.
func TestSuspendFiveGenerations(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	e := newEnv(t, `{"image":"busybox:1","containerEnv":{"HOMEISH":"${localEnv:HOME}"}}`)
	l := ledgerfake.New()
	req := e.req("Box-1", "five")
	req.Policy = []string{"LD_PRELOAD"}
	res, err := suspend.Run(ctx, f, l, req)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "generation 1", tree(t, f, res.Ref), map[string][]byte{"a.txt": []byte("A")})
	first := res.Ref
	for g := uint64(2); g <= 5; g++ {
		id := fmt.Sprintf("five-g%d", g)
		fence := resumeInto(t, f, l, res, id)
		edit(t, f, id, func(files map[string][]byte) {
			files[fmt.Sprintf("new-%d", g)] = []byte(fmt.Sprint("new in ", g)) // added
			files["a.txt"] = []byte(fmt.Sprint("A changed in ", g))            // changed
			delete(files, fmt.Sprintf("new-%d", g-1))                          // deleted (the one the last generation added)
			if g == 4 {
				files["new-2"] = []byte("re-created in 4") // re-created after its deletion in 3
			}
			if g == 5 {
				delete(files, "new-2")
			}
		})
		files := filesOf(t, f, id)
		parent := res
		req := e.req(id, "")
		res, err = suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatalf("generation %d: %v", g, err)
		}
		ref := res.Ref
		if ref.Generation != g || ref.Parent != parent.RefBlob || ref.Fence != fence || ref.Run != "five" || ref.KeptRunning {
			t.Fatalf("generation %d: ref generation %d parent %s fence %d run %q", g, ref.Generation, ref.Parent, ref.Fence, ref.Run)
		}
		if len(ref.Layers) != int(g) || !slices.Equal(ref.Layers[:g-1], parent.Ref.Layers) {
			t.Fatalf("generation %d: layers %v, parent's %v", g, ref.Layers, parent.Ref.Layers)
		}
		if ref.Manifest != first.Manifest || ref.Pinned != first.Pinned || !slices.Equal(ref.Policy, first.Policy) ||
			ref.Lockfile != first.Lockfile || fmt.Sprint(ref.Base) != fmt.Sprint(first.Base) || ref.Host != testHost {
			t.Fatalf("generation %d copies %+v from %+v", g, ref, first)
		}
		if ref.Spec == nil || ref.Runtime == nil {
			t.Fatalf("generation %d: no spec or runtime", g)
		}
		// The run UID is generation 1's; the ancestors are the parent's
		// and the parent.
		if want := append(slices.Clone(parent.Ref.Ancestors), parent.RefBlob); ref.Schema != snapshot.RefSchemaV3 || !snapshot.ValidRunUID(first.RunUID) ||
			ref.RunUID != first.RunUID || !slices.Equal(ref.Ancestors, want) {
			t.Fatalf("generation %d: %s run UID %q (generation 1's %q), ancestors %v, want %v", g, ref.Schema, ref.RunUID, first.RunUID, ref.Ancestors, want)
		}
		sameFiles(t, fmt.Sprintf("generation %d", g), tree(t, f, ref), files)
		if _, err := snapshot.OpenRef(res.File, envelope.NewKeyRing(e.pub)); err != nil {
			t.Fatal(err)
		}
		rec, err := l.Get(ctx, "five")
		if err != nil || rec.State != ledger.StateSuspended || rec.Generation != g || rec.Ref != res.RefBlob || rec.Holder != nil ||
			rec.Fence != fence || rec.SuspendedBy == nil || rec.SuspendedBy.Fence != fence || rec.SuspendedBy.ID != id {
			t.Fatalf("generation %d: record %+v (err %v)", g, rec, err)
		}
		if !res.Deleted {
			t.Fatalf("generation %d: the incarnation was not deleted", g)
		}
		if _, err := f.Container(ctx, id); err == nil {
			t.Fatalf("generation %d: incarnation %s still exists", g, id)
		}
		// A rerun after the deletion finds no container; the ref file is
		// complete.
		if _, err := suspend.Run(ctx, f, l, req); !errors.Is(err, suspend.ErrContainerNotFound) {
			t.Fatalf("generation %d: rerun after the deletion: %v", g, err)
		}
		if file, err := os.ReadFile(e.out()); err != nil || !bytes.Equal(file, res.File) {
			t.Fatalf("generation %d: ref file (err %v)", g, err)
		}
	}
	// Every ref and spec blob of the chain stays under the run lease.
	for cur := res.Ref; ; {
		if ok, _ := f.LeaseHolds(ctx, res.Lease, cur.Spec.Digest); !ok {
			t.Fatalf("spec of generation %d released", cur.Generation)
		}
		if cur.Parent == "" {
			break
		}
		if ok, _ := f.LeaseHolds(ctx, res.Lease, cur.Parent); !ok {
			t.Fatalf("ref of generation %d released", cur.Generation-1)
		}
		b, err := f.Blob(ctx, cur.Parent)
		if err != nil {
			t.Fatal(err)
		}
		if cur, err = snapshot.OpenRefUnsafe(b); err != nil {
			t.Fatal(err)
		}
	}
	// Resuming the last generation once more gives its tree.
	resumeInto(t, f, l, res, "five-g6")
	sameFiles(t, "incarnation of generation 5", filesOf(t, f, "five-g6"), tree(t, f, res.Ref))
}

// TestSuspendKeepRunningTwice: a container suspended twice with
// --keep-running gives two generations whose last layers each hold
// everything since its resume: a file created before the first and
// deleted before the second is absent from the second's tree (and, for an
// incarnation, a file of the generation it resumed deleted before the
// first stays deleted). The runtime's own container kept running is
// suspended again as generation 2, and a stopping suspend of it labels it
// suspended = G (a later suspend of it is 8).
func TestSuspendKeepRunningTwice(t *testing.T) {
	ctx := context.Background()
	t.Run("runtime container", func(t *testing.T) {
		f, e, l := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
		req := e.req("Box-1", "twice")
		req.KeepRunning = true
		g1, err := suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatal(err)
		}
		edit(t, f, "Box-1", func(files map[string][]byte) { files["x"] = []byte("x") })
		g2, err := suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatal(err)
		}
		edit(t, f, "Box-1", func(files map[string][]byte) { delete(files, "x") })
		g3, err := suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatal(err)
		}
		for i, res := range []*suspend.Result{g1, g2, g3} {
			if res.Ref.Generation != uint64(i+1) || len(res.Ref.Layers) != 1 || !res.Ref.KeptRunning || res.Fence != 1 {
				t.Fatalf("generation %d: ref %+v fence %d", i+1, res.Ref, res.Fence)
			}
		}
		if g2.Ref.Parent != g1.RefBlob || g3.Ref.Parent != g2.RefBlob || g2.Ref.Fence != 1 || g3.Ref.Fence != 1 {
			t.Fatalf("parents %s %s, fences %d %d", g2.Ref.Parent, g3.Ref.Parent, g2.Ref.Fence, g3.Ref.Fence)
		}
		sameFiles(t, "generation 2", tree(t, f, g2.Ref), map[string][]byte{"a.txt": []byte("A"), "x": []byte("x")})
		sameFiles(t, "generation 3", tree(t, f, g3.Ref), map[string][]byte{"a.txt": []byte("A")})
		if c := container(t, f, "Box-1"); c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelFence] != "1" || c.Labels[snapshot.LabelSuspending] != "" {
			t.Fatalf("task %q labels %v", c.Task, c.Labels)
		}
		// A stopping suspend: generation 4, the container stopped and
		// labelled suspended = 4, not deleted (it is the runtime's).
		req.KeepRunning = false
		g4, err := suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatal(err)
		}
		c := container(t, f, "Box-1")
		if g4.Ref.Generation != 4 || g4.Deleted || c.Task != snapshot.TaskNone || c.Labels[snapshot.LabelSuspended] != "4" || c.Labels[snapshot.LabelSuspending] != "" {
			t.Fatalf("generation %d deleted %t: task %q labels %v", g4.Ref.Generation, g4.Deleted, c.Task, c.Labels)
		}
		if rec, _ := l.Get(ctx, "twice"); rec.State != ledger.StateSuspended || rec.Generation != 4 || rec.Holder != nil {
			t.Fatalf("record %+v", rec)
		}
		n := len(f.Ops())
		if _, err := suspend.Run(ctx, f, l, req); !errors.Is(err, suspend.ErrAlreadySuspended) {
			t.Fatalf("suspend of a suspended container: %v, want ErrAlreadySuspended", err)
		}
		noOps(t, f, n, memhost.OpPauseTask, memhost.OpCreateLease, memhost.OpSetLabels)
	})
	t.Run("incarnation", func(t *testing.T) {
		f, e, l := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
		edit(t, f, "Box-1", func(files map[string][]byte) { files["old"] = []byte("old") })
		g1, err := suspend.Run(ctx, f, l, e.req("Box-1", "inc"))
		if err != nil {
			t.Fatal(err)
		}
		resumeInto(t, f, l, g1, "inc-g2")
		edit(t, f, "inc-g2", func(files map[string][]byte) {
			files["y"] = []byte("y")
			delete(files, "old")
		})
		req := e.req("inc-g2", "")
		req.KeepRunning = true
		g2, err := suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatal(err)
		}
		edit(t, f, "inc-g2", func(files map[string][]byte) {
			delete(files, "y")
			files["z"] = []byte("z")
		})
		g3, err := suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(g2.Ref.Layers) != 2 || len(g3.Ref.Layers) != 2 || g2.Ref.Layers[0] != g1.Ref.Layers[0] || g3.Ref.Layers[0] != g1.Ref.Layers[0] {
			t.Fatalf("layers %v, %v; generation 1's %v", g2.Ref.Layers, g3.Ref.Layers, g1.Ref.Layers)
		}
		sameFiles(t, "generation 2", tree(t, f, g2.Ref), map[string][]byte{"a.txt": []byte("A"), "y": []byte("y")})
		sameFiles(t, "generation 3", tree(t, f, g3.Ref), map[string][]byte{"a.txt": []byte("A"), "z": []byte("z")})
		// The last layer of generation 3 holds everything since the
		// resume: applied over generation 1 alone it gives the tree.
		sameFiles(t, "generation 1 + the last layer of 3", tree(t, f, &snapshot.Ref{Layers: []snapshot.Layer{g1.Ref.Layers[0], g3.Ref.Layers[1]}}),
			tree(t, f, g3.Ref))
		if g3.Ref.Parent != g2.RefBlob || g3.Ref.Fence != g2.Ref.Fence || g2.Deleted || g3.Deleted {
			t.Fatalf("generation 3: parent %s fence %d", g3.Ref.Parent, g3.Ref.Fence)
		}
		// A stopping suspend of the incarnation deletes it.
		req.KeepRunning = false
		g4, err := suspend.Run(ctx, f, l, req)
		if err != nil || !g4.Deleted || len(g4.Ref.Layers) != 2 {
			t.Fatalf("generation 4: %v (deleted %t)", err, g4 != nil && g4.Deleted)
		}
	})
}

// TestSuspendFlatten: --flatten, and more than snapshot.MaxLayers layers,
// give one layer — the diff against the base chain — whose tree is the
// unflattened one; the generation after a flattened one builds on it.
func TestSuspendFlatten(t *testing.T) {
	ctx := context.Background()
	t.Run("flag", func(t *testing.T) {
		f, e, l := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
		res, err := suspend.Run(ctx, f, l, e.req("Box-1", "flat"))
		if err != nil {
			t.Fatal(err)
		}
		for g := 2; g <= 4; g++ {
			id := fmt.Sprintf("flat-g%d", g)
			resumeInto(t, f, l, res, id)
			edit(t, f, id, func(files map[string][]byte) {
				files[fmt.Sprint("f", g)] = []byte("x")
				delete(files, fmt.Sprint("f", g-1))
			})
			want := filesOf(t, f, id)
			req := e.req(id, "")
			req.Flatten = g == 3
			n := len(f.Ops())
			if res, err = suspend.Run(ctx, f, l, req); err != nil {
				t.Fatal(err)
			}
			wantLayers, flat := g, slices.Contains(f.Ops()[n:], memhost.OpCreateFlatDiff)
			switch g {
			case 3:
				wantLayers = 1
			case 4:
				wantLayers = 2
			}
			if len(res.Ref.Layers) != wantLayers || res.Flattened != (g == 3) || flat != (g == 3) {
				t.Fatalf("generation %d: %d layers (flattened %t), want %d", g, len(res.Ref.Layers), res.Flattened, wantLayers)
			}
			sameFiles(t, fmt.Sprintf("generation %d", g), tree(t, f, res.Ref), want)
		}
	})
	t.Run("past 16 layers", func(t *testing.T) {
		f, e, l := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
		res, err := suspend.Run(ctx, f, l, e.req("Box-1", "deep"))
		if err != nil {
			t.Fatal(err)
		}
		for g := 2; g <= snapshot.MaxLayers+2; g++ {
			id := fmt.Sprintf("deep-g%d", g)
			resumeInto(t, f, l, res, id)
			edit(t, f, id, func(files map[string][]byte) {
				files[fmt.Sprint("f", g)] = []byte(fmt.Sprint(g))
				if g%3 == 0 {
					delete(files, fmt.Sprint("f", g-2))
				}
			})
			want := filesOf(t, f, id)
			if res, err = suspend.Run(ctx, f, l, e.req(id, "")); err != nil {
				t.Fatal(err)
			}
			wantLayers := g
			switch {
			case g == snapshot.MaxLayers+1:
				wantLayers = 1
			case g > snapshot.MaxLayers+1:
				wantLayers = g - snapshot.MaxLayers
			}
			if len(res.Ref.Layers) != wantLayers || res.Flattened != (g == snapshot.MaxLayers+1) {
				t.Fatalf("generation %d: %d layers (flattened %t), want %d", g, len(res.Ref.Layers), res.Flattened, wantLayers)
			}
			sameFiles(t, fmt.Sprintf("generation %d", g), tree(t, f, res.Ref), want)
			// Once a flattened generation is among the latest 3, the
			// earlier layers are named by none of them: released.
			if g == snapshot.MaxLayers+3 {
				if len(res.Released) != snapshot.MaxLayers {
					t.Fatalf("generation %d released %d layers, want the %d of before the flattening", g, len(res.Released), snapshot.MaxLayers)
				}
				for _, d := range res.Released {
					if ok, _ := f.LeaseHolds(ctx, res.Lease, d); ok {
						t.Fatalf("released layer %s still held", d)
					}
				}
			}
		}
	})
}

// TestSuspendKeepGenerations: the layers no longer named by the latest K
// generations are released from the run lease, the others and every ref
// and spec blob stay; a GC then removes the released ones.
func TestSuspendKeepGenerations(t *testing.T) {
	ctx := context.Background()
	for _, k := range []int{0, 1, 2} {
		t.Run(fmt.Sprint("K=", k), func(t *testing.T) {
			f, e, l := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
			req := e.req("Box-1", "keep")
			req.KeepRunning, req.KeepGenerations = true, k
			var gens []*suspend.Result
			for g := 1; g <= 5; g++ {
				edit(t, f, "Box-1", func(files map[string][]byte) { files[fmt.Sprint("g", g)] = []byte("x") })
				res, err := suspend.Run(ctx, f, l, req)
				if err != nil {
					t.Fatal(err)
				}
				gens = append(gens, res)
			}
			keep := k
			if keep == 0 {
				keep = suspend.DefaultKeepGenerations
			}
			f.GC()
			lease := gens[0].Lease
			for i, res := range gens {
				held, _ := f.LeaseHolds(ctx, lease, res.Ref.Layers[0].Digest)
				if want := i >= len(gens)-keep; held != want {
					t.Fatalf("generation %d's layer held %t, want %t", i+1, held, want)
				}
				if _, err := f.Blob(ctx, res.Ref.Layers[0].Digest); (err == nil) != held {
					t.Fatalf("generation %d's layer present after GC: %v", i+1, err)
				}
				for _, d := range []digest.Digest{res.RefBlob, res.Ref.Spec.Digest, res.Ref.Base.ManifestDigest} {
					if ok, _ := f.LeaseHolds(ctx, lease, d); !ok {
						t.Fatalf("generation %d: %s released", i+1, d)
					}
				}
			}
		})
	}
	t.Run("negative", func(t *testing.T) {
		e := newEnv(t, `{"image":"busybox:1"}`)
		req := e.req("Box-1", "keep")
		req.KeepGenerations = -1
		if _, err := suspend.Run(ctx, newFake(), ledgerfake.New(), req); err == nil {
			t.Fatal("no error for -1 generations")
		}
	})
}

// laterFixture is a run at generation 1 resumed into incarnation "inc"
// (fence 1), which then wrote file "w"; generation 1's ref file is
// removed.
func laterFixture(t *testing.T, config string) (*memhost.Machine, env, *ledgerfake.Ledger, *suspend.Result) {
	t.Helper()
	f, e, l := newFake(), newEnv(t, config), ledgerfake.New()
	res, err := suspend.Run(context.Background(), f, l, e.req("Box-1", "later"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e.out()); err != nil {
		t.Fatal(err)
	}
	resumeInto(t, f, l, res, "inc")
	edit(t, f, "inc", func(files map[string][]byte) { files["w"] = []byte("w") })
	return f, e, l, res
}

// TestSuspendLaterRefusals: what step 2 and 3 refuse at a later
// generation, each before anything is paused, labelled or stored.
func TestSuspendLaterRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request
		want    error
	}{
		{"taken over: another fence", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			if _, err := l.Claim(ctx, ledger.ClaimRequest{Run: "later", Generation: 1, Ref: g1.RefBlob, RunUID: g1.Ref.RunUID, TakeOver: true,
				Holder: ledger.Holder{Container: ledger.Container{Host: "host-b", Namespace: "ns", ID: "other"}, PID: 1}}); err != nil {
				t.Fatal(err)
			}
			return e.req("inc", "")
		}, suspend.ErrRunConflict},
		{"discarded", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			if _, err := l.Discard(ctx, "later", true); err != nil {
				t.Fatal(err)
			}
			return e.req("inc", "")
		}, suspend.ErrRunConflict},
		{"fence label not the record's", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			if err := f.SetContainerLabels(ctx, "inc", map[string]string{snapshot.LabelFence: "7"}); err != nil {
				t.Fatal(err)
			}
			return e.req("inc", "")
		}, suspend.ErrRunConflict},
		{"run other than the label", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			return e.req("inc", "other")
		}, suspend.ErrRunMismatch},
		{"declaration changed", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			if err := os.WriteFile(e.cfg, []byte(`{"image":"busybox:1","containerEnv":{"A":"1"}}`), 0o644); err != nil {
				t.Fatal(err)
			}
			return e.req("inc", "")
		}, suspend.ErrMismatch},
		{"snapshot not built from the generation", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			c := container(t, f, "inc")
			files := filesOf(t, f, "inc")
			f.AddContainer(memhost.Container{ID: "inc", Image: busybox, Task: snapshot.TaskRunning, Labels: c.Labels, Files: files, Created: c.Created})
			return e.req("inc", "")
		}, suspend.ErrMismatch},
		{"parent ref blob gone", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			f.DeleteBlob(g1.RefBlob)
			return e.req("inc", "")
		}, errdef.ErrSnapshotMissing},
		{"parent ref blob corrupt", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			f.CorruptBlob(g1.RefBlob, []byte(`{"other":"bytes"}`))
			return e.req("inc", "")
		}, errdef.ErrSnapshotMissing},
		{"ref label not a digest", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			if err := f.SetContainerLabels(ctx, "inc", map[string]string{snapshot.LabelRef: "sha256:nope"}); err != nil {
				t.Fatal(err)
			}
			return e.req("inc", "")
		}, errdef.ErrSnapshotMissing},
		{"resumed-from ref blob gone", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			// After a kept-running generation 2 the parent is 2, the
			// generation resumed from still 1: its blob is read too.
			req := e.req("inc", "")
			req.KeepRunning = true
			if _, err := suspend.Run(ctx, f, l, req); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(e.out()); err != nil {
				t.Fatal(err)
			}
			f.DeleteBlob(g1.RefBlob)
			return e.req("inc", "")
		}, errdef.ErrSnapshotMissing},
		{"resumed-from generation label wrong", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			if err := f.SetContainerLabels(ctx, "inc", map[string]string{snapshot.LabelGeneration: "3"}); err != nil {
				t.Fatal(err)
			}
			return e.req("inc", "")
		}, errdef.ErrSnapshotMissing},
		{"policy other than the parent's", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			req := e.req("inc", "")
			req.Policy, req.PolicySet = []string{"LD_PRELOAD"}, true
			return req
		}, suspend.ErrPolicyMismatch},
		{"base content gone", func(t *testing.T, f *memhost.Machine, e env, l *ledgerfake.Ledger, g1 *suspend.Result) suspend.Request {
			f.DeleteBlob(g1.Ref.Base.ConfigDigest)
			return e.req("inc", "")
		}, errdef.ErrImageUnresolved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, e, l, g1 := laterFixture(t, `{"image":"busybox:1"}`)
			req := tc.prepare(t, f, e, l, g1)
			before, _ := l.Get(ctx, "later")
			n := len(f.Ops())
			_, err := suspend.Run(ctx, f, l, req)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			t.Logf("%v", err)
			e.noRefFile(t)
			noOps(t, f, n, memhost.OpPauseTask, memhost.OpSetLabels, memhost.OpCreateDiff, memhost.OpWriteBlob)
			if c := container(t, f, "inc"); c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelSuspending] != "" {
				t.Fatalf("task %q labels %v", c.Task, c.Labels)
			}
			if after, _ := l.Get(ctx, "later"); after.Updated != before.Updated {
				t.Fatalf("the record changed: %+v", after)
			}
		})
	}
}

// TestSuspendLaterPolicy: without a policy a later generation uses its
// parent's recorded list, whatever the default; the same list given is
// accepted.
func TestSuspendLaterPolicy(t *testing.T) {
	ctx := context.Background()
	for _, given := range []bool{false, true} {
		f, e, l := newFake(), newEnv(t, `{"image":"busybox:1","containerEnv":{"LD_PRELOAD":"/x.so"}}`), ledgerfake.New()
		if err := f.EditFiles("Box-1", func(map[string][]byte) {}); err != nil {
			t.Fatal(err)
		}
		f.AddContainer(memhost.Container{ID: "pol", Image: busybox, Task: snapshot.TaskRunning,
			Spec: []byte(`{"ociVersion":"1.2.0","process":{"env":["LD_PRELOAD=/x.so"]}}`)})
		req := e.req("pol", "pol")
		req.Policy, req.PolicySet = []string{}, true // generation 1 with no reserved names
		req.KeepRunning = true
		if _, err := suspend.Run(ctx, f, l, req); err != nil {
			t.Fatal(err)
		}
		req.Policy, req.PolicySet = []string{"LD_PRELOAD"}, false // the default would refuse LD_PRELOAD
		if given {
			req.Policy, req.PolicySet = nil, true // the same (empty) list
		}
		res, err := suspend.Run(ctx, f, l, req)
		if err != nil {
			t.Fatalf("policy given %t: %v", given, err)
		}
		if res.Ref.Generation != 2 || res.Ref.Policy == nil || len(res.Ref.Policy) != 0 {
			t.Fatalf("policy given %t: generation %d policy %q", given, res.Ref.Generation, res.Ref.Policy)
		}
	}
}

// TestSuspendSpecChecks: at generation 1 the container's runtime spec must
// carry the declaration's containerEnv (values without ${…}) and mount
// targets, else 3 naming what differs, before anything is paused.
func TestSuspendSpecChecks(t *testing.T) {
	ctx := context.Background()
	const spec = `{"ociVersion":"1.2.0","process":{"args":["/bin/sh"],"env":["PATH=/bin","GREETING=hello"]},` +
		`"mounts":[{"destination":"/proc","type":"proc"},{"destination":"/cache/","type":"bind","source":"/x"}]}`
	for _, tc := range []struct {
		name, config, spec string
		want               []string // what the error names; nil: accepted
	}{
		{"env and mount present", `{"image":"busybox:1","containerEnv":{"GREETING":"hello","HOMEISH":"${localEnv:HOME}"},"mounts":["type=volume,source=c,target=/cache"]}`, spec, nil},
		{"nothing declared, spec not decoding", `{"image":"busybox:1"}`, `{"a":1,"a":2}`, nil},
		{"env missing", `{"image":"busybox:1","containerEnv":{"LANG":"C"}}`, spec, []string{"LANG", `"LANG=C"`}},
		{"env other value", `{"image":"busybox:1","containerEnv":{"GREETING":"bonjour"}}`, spec, []string{`"GREETING=hello"`, `"GREETING=bonjour"`}},
		{"env twice", `{"image":"busybox:1","containerEnv":{"GREETING":"hello"}}`,
			`{"ociVersion":"1.2.0","process":{"env":["GREETING=hello","GREETING=x"]}}`, []string{`"GREETING=x"`}},
		{"mount target missing", `{"image":"busybox:1","mounts":["type=volume,source=c,target=/data"]}`, spec, []string{"/data"}},
		{"both", `{"image":"busybox:1","containerEnv":{"LANG":"C"},"mounts":["type=tmpfs,target=/t"]}`, spec, []string{"LANG", "/t"}},
		{"spec not decoding", `{"image":"busybox:1","containerEnv":{"LANG":"C"}}`, `{"process":{},"process":{}}`, []string{"does not decode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, e, l := newFake(), newEnv(t, tc.config), ledgerfake.New()
			f.AddContainer(memhost.Container{ID: "sp", Image: busybox, Task: snapshot.TaskRunning, Spec: []byte(tc.spec)})
			n := len(f.Ops())
			_, err := suspend.Run(ctx, f, l, e.req("sp", "sp"))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, suspend.ErrMismatch) {
				t.Fatalf("err = %v, want ErrMismatch", err)
			}
			for _, w := range tc.want {
				if !bytes.Contains([]byte(err.Error()), []byte(w)) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			noOps(t, f, n, memhost.OpPauseTask, memhost.OpSetLabels, memhost.OpCreateLease)
			e.noRefFile(t)
		})
	}
}

// TestSuspendLaterLedgerOutcomes: at a later generation too the ledger is
// written while the task is paused: refused → the task runs again, the
// suspending label is gone, no ref file, the incarnation still holds its
// labels; unknown → the task stays paused for the rerun, which decides.
func TestSuspendLaterLedgerOutcomes(t *testing.T) {
	ctx := context.Background()
	t.Run("refused", func(t *testing.T) {
		f, e, inner, g1 := laterFixture(t, `{"image":"busybox:1"}`)
		l := &testLedger{Ledger: inner, suspended: func(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
			// Taken over between step 2 and the record.
			if _, err := inner.Claim(ctx, ledger.ClaimRequest{Run: "later", Generation: 1, Ref: g1.RefBlob, RunUID: g1.Ref.RunUID, TakeOver: true,
				Holder: ledger.Holder{Container: ledger.Container{Host: "host-b", Namespace: "ns", ID: "other"}, PID: 1}}); err != nil {
				t.Fatal(err)
			}
			return inner.Suspended(ctx, req)
		}}
		_, err := suspend.Run(ctx, f, l, e.req("inc", ""))
		if !errors.Is(err, suspend.ErrRunConflict) || !errors.Is(err, errdef.ErrClaimConflict) {
			t.Fatalf("err = %v", err)
		}
		e.noRefFile(t)
		c := container(t, f, "inc")
		if c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelSuspending] != "" || c.Labels[snapshot.LabelRun] != "later" || c.Labels[snapshot.LabelFence] != "1" {
			t.Fatalf("task %q labels %v", c.Task, c.Labels)
		}
	})
	t.Run("failed, not recorded", func(t *testing.T) {
		f, e, inner, _ := laterFixture(t, `{"image":"busybox:1"}`)
		l := &testLedger{Ledger: inner, suspended: func(context.Context, ledger.SuspendRequest) (ledger.Record, error) {
			return ledger.Record{}, errStorage
		}}
		if _, err := suspend.Run(ctx, f, l, e.req("inc", "")); !errors.Is(err, errStorage) {
			t.Fatalf("err = %v", err)
		}
		if c := container(t, f, "inc"); c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelSuspending] != "" {
			t.Fatalf("task %q labels %v", c.Task, c.Labels)
		}
		l.suspended = nil
		res, err := suspend.Run(ctx, f, l, e.req("inc", ""))
		if err != nil || res.Ref.Generation != 2 || !res.Deleted {
			t.Fatalf("rerun: %v", err)
		}
	})
	for _, recorded := range []bool{false, true} {
		t.Run(fmt.Sprint("unknown, recorded ", recorded), func(t *testing.T) {
			f, e, inner, _ := laterFixture(t, `{"image":"busybox:1"}`)
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
			if _, err := suspend.Run(ctx, f, l, e.req("inc", "")); !errors.Is(err, suspend.ErrOutcomeUnknown) {
				t.Fatalf("err = %v", err)
			}
			if c := container(t, f, "inc"); c.Task != snapshot.TaskPaused || c.Labels[snapshot.LabelSuspending] != "2" {
				t.Fatalf("task %q labels %v", c.Task, c.Labels)
			}
			l.suspended, l.get = nil, nil
			n := len(f.Ops())
			res, err := suspend.Run(ctx, f, l, e.req("inc", ""))
			if err != nil {
				t.Fatal(err)
			}
			if res.Finished != recorded || slices.Contains(f.Ops()[n:], memhost.OpCreateDiff) == recorded || !res.Deleted || res.Ref.Generation != 2 {
				t.Fatalf("finished %t deleted %t, operations %v", res.Finished, res.Deleted, f.Ops()[n:])
			}
		})
	}
}

// TestSuspendLaterCrashAnywhere stops the suspend of an incarnation as a
// crash would at each Capturer operation and on each side of the
// ledger's Suspended, with and without --keep-running: the rerun
// completes, the ledger never holds two generations with one number (one
// record of generation 2), a stopped workload always has its generation
// recorded, and the ref file is absent or complete.
func TestSuspendLaterCrashAnywhere(t *testing.T) {
	for _, keep := range []bool{false, true} {
		ops := func() []string {
			f, e, l, _ := laterFixture(t, `{"image":"busybox:1"}`)
			req := e.req("inc", "")
			req.KeepRunning = keep
			n := len(f.Ops())
			if _, err := suspend.Run(context.Background(), f, l, req); err != nil {
				t.Fatal(err)
			}
			return f.Ops()[n:]
		}()
		stop, last := memhost.OpStopTask, memhost.OpDeleteContainer
		if keep {
			stop, last = memhost.OpResumeTask, memhost.OpSetLabels
		}
		want := []string{memhost.OpContainer, memhost.OpHost, memhost.OpReadBlob, memhost.OpImageLabels, memhost.OpCreateLease, memhost.OpHoldBase, memhost.OpSetLabels,
			memhost.OpPauseTask, memhost.OpCreateDiff, memhost.OpWriteBlob, memhost.OpWriteBlob, stop, memhost.OpReadBlob, last}
		if !keep {
			// The stopped incarnation's snapshot becomes the chain snapshot
			// before it is deleted (docs/design.md "Resume on the same host
			// without extracting").
			want = slices.Insert(want, len(want)-2, memhost.OpCommitChain)
		}
		if fmt.Sprint(ops) != fmt.Sprint(want) {
			t.Fatalf("keep %t: operations %v, want %v", keep, ops, want)
		}
		type point struct {
			op     int
			ledger int
			after  bool
		}
		var points []point
		for i := range ops {
			points = append(points, point{op: i, after: i >= 11}) // 11: the stop, after the record
		}
		points = append(points, point{op: -1, ledger: 1}, point{op: -1, ledger: 2, after: true})
		for _, p := range points {
			name := fmt.Sprintf("keep %t, ledger %d", keep, p.ledger)
			if p.op >= 0 {
				name = fmt.Sprintf("keep %t, before %d-%s", keep, p.op, ops[p.op])
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				f, e, inner, _ := laterFixture(t, `{"image":"busybox:1"}`)
				l := &testLedger{Ledger: inner}
				var mu sync.Mutex
				n, armed := 0, true
				f.Hook = func(op string) error {
					mu.Lock()
					defer mu.Unlock()
					if armed && n == p.op {
						armed = false
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
				req := e.req("inc", "")
				req.KeepRunning = keep
				crashed, err := runCrashing(f, l, req)
				if crashed == "" {
					t.Fatalf("no crash (err %v)", err)
				}
				rec, _ := inner.Get(ctx, "later")
				if (rec.Generation == 2) != p.after {
					t.Fatalf("crashed at %s: record %+v", crashed, rec)
				}
				if _, err := os.Stat(e.out()); err == nil && !p.after {
					t.Fatal("a ref file exists before the ledger recorded")
				}
				if c, err := f.Container(ctx, "inc"); err == nil && c.Task == snapshot.TaskNone && rec.Generation != 2 {
					t.Fatal("a stopped workload without a recorded generation")
				}
				f.Hook, l.suspended = nil, nil
				req.KeepRunning = !keep
				res, err := suspend.Run(ctx, f, l, req)
				if err != nil {
					t.Fatalf("rerun after a crash at %s: %v", crashed, err)
				}
				file, err := os.ReadFile(e.out())
				if err != nil || !bytes.Equal(file, res.File) {
					t.Fatalf("ref file after the rerun (err %v)", err)
				}
				rec, _ = inner.Get(ctx, "later")
				if rec.Generation != 2 || rec.Ref != res.RefBlob || res.Ref.Generation != 2 {
					t.Fatalf("record %+v, ref generation %d", rec, res.Ref.Generation)
				}
				wantKeep := keep == p.after
				if res.Ref.KeptRunning != wantKeep || res.Finished != p.after {
					t.Fatalf("crashed at %s: keptRunning %t finished %t", crashed, res.Ref.KeptRunning, res.Finished)
				}
				c, err := f.Container(ctx, "inc")
				switch {
				case wantKeep:
					if err != nil || c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelSuspending] != "" || c.Labels[snapshot.LabelFence] != "1" ||
						rec.State != ledger.StateLive {
						t.Fatalf("crashed at %s: task %q labels %v record %+v (err %v)", crashed, c.Task, c.Labels, rec, err)
					}
				default:
					if err == nil || !res.Deleted || rec.State != ledger.StateSuspended {
						t.Fatalf("crashed at %s: the incarnation is still there (deleted %t), record %+v", crashed, res.Deleted, rec)
					}
				}
			})
		}
	}
}

// TestSuspendLaterRerunNotOurs: a container left suspending G whose
// record moved on (taken over, or G recorded by another container) is 8
// and left as found.
func TestSuspendLaterRerunNotOurs(t *testing.T) {
	ctx := context.Background()
	interrupted := func(t *testing.T, after bool) (*memhost.Machine, env, *ledgerfake.Ledger, *suspend.Result) {
		f, e, inner, g1 := laterFixture(t, `{"image":"busybox:1"}`)
		l := &testLedger{Ledger: inner, suspended: func(ctx context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
			if after {
				if _, err := inner.Suspended(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			panic(crash{"around Suspended"})
		}}
		req := e.req("inc", "")
		req.KeepRunning = true
		if at, err := runCrashing(f, l, req); at == "" {
			t.Fatalf("no crash: %v", err)
		}
		return f, e, inner, g1
	}
	leftAsFound := func(t *testing.T, f *memhost.Machine, e env) {
		t.Helper()
		e.noRefFile(t)
		if c := container(t, f, "inc"); c.Task != snapshot.TaskPaused || c.Labels[snapshot.LabelSuspending] != "2" {
			t.Fatalf("task %q labels %v", c.Task, c.Labels)
		}
	}
	t.Run("not recorded, then taken over", func(t *testing.T) {
		f, e, l, g1 := interrupted(t, false)
		if _, err := l.Claim(ctx, ledger.ClaimRequest{Run: "later", Generation: 1, Ref: g1.RefBlob, RunUID: g1.Ref.RunUID, TakeOver: true,
			Holder: ledger.Holder{Container: ledger.Container{Host: "host-b", Namespace: "ns", ID: "other"}, PID: 1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := suspend.Run(ctx, f, l, e.req("inc", "")); !errors.Is(err, suspend.ErrRunConflict) {
			t.Fatalf("err = %v, want ErrRunConflict", err)
		}
		leftAsFound(t, f, e)
	})
	t.Run("recorded kept running, then taken over", func(t *testing.T) {
		f, e, l, _ := interrupted(t, true)
		rec, _ := l.Get(ctx, "later")
		if _, err := l.Claim(ctx, ledger.ClaimRequest{Run: "later", Generation: 2, Ref: rec.Ref, RunUID: rec.RunUID, TakeOver: true,
			Holder: ledger.Holder{Container: ledger.Container{Host: "host-b", Namespace: "ns", ID: "other"}, PID: 1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := suspend.Run(ctx, f, l, e.req("inc", "")); !errors.Is(err, suspend.ErrRunConflict) {
			t.Fatalf("err = %v, want ErrRunConflict", err)
		}
		leftAsFound(t, f, e)
	})
}

// progressLog records what a snapshot.Progress is told.
type progressLog struct {
	mu     sync.Mutex
	phases []string
	bytes  int64
}

func (p *progressLog) Phase(what string, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phases = append(p.phases, fmt.Sprint(what, " ", total))
}

func (p *progressLog) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytes += n
}

func TestSuspendProgress(t *testing.T) {
	f, e, l := newFake(), newEnv(t, `{"image":"busybox:1"}`), ledgerfake.New()
	p := &progressLog{}
	req := e.req("Box-1", "prog")
	req.Progress = p
	res, err := suspend.Run(context.Background(), f, l, req)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(p.phases) != "[diff -1]" || p.bytes != res.Ref.Layers[0].Size {
		t.Fatalf("progress %v, %d bytes; the layer has %d", p.phases, p.bytes, res.Ref.Layers[0].Size)
	}
}

// TestSuspendLaterRerunSameRef: a rerun of an interrupted suspend of a
// later generation writes the very ref the interrupted one stored (the
// creation time is on the container while it suspends), however late it
// runs; the label goes when the suspend finishes, or is undone.
func TestSuspendLaterRerunSameRef(t *testing.T) {
	ctx := context.Background()
	f, e, inner, _ := laterFixture(t, `{"image":"busybox:1"}`)
	var stored digest.Digest
	l := &testLedger{Ledger: inner, suspended: func(_ context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
		stored = req.Ref
		panic(crash{"before Suspended"})
	}}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	req := e.req("inc", "")
	req.KeepRunning = true
	req.Now = func() time.Time { return now }
	if at, err := runCrashing(f, l, req); at == "" {
		t.Fatalf("no crash: %v", err)
	}
	if c := container(t, f, "inc"); c.Labels[snapshot.LabelCreated] != "2026-12-01T09:00:00Z" || c.Labels[snapshot.LabelSuspending] != "2" {
		t.Fatalf("labels during the suspend %v", c.Labels)
	}
	now = now.Add(time.Hour)
	l.suspended = nil
	res, err := suspend.Run(ctx, f, l, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RefBlob != stored || res.Ref.Created != "2026-12-01T09:00:00Z" {
		t.Fatalf("the rerun wrote %s created %s; the interrupted suspend stored %s", res.RefBlob, res.Ref.Created, stored)
	}
	if c := container(t, f, "inc"); c.Labels[snapshot.LabelCreated] != "" || c.Labels[snapshot.LabelSuspending] != "" {
		t.Fatalf("labels after the suspend %v", c.Labels)
	}
	// A refused suspend takes the label away too.
	l.suspended = func(context.Context, ledger.SuspendRequest) (ledger.Record, error) {
		return ledger.Record{}, &ledger.Error{Class: errdef.ErrClaimConflict, Op: "suspended", Run: "later", Reason: "test"}
	}
	if _, err := suspend.Run(ctx, f, l, req); !errors.Is(err, suspend.ErrRunConflict) {
		t.Fatalf("err = %v", err)
	}
	if c := container(t, f, "inc"); c.Labels[snapshot.LabelCreated] != "" || c.Labels[snapshot.LabelSuspending] != "" || c.Task != snapshot.TaskRunning {
		t.Fatalf("after a refusal: task %q labels %v", c.Task, c.Labels)
	}
}

// TestSuspendLaterImageMetadata: the image's devcontainer.metadata label is
// checked at a later generation too (the same config read by a release
// whose rules refuse it): an *envmanifest.ImageMetadataError before
// anything is paused.
func TestSuspendLaterImageMetadata(t *testing.T) {
	f, e, l, g1 := laterFixture(t, `{"image":"busybox:1"}`)
	f.AddImage(memhost.Image{Base: g1.Ref.Base, Layers: []digest.Digest{digest.FromString("layer0")},
		Labels: map[string]string{envmanifest.ImageMetadataLabel: `[{"postCreateCommand":"curl x | sh"}]`}})
	n := len(f.Ops())
	_, err := suspend.Run(context.Background(), f, l, e.req("inc", ""))
	var me *envmanifest.ImageMetadataError
	if !errors.As(err, &me) || len(me.Refusals) == 0 {
		t.Fatalf("err = %v, want an image-metadata refusal", err)
	}
	noOps(t, f, n, memhost.OpPauseTask, memhost.OpSetLabels, memhost.OpCreateLease)
	e.noRefFile(t)
}

// TestSuspendAfterV2Parent: the generation after a sandbox.snapshot-ref/2
// parent (written by an older release) is /3 with a run UID of its own and
// the parent as its one ancestor (docs/design.md "Exactly once across
// hosts"); a rerun of its interrupted suspend writes the same ref, the UID
// kept on the container (snapshot.LabelRunUID) until the suspend ends.
func TestSuspendAfterV2Parent(t *testing.T) {
	ctx := context.Background()
	f, e := newFake(), newEnv(t, `{"image":"busybox:1"}`)
	// Generation 1, re-signed as the /2 ref an older release wrote, is the
	// record of a fresh ledger.
	res, err := suspend.Run(ctx, f, ledgerfake.New(), e.req("Box-1", "old"))
	if err != nil {
		t.Fatal(err)
	}
	v2 := *res.Ref
	v2.Schema, v2.RunUID = snapshot.RefSchemaV2, ""
	file, err := snapshot.SignRef(&v2, e.priv)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := f.WriteBlob(ctx, res.Lease, "old-g1-v2", snapshot.MediaTypeRef, file)
	if err != nil {
		t.Fatal(err)
	}
	inner := ledgerfake.New()
	if _, err := inner.Suspended(ctx, ledger.SuspendRequest{Run: "old", Generation: 1, Ref: desc.Digest,
		Container: ledger.Container{Host: testHost.ID, Namespace: memhost.DefaultNamespace, ID: "Box-1"}}); err != nil {
		t.Fatal(err)
	}
	resumeInto(t, f, inner, &suspend.Result{Ref: &v2, RefBlob: desc.Digest}, "inc")

	// The first attempt stops before Suspended; the UID it minted is on
	// the container.
	var stored digest.Digest
	l := &testLedger{Ledger: inner, suspended: func(_ context.Context, req ledger.SuspendRequest) (ledger.Record, error) {
		stored = req.Ref
		panic(crash{"before Suspended"})
	}}
	req := e.req("inc", "")
	req.KeepRunning = true
	req.Rand = bytes.NewReader(bytes.Repeat([]byte{0x5a}, 16))
	if at, err := runCrashing(f, l, req); at == "" {
		t.Fatalf("no crash: %v", err)
	}
	const uid = "ruid:5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"
	if c := container(t, f, "inc"); c.Labels[snapshot.LabelRunUID] != uid {
		t.Fatalf("labels during the suspend %v", c.Labels)
	}
	// The rerun reads no random bits (its reader has none) and writes the
	// same ref.
	l.suspended = nil
	req.Rand = bytes.NewReader(nil)
	res2, err := suspend.Run(ctx, f, l, req)
	if err != nil {
		t.Fatal(err)
	}
	ref := res2.Ref
	if res2.RefBlob != stored || ref.Schema != snapshot.RefSchemaV3 || ref.Generation != 2 || ref.RunUID != uid ||
		!slices.Equal(ref.Ancestors, []digest.Digest{desc.Digest}) || ref.Parent != desc.Digest {
		t.Fatalf("generation 2 %s (stored %s): %s run UID %q ancestors %v parent %s", res2.RefBlob, stored, ref.Schema, ref.RunUID, ref.Ancestors, ref.Parent)
	}
	if _, err := snapshot.OpenRef(res2.File, envelope.NewKeyRing(e.pub)); err != nil {
		t.Fatal(err)
	}
	if c := container(t, f, "inc"); c.Labels[snapshot.LabelRunUID] != "" || c.Labels[snapshot.LabelSuspending] != "" || c.Task != snapshot.TaskRunning {
		t.Fatalf("after the suspend: task %q labels %v", c.Task, c.Labels)
	}
}

// TestSuspendRemoteUser: at generation 1 a declared remoteUser is the
// runtime spec's process.user — a numeric one compared with the uid, a
// name resolved through the container's /etc/passwd — else 3 naming both,
// before anything is paused; a name that cannot be resolved is refused.
func TestSuspendRemoteUser(t *testing.T) {
	ctx := context.Background()
	const passwd = "root:x:0:0:root:/root:/bin/sh\nvscode:x:1000:1000::/home/vscode:/bin/sh\n"
	spec := func(uid int) string {
		return fmt.Sprintf(`{"ociVersion":"1.2.0","process":{"args":["/bin/sh"],"user":{"uid":%d,"gid":0},"env":["PATH=/bin"]}}`, uid)
	}
	for _, tc := range []struct {
		name, user string
		uid        int
		files      map[string][]byte // image files; nil: none
		upper      map[string][]byte // the container's own files
		want       []string          // what the error names; nil: accepted
	}{
		{"name resolves to the uid", "vscode", 1000, map[string][]byte{"etc/passwd": []byte(passwd)}, nil, nil},
		{"numeric equal", "1000", 1000, nil, nil, nil},
		{"root against 1000", "root", 1000, map[string][]byte{"etc/passwd": []byte(passwd)}, nil, []string{`"root"`, "uid 0", "uid is 1000"}},
		{"numeric differs", "0", 1000, nil, nil, []string{"uid 0", "uid is 1000"}},
		{"name differs", "vscode", 0, map[string][]byte{"etc/passwd": []byte(passwd)}, nil, []string{`"vscode"`, "uid 1000", "uid is 0"}},
		{"no passwd", "vscode", 1000, nil, nil, []string{`"vscode"`, "no /etc/passwd"}},
		{"no such user", "node", 1000, map[string][]byte{"etc/passwd": []byte(passwd)}, nil, []string{`"node"`, "no such user"}},
		{"container's own passwd wins", "vscode", 1000, map[string][]byte{"etc/passwd": []byte("vscode:x:0:0::/:/bin/sh\n")},
			map[string][]byte{"etc/passwd": []byte(passwd)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, e, l := newFake(), newEnv(t, fmt.Sprintf(`{"image":"busybox:1","remoteUser":%q}`, tc.user)), ledgerfake.New()
			f.AddContainer(memhost.Container{ID: "ru", Image: busybox, Task: snapshot.TaskRunning, Spec: []byte(spec(tc.uid)),
				ImageFiles: tc.files, Files: tc.upper})
			n := len(f.Ops())
			_, err := suspend.Run(ctx, f, l, e.req("ru", "ru"))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, suspend.ErrMismatch) {
				t.Fatalf("err = %v, want ErrMismatch", err)
			}
			for _, w := range tc.want {
				if !bytes.Contains([]byte(err.Error()), []byte(w)) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			noOps(t, f, n, memhost.OpPauseTask, memhost.OpSetLabels, memhost.OpCreateLease)
			e.noRefFile(t)
		})
	}
}
