package resume_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// here is a container of the fixture's host and namespace.
func here(id string) ledger.Container {
	return ledger.Container{Host: testHostID, Namespace: memhost.DefaultNamespace, ID: id}
}

// deadResumer is a resuming holder of this host whose process is gone (a
// start time this process never had).
func deadResumer(t testing.TB, id string) ledger.Holder {
	t.Helper()
	h, err := resume.Self(here(id))
	if err != nil {
		t.Fatal(err)
	}
	h.Start += "0"
	return h
}

// liveResumer is a resuming holder of this host whose process runs (this
// process).
func liveResumer(t testing.TB, id string) ledger.Holder {
	t.Helper()
	h, err := resume.Self(here(id))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// claimAs puts the run's record in the resuming state with holder h at the
// fixture's generation and ref (through the ledger's own Claim).
func (fx *fixture) claimAs(h ledger.Holder) ledger.Claim {
	fx.t.Helper()
	c, err := fx.ledger.Claim(context.Background(), ledger.ClaimRequest{Run: testRun, Generation: 1, Ref: digest.FromBytes(fx.signed()), RunUID: fx.ref.RunUID, Holder: h, Copy: true})
	if err != nil {
		fx.t.Fatal(err)
	}
	return c
}

// liveAs puts the run's record live with container id at the fixture's
// generation and ref, and returns the fence.
func (fx *fixture) liveAs(id string) uint64 {
	fx.t.Helper()
	c := fx.claimAs(liveResumer(fx.t, id))
	if _, err := c.Live(context.Background(), here(id)); err != nil {
		fx.t.Fatal(err)
	}
	return c.Fence()
}

func wantDetail(t *testing.T, v *resume.Verdict, parts ...string) {
	t.Helper()
	f := v.Failed()
	if f == nil {
		f = v.Check(resume.CheckClaim)
	}
	for _, p := range parts {
		if !strings.Contains(f.Detail, p) {
			t.Errorf("%s detail %q does not name %q", f.Name, f.Detail, p)
		}
	}
}

// TestClaimCheckOutcomes: every outcome of the claim check (docs/design.md
// "Resume decision", check 11) under Decide and under Resume, over
// host/memhost and ledger/fake; Decide never changes the record.
func TestClaimCheckOutcomes(t *testing.T) {
	id := resume.DefaultContainerID(testRun, 1)
	for _, tt := range []struct {
		name   string
		setup  func(t *testing.T, fx *fixture)
		take   bool
		force  bool // with take: delete a live holder alive here
		copy   bool // --copy: the fixture's generation was never recorded by this ledger
		code   int
		class  resume.Class
		detail []string
	}{
		{name: "no record", copy: true, setup: func(*testing.T, *fixture) {}},
		// Turn 3: a generation this ledger never recorded is no copy
		// unless --copy says so (docs/design.md "Exactly once across hosts").
		{name: "no record, no copy", code: 9, class: resume.ClassSuperseded, detail: []string{"no handoff of generation 1 to this host"}, setup: func(*testing.T, *fixture) {}},
		{name: "suspended at this generation and ref", setup: func(t *testing.T, fx *fixture) {
			fx.claimAs(liveResumer(t, "earlier")).Release(context.Background())
		}},
		// Turn 3: a purged run is never claimed (the old rule let an old
		// generation replay over a reused run id), copy or not.
		{name: "purged", copy: true, code: 9, class: resume.ClassSuperseded, detail: []string{"purged"}, setup: func(t *testing.T, fx *fixture) {
			ctx := context.Background()
			fx.ledger.Discard(ctx, testRun, false)
			fx.ledger.Purge(ctx, testRun)
		}},
		{name: "newer generation", code: 9, class: resume.ClassSuperseded, detail: []string{"generation 2 is recorded"}, setup: func(t *testing.T, fx *fixture) {
			_, err := fx.ledger.Claim(context.Background(), ledger.ClaimRequest{Run: testRun, Generation: 2, Ref: digest.FromString("g2"), Holder: liveResumer(t, "g2"), Copy: true})
			if err != nil {
				t.Fatal(err)
			}
		}},
		{name: "discarded", code: 9, class: resume.ClassSuperseded, detail: []string{"discarded"}, setup: func(t *testing.T, fx *fixture) {
			fx.ledger.Discard(context.Background(), testRun, false)
		}},
		{name: "forked", code: 6, class: resume.ClassForked, detail: []string{"is recorded with ref"}, setup: func(t *testing.T, fx *fixture) {
			_, err := fx.ledger.Claim(context.Background(), ledger.ClaimRequest{Run: testRun, Generation: 1, Ref: digest.FromString("other"), Holder: liveResumer(t, "x"), Copy: true})
			if err != nil {
				t.Fatal(err)
			}
		}},
		{name: "live", code: 8, class: resume.ClassClaimConflict, detail: []string{"live", "incarnation", testHostID}, setup: func(t *testing.T, fx *fixture) {
			fx.liveAs("incarnation")
		}},
		{name: "resuming, resumer alive", code: 8, class: resume.ClassClaimConflict, detail: []string{"resuming", "busy", "resumer process"}, setup: func(t *testing.T, fx *fixture) {
			fx.claimAs(liveResumer(t, "busy"))
		}},
		{name: "resuming, resumer gone, no container", setup: func(t *testing.T, fx *fixture) {
			fx.claimAs(deadResumer(t, "gone"))
		}},
		{name: "resuming, resumer gone, container with a running task", code: 8, class: resume.ClassClaimConflict, detail: []string{"running task"}, setup: func(t *testing.T, fx *fixture) {
			c := fx.claimAs(deadResumer(t, "gone"))
			fx.facts.PutContainer("gone", map[string]string{snapshot.LabelFence: strconv.FormatUint(c.Fence(), 10)}, 77)
		}},
		// Turn 3: a resumer's container carries the run and fence labels
		// (materialize writes both); the guard deletes only such a one.
		{name: "resuming, resumer gone, stopped container with the fence", setup: func(t *testing.T, fx *fixture) {
			c := fx.claimAs(deadResumer(t, "gone"))
			fx.facts.PutContainer("gone", map[string]string{snapshot.LabelRun: testRun, snapshot.LabelFence: strconv.FormatUint(c.Fence(), 10)}, 77)
			fx.facts.ExitTask("gone")
		}},
		{name: "resuming, resumer gone, container with another fence", code: 8, class: resume.ClassClaimConflict, detail: []string{"fence label"}, setup: func(t *testing.T, fx *fixture) {
			fx.claimAs(deadResumer(t, "gone"))
			fx.facts.PutContainer("gone", map[string]string{snapshot.LabelFence: "99"}, 0)
		}},
		{name: "resuming, resumer of another host", code: 8, class: resume.ClassClaimConflict, detail: []string{"other-host"}, setup: func(t *testing.T, fx *fixture) {
			h := deadResumer(t, "gone")
			h.Host = "other-host"
			fx.claimAs(h)
		}},
		{name: "resuming, gone holder's container is the one to create", setup: func(t *testing.T, fx *fixture) {
			c := fx.claimAs(deadResumer(t, id))
			fx.facts.PutContainer(id, map[string]string{snapshot.LabelRun: testRun, snapshot.LabelFence: strconv.FormatUint(c.Fence(), 10)}, 0)
		}},
		// The holder-deletion guard (docs/design.md "Hardening"): a
		// container under the gone holder's id that is another run's, or
		// carries another fence, is left alone and the claim is 8 naming it.
		{name: "resuming, gone holder's id holds another run's container", code: 8, class: resume.ClassClaimConflict, detail: []string{id, "left alone", "other-run"}, setup: func(t *testing.T, fx *fixture) {
			c := fx.claimAs(deadResumer(t, id))
			fx.facts.PutContainer(id, map[string]string{snapshot.LabelRun: "other-run", snapshot.LabelFence: strconv.FormatUint(c.Fence(), 10)}, 0)
		}},
		{name: "container id exists", copy: true, code: 8, class: resume.ClassClaimConflict, detail: []string{id, "already exists"}, setup: func(t *testing.T, fx *fixture) {
			fx.facts.PutContainer(id, nil, 0)
		}},
		{name: "previous release's claim lease", copy: true, code: 8, class: resume.ClassClaimConflict, detail: []string{snapshot.ClaimLease(testRun), "old-incarnation"}, setup: func(t *testing.T, fx *fixture) {
			fx.facts.SetLegacyClaim(testRun, "old-incarnation")
		}},
		// Turn 3: purged is 9 before the lease (8) is looked at.
		{name: "previous release's claim lease, purged record", copy: true, code: 9, class: resume.ClassSuperseded, detail: []string{"purged"}, setup: func(t *testing.T, fx *fixture) {
			ctx := context.Background()
			fx.ledger.Discard(ctx, testRun, false)
			fx.ledger.Purge(ctx, testRun)
			fx.facts.SetLegacyClaim(testRun, "old-incarnation")
		}},
		{name: "previous release's claim lease beside a record", setup: func(t *testing.T, fx *fixture) {
			fx.claimAs(liveResumer(t, "earlier")).Release(context.Background())
			fx.facts.SetLegacyClaim(testRun, "old-incarnation")
		}},
		// Precedence: 9, then 6, then 8.
		{name: "superseded before an existing container id and a claim lease", code: 9, class: resume.ClassSuperseded, setup: func(t *testing.T, fx *fixture) {
			fx.ledger.Discard(context.Background(), testRun, false)
			fx.facts.PutContainer(id, nil, 0)
			fx.facts.SetLegacyClaim(testRun, "old-incarnation")
		}},
		{name: "forked before an existing container id", code: 6, class: resume.ClassForked, setup: func(t *testing.T, fx *fixture) {
			_, err := fx.ledger.Claim(context.Background(), ledger.ClaimRequest{Run: testRun, Generation: 1, Ref: digest.FromString("other"), Holder: liveResumer(t, "x"), Copy: true})
			if err != nil {
				t.Fatal(err)
			}
			fx.facts.PutContainer(id, nil, 0)
		}},
		{name: "live taken over", take: true, force: true, setup: func(t *testing.T, fx *fixture) {
			f := fx.liveAs("lost-incarnation")
			fx.facts.PutContainer("lost-incarnation", map[string]string{snapshot.LabelRun: testRun, snapshot.LabelFence: strconv.FormatUint(f, 10)}, 55)
		}},
		{name: "live taken over, its stopped container", take: true, setup: func(t *testing.T, fx *fixture) {
			f := fx.liveAs("lost-incarnation")
			fx.facts.PutContainer("lost-incarnation", map[string]string{snapshot.LabelRun: testRun, snapshot.LabelFence: strconv.FormatUint(f, 10)}, 55)
			fx.facts.ExitTask("lost-incarnation")
		}},
		// A holder alive on this host needs force; a foreign container
		// under the holder's id is left alone even with force (the finding:
		// a running container of another run was deleted).
		{name: "live taken over, alive here, no force", take: true, code: 8, class: resume.ClassClaimConflict, detail: []string{"running task", "force"}, setup: func(t *testing.T, fx *fixture) {
			f := fx.liveAs("lost-incarnation")
			fx.facts.PutContainer("lost-incarnation", map[string]string{snapshot.LabelRun: testRun, snapshot.LabelFence: strconv.FormatUint(f, 10)}, 55)
		}},
		{name: "live taken over, another run's container under its id", take: true, force: true, code: 8, class: resume.ClassClaimConflict, detail: []string{"lost-incarnation", "left alone"}, setup: func(t *testing.T, fx *fixture) {
			fx.liveAs("lost-incarnation")
			fx.facts.PutContainer("lost-incarnation", map[string]string{snapshot.LabelRun: "other-run", snapshot.LabelFence: "1"}, 55)
		}},
		{name: "take-over of a live resumer", take: true, code: 8, class: resume.ClassClaimConflict, setup: func(t *testing.T, fx *fixture) {
			fx.claimAs(liveResumer(t, "busy"))
		}},
	} {
		for _, mode := range []string{"decide", "resume"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				fx, m := materializable(t, baseConfig)
				tt.setup(t, fx)
				before := fx.record()
				req := fx.request(fx.signed())
				req.TakeOver = tt.take
				req.Force = tt.force
				req.Copy = tt.copy
				var v *resume.Verdict
				if mode == "decide" {
					v = resume.Decide(context.Background(), fx.facts, fx.ledger, req)
				} else {
					v = resume.Resume(context.Background(), fx.facts, fx.ledger, m, req, resume.ResumeOptions{})
				}
				failAt := ""
				if tt.code != 0 {
					failAt = resume.CheckClaim
				}
				wantVerdict(t, v, tt.code, tt.class, failAt)
				wantDetail(t, v, tt.detail...)
				if wantCopy := tt.copy && tt.code == 0 && before == nil; v.Copy != wantCopy {
					t.Errorf("verdict copy %v, want %v", v.Copy, wantCopy)
				}
				if v.Run != testRun || v.Generation != 1 {
					t.Errorf("verdict run %q generation %d", v.Run, v.Generation)
				}
				after := fx.record()
				if mode == "decide" || tt.code != 0 {
					if !equalRecords(before, after) {
						t.Errorf("the record changed:\nbefore %v\nafter  %v", before, after)
					}
					if v.Fence != 0 || v.TakenOver != nil || v.Container != "" {
						t.Errorf("fence %d takenOver %v container %q without a claim", v.Fence, v.TakenOver, v.Container)
					}
					if !strings.Contains(v.Check(resume.CheckClaim).Detail, "nothing was written") && tt.code == 0 {
						t.Errorf("decide's claim detail %q", v.Check(resume.CheckClaim).Detail)
					}
					return
				}
				// Resume: live with this container and a fence above the record's.
				var fence uint64
				if before != nil {
					fence = before.Fence
				}
				if after == nil || after.State != ledger.StateLive || after.Holder == nil || after.Holder.Container != here(id) || after.Fence != fence+1 || v.Fence != after.Fence {
					t.Fatalf("record %v, verdict fence %d; want live held by %s with fence %d", after, v.Fence, id, fence+1)
				}
				if c, ok := m.Incarnation(id); !ok || c.Labels[snapshot.LabelFence] != strconv.FormatUint(after.Fence, 10) {
					t.Errorf("container %s: %v %t", id, c.Labels, ok)
				}
				// The replaced holder's container is gone.
				if before != nil && before.Holder != nil && before.Holder.ID != id {
					if slices.Contains(m.Containers(), before.Holder.ID) {
						t.Errorf("the replaced holder's container %s was kept", before.Holder.ID)
					}
				}
				if tt.take {
					want := &resume.TakenOver{Host: testHostID, Namespace: memhost.DefaultNamespace, Container: "lost-incarnation", Fence: fence}
					if v.TakenOver == nil || *v.TakenOver != *want {
						t.Errorf("takenOver %+v, want %+v", v.TakenOver, want)
					}
					wantDetail(t, v, "operator's decision", "lost-incarnation")
				} else if v.TakenOver != nil {
					t.Errorf("takenOver %+v without a take-over", v.TakenOver)
				}
			})
		}
	}
}

func equalRecords(a, b *ledger.Record) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.String() == b.String() && a.Updated.Equal(b.Updated)
}

// TestResumeTwice: the second resume of a generation is 8 naming the
// incarnation; an older generation than the record's is 9.
func TestResumeTwice(t *testing.T) {
	fx, m := materializable(t, baseConfig)
	wantVerdict(t, resumeWith(fx, m, resume.ResumeOptions{}), 0, "", "")
	v := resumeWith(fx, m, resume.ResumeOptions{Container: "again"})
	wantVerdict(t, v, 8, resume.ClassClaimConflict, resume.CheckClaim)
	wantDetail(t, v, resume.DefaultContainerID(testRun, 1))
	if got := m.Containers(); !slices.Equal(got, []string{resume.DefaultContainerID(testRun, 1)}) {
		t.Errorf("containers %v", got)
	}
}

// loseOnCreate is a Materializer whose CreateContainer first lets another
// party change the record (a forced discard, a take-over).
type loseOnCreate struct {
	*memhost.Machine
	meanwhile func()
}

func (m loseOnCreate) CreateContainer(ctx context.Context, spec host.ContainerSpec) error {
	m.meanwhile()
	return m.Machine.CreateContainer(ctx, spec)
}

// TestResumeFencedOut: a claim lost while materializing (discarded with
// force, or taken over by another resumer) deletes the container it made
// and is 8: the fenced-out resumer leaves nothing behind.
func TestResumeFencedOut(t *testing.T) {
	for name, meanwhile := range map[string]func(t *testing.T, fx *fixture){
		"discarded": func(t *testing.T, fx *fixture) {
			if _, err := fx.ledger.Discard(context.Background(), testRun, true); err != nil {
				t.Fatal(err)
			}
		},
		"taken over": func(t *testing.T, fx *fixture) {
			_, err := fx.ledger.Claim(context.Background(), ledger.ClaimRequest{Run: testRun, Generation: 1, Ref: digest.FromBytes(fx.signed()), RunUID: fx.ref.RunUID,
				Holder: liveResumer(t, "other"), GoneHolder: func() *ledger.Holder { r := fx.record(); return r.Holder }()})
			if err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			fx, fm := materializable(t, baseConfig)
			m := loseOnCreate{Machine: fm, meanwhile: func() { meanwhile(t, fx) }}
			v := resumeWith(fx, m, resume.ResumeOptions{})
			if v.ExitCode != 8 || v.Class != resume.ClassClaimConflict || v.Materialize == nil || v.Materialize.Result != resume.ResultFail || v.Container != "" {
				t.Fatalf("verdict %s", dump(v))
			}
			if !strings.Contains(v.Materialize.Detail, "deleted") {
				t.Errorf("detail %q does not say the container was deleted", v.Materialize.Detail)
			}
			if got := fm.Containers(); len(got) != 0 {
				t.Errorf("containers left behind: %v", got)
			}
		})
	}
}

// unsureLedger makes every claim's Live fail with a storage error after
// (applied) or instead of (!applied) running it: an unknown outcome.
type unsureLedger struct {
	ledger.Ledger
	applied bool
}

type unsureClaim struct {
	ledger.Claim
	applied bool
}

func (l unsureLedger) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	c, err := l.Ledger.Claim(ctx, req)
	if err != nil {
		return nil, err
	}
	return unsureClaim{Claim: c, applied: l.applied}, nil
}

func (c unsureClaim) Live(ctx context.Context, ct ledger.Container) (ledger.Record, error) {
	if c.applied {
		c.Claim.Live(ctx, ct)
	}
	return ledger.Record{}, errors.New("etcd ledger etcd://127.0.0.1:1: context deadline exceeded")
}

// TestResumeLiveUnknown: a Live whose outcome is unknown reads the record
// back: live with this fence and container, the incarnation stands;
// otherwise the container is deleted and the verdict is 8.
func TestResumeLiveUnknown(t *testing.T) {
	for _, applied := range []bool{true, false} {
		fx, m := materializable(t, baseConfig)
		v := resume.Resume(context.Background(), fx.facts, unsureLedger{Ledger: fx.ledger, applied: applied}, m, fx.request(fx.signed()), resume.ResumeOptions{})
		if applied {
			wantVerdict(t, v, 0, "", "")
			continue
		}
		if v.ExitCode != 8 || len(m.Containers()) != 0 {
			t.Errorf("not applied: %s, containers %v", dump(v), m.Containers())
		}
	}
}

// TestResumeRaceOneWinner: resumes of one generation racing through one
// ledger give exactly one incarnation; the others are 8.
func TestResumeRaceOneWinner(t *testing.T) {
	fx, m := materializable(t, baseConfig)
	const n = 8
	verdicts := make([]*resume.Verdict, n)
	done := make(chan int)
	for i := range n {
		go func() {
			verdicts[i] = resumeWith(fx, m, resume.ResumeOptions{Container: "c" + strconv.Itoa(i)})
			done <- i
		}()
	}
	timeout := time.After(time.Minute)
	for range n {
		select {
		case <-done:
		case <-timeout:
			t.Fatal("resumes did not finish")
		}
	}
	won := 0
	for _, v := range verdicts {
		switch v.ExitCode {
		case 0:
			won++
		case 8:
		default:
			t.Errorf("verdict %s", dump(v))
		}
	}
	if won != 1 || len(m.Containers()) != 1 {
		t.Errorf("%d winners, containers %v; want one", won, m.Containers())
	}
}
