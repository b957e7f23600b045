package resume_test

import (
	"context"
	"crypto"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

func forkRequest(fx *fixture, file []byte, run string) resume.ForkRequest {
	return resume.ForkRequest{RefFile: file, RefSource: "g1.json", Trust: fx.trust, Run: run, Keys: []crypto.Signer{fx.key},
		Now: func() time.Time { return time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC) }}
}

// withMemory gives fx.ref a CRIU memory image of one stored blob.
func withMemory(fx *fixture) {
	blob := []byte("criu image of " + testRun)
	fx.ref.Memory = &snapshot.Memory{Format: snapshot.MemoryFormatCRIU,
		Blobs:   []snapshot.Descriptor{{MediaType: snapshot.MediaTypeMemoryCRIU, Digest: fx.facts.PutBlob(blob), Size: int64(len(blob))}},
		Runtime: snapshot.MemoryRuntime{Tool: snapshot.MemoryToolCRIU, Version: "4.1.1", BinaryDigest: digest.FromString("criu")},
		Host:    snapshot.MemoryHost{Kernel: "6.1.0", CPU: snapshot.CPU{Vendor: "GenuineIntel", Family: 6, Model: 85}}}
}

func TestFork(t *testing.T) {
	fx, g1 := suspendedFixture(t)
	h := newOpHost(fx.facts)
	source, _ := fx.ledger.Get(context.Background(), testRun)
	res, err := resume.Fork(context.Background(), h, fx.ledger, forkRequest(fx, g1, "demo-2"))
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	r := res.Ref
	want := snapshot.ForkedFrom{Run: testRun, RunUID: testRunUID, Generation: 1, Ref: digest.FromBytes(g1)}
	switch {
	case r.Run != "demo-2" || r.Generation != 1 || r.Parent != "" || r.Fence != 0 || len(r.Ancestors) != 0 || r.RepinnedFrom != "":
		t.Errorf("run %q generation %d parent %q fence %d ancestors %v", r.Run, r.Generation, r.Parent, r.Fence, r.Ancestors)
	case r.ForkedFrom == nil || *r.ForkedFrom != want:
		t.Errorf("forkedFrom %+v, want %+v", r.ForkedFrom, want)
	case !snapshot.ValidRunUID(r.RunUID) || r.RunUID == testRunUID:
		t.Errorf("run UID %q (the source's is %s)", r.RunUID, testRunUID)
	case r.Manifest != fx.ref.Manifest || !slices.Equal(r.Layers, fx.ref.Layers) || *r.Spec != *fx.ref.Spec || r.Memory != nil || res.Memory:
		t.Errorf("manifest, layers, spec or memory: %+v", r)
	case len(res.Notes) != 0:
		t.Errorf("notes %q", res.Notes)
	}
	lease := snapshot.RunLease("demo-2")
	for _, d := range []digest.Digest{fx.ref.Layers[0].Digest, fx.ref.Spec.Digest, fx.ref.Base.ManifestDigest, fx.ref.Base.ConfigDigest, fx.layer, res.Digest} {
		if res.Lease != lease || !h.Holds(lease, d) {
			t.Errorf("lease %s (%s) does not hold %s", lease, res.Lease, d)
		}
	}
	if !slices.Contains(fx.facts.Refs("demo-2"), res.Digest.String()) {
		t.Errorf("the fork's ref blob is not under its lease: %v", fx.facts.Refs("demo-2"))
	}
	rec, err := fx.ledger.Get(context.Background(), "demo-2")
	if err != nil || rec.State != ledger.StateSuspended || rec.Generation != 1 || rec.Ref != res.Digest || rec.RunUID != r.RunUID ||
		rec.ForkedFrom == nil || rec.ForkedFrom.Ref != want.Ref || rec.ForkedFrom.Run != testRun {
		t.Fatalf("the fork's record %v (%v)", rec, err)
	}
	if after, _ := fx.ledger.Get(context.Background(), testRun); after.Updated != source.Updated || after.Ref != source.Ref || after.State != source.State {
		t.Errorf("the source's record changed: %v → %v", source, after)
	}
	// The fork resumes as its own run, and so does its source.
	for _, c := range []struct {
		run  string
		file []byte
	}{{"demo-2", res.File}, {testRun, g1}} {
		req := fx.request(c.file)
		req.Copy = false
		if v := resume.Decide(context.Background(), fx.facts, fx.ledger, req); !v.Accepted || v.Run != c.run {
			t.Fatalf("resume of %s: %s", c.run, dump(v))
		}
	}
	// The new run id is now taken.
	_, err = resume.Fork(context.Background(), h, fx.ledger, forkRequest(fx, g1, "demo-2"))
	wantCheckError(t, err, resume.ClassClaimConflict, "the run id is taken")
}

func TestForkMemory(t *testing.T) {
	t.Run("asked for, none recorded", func(t *testing.T) {
		fx, g1 := suspendedFixture(t)
		req := forkRequest(fx, g1, "demo-2")
		req.WithMemory = true
		res, err := resume.Fork(context.Background(), newOpHost(fx.facts), fx.ledger, req)
		if err != nil || res.Memory || res.Ref.Memory != nil || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "carries no memory") {
			t.Fatalf("Fork --with-memory of a ref without memory: %+v, %v", res, err)
		}
	})
	t.Run("recorded, not asked for", func(t *testing.T) {
		fx := newFixture(t, unpinnedConfig)
		withMemory(fx)
		res, err := resume.Fork(context.Background(), newOpHost(fx.facts), fx.ledger, forkRequest(fx, fx.signed(), "demo-2"))
		if err != nil || res.Memory || res.Ref.Memory != nil || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "filesystem only") {
			t.Fatalf("Fork of a ref with memory: %+v, %v", res, err)
		}
	})
	t.Run("recorded and asked for", func(t *testing.T) {
		fx := newFixture(t, unpinnedConfig)
		withMemory(fx)
		h := newOpHost(fx.facts)
		req := forkRequest(fx, fx.signed(), "demo-2")
		req.WithMemory = true
		res, err := resume.Fork(context.Background(), h, fx.ledger, req)
		if err != nil || !res.Memory || res.Ref.Memory == nil || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "duplicated") {
			t.Fatalf("Fork --with-memory: %+v, %v", res, err)
		}
		if !h.Holds(res.Lease, fx.ref.Memory.Blobs[0].Digest) {
			t.Errorf("the memory blob is not under the fork's lease %s", res.Lease)
		}
		// A memory blob that is gone is check 9's refusal.
		fx.facts.DeleteBlob(fx.ref.Memory.Blobs[0].Digest)
		req.Run = "demo-3"
		_, err = resume.Fork(context.Background(), h, fx.ledger, req)
		wantCheckError(t, err, resume.ClassSnapshotMissing, "/ref/memory/blobs/0")
	})
}

func TestForkRefusals(t *testing.T) {
	fx, g1 := suspendedFixture(t)
	h := newOpHost(fx.facts)
	if _, err := resume.Fork(context.Background(), h, fx.ledger, forkRequest(fx, g1, "Not_A_Run")); !errors.Is(err, snapshot.ErrInvalidRun) {
		t.Errorf("an invalid run id: %v", err)
	}
	_, err := resume.Fork(context.Background(), h, fx.ledger, forkRequest(fx, g1, testRun))
	wantCheckError(t, err, resume.ClassBadInput, "a fork is a new run")
	tampered := []byte(strings.Replace(string(g1), `"generation": 1`, `"generation": 1 `, 1))
	tampered[len(tampered)-3] ^= 1
	if _, err := resume.Fork(context.Background(), h, fx.ledger, forkRequest(fx, tampered, "demo-2")); err == nil {
		t.Errorf("a tampered ref forked")
	}
	fx.facts.DeleteBlob(fx.ref.Layers[0].Digest)
	_, err = resume.Fork(context.Background(), h, fx.ledger, forkRequest(fx, g1, "demo-2"))
	wantCheckError(t, err, resume.ClassSnapshotMissing, "/ref/layers/0")
	if _, err := fx.ledger.Get(context.Background(), "demo-2"); !errors.Is(err, ledger.ErrNotFound) || len(fx.facts.Refs("demo-2")) != 0 {
		t.Errorf("a refused fork left a record (%v) or a ref blob %v", err, fx.facts.Refs("demo-2"))
	}
}
