package resume_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// unpinnedConfig is a declaration whose only unpinned member is its image.
const unpinnedConfig = `{"image": "busybox:1", "containerEnv": {"LANG": "C.UTF-8"}, "remoteUser": "vscode"}`

// opHost is the in-memory host of the repin and fork tests: the
// fixture's memhost, in namespace sandbox-resume.
func newOpHost(m *memhost.Machine) *memhost.Machine {
	m.SetNamespace("sandbox-resume")
	return m
}

var (
	_ resume.RepinHost = (*memhost.Machine)(nil)
	_ resume.ForkHost  = (*memhost.Machine)(nil)
)

// suspendedFixture is the fixture's generation 1 of unpinnedConfig,
// recorded suspended in its ledger, and its ref file.
func suspendedFixture(t *testing.T) (*fixture, []byte) {
	t.Helper()
	fx := newFixture(t, unpinnedConfig)
	file := fx.signed()
	_, err := fx.ledger.Suspended(context.Background(), ledger.SuspendRequest{Run: testRun, Generation: 1, Ref: digest.FromBytes(file),
		Container: ledger.Container{Host: testHostID, Namespace: "sandbox-resume", ID: "box-1"}, Created: time.Unix(0, 0), RunUID: testRunUID})
	if err != nil {
		t.Fatal(err)
	}
	return fx, file
}

// pinnedConfig is unpinnedConfig with image, pinned to d.
func pinnedConfig(image string) string {
	return strings.Replace(unpinnedConfig, `"busybox:1"`, `"`+image+`"`, 1)
}

func repinRequest(fx *fixture, file []byte, config string) resume.RepinRequest {
	return resume.RepinRequest{RefFile: file, RefSource: "g1.json", Trust: fx.trust, Config: []byte(config), ConfigPath: fx.configPath(),
		Keys: []crypto.Signer{fx.key}, Now: func() time.Time { return time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC) }}
}

func wantCheckError(t *testing.T, err error, class resume.Class, contains string) {
	t.Helper()
	var ce *resume.CheckError
	if !errors.As(err, &ce) || ce.Class != class {
		t.Fatalf("error %v, want a %s CheckError", err, class)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Fatalf("error %q does not name %q", err, contains)
	}
}

func TestRepin(t *testing.T) {
	fx, g1 := suspendedFixture(t)
	h := newOpHost(fx.facts)
	pinned := testImage + "@" + fx.ref.Base.ManifestDigest.String()
	res, err := resume.Repin(context.Background(), h, fx.ledger, repinRequest(fx, g1, pinnedConfig(pinned)))
	if err != nil {
		t.Fatalf("Repin: %v", err)
	}
	r := res.Ref
	switch {
	case r.Generation != 2 || r.Parent != digest.FromBytes(g1) || !slices.Equal(r.Ancestors, []digest.Digest{digest.FromBytes(g1)}):
		t.Errorf("generation %d parent %s ancestors %v", r.Generation, r.Parent, r.Ancestors)
	case !r.Pinned || r.Core.Image != pinned || r.RepinnedFrom != fx.ref.Manifest || r.Manifest == fx.ref.Manifest:
		t.Errorf("pinned %t image %q repinnedFrom %q manifest %q", r.Pinned, r.Core.Image, r.RepinnedFrom, r.Manifest)
	case r.RunUID != testRunUID || r.Fence != 1 || r.KeptRunning || r.ForkedFrom != nil || r.Created != "2026-12-04T12:00:00Z":
		t.Errorf("run UID %q fence %d keptRunning %t forkedFrom %v created %q", r.RunUID, r.Fence, r.KeptRunning, r.ForkedFrom, r.Created)
	case !slices.Equal(r.Layers, fx.ref.Layers) || *r.Spec != *fx.ref.Spec || r.Runtime.Name != fx.ref.Runtime.Name || r.Base.ManifestDigest != fx.ref.Base.ManifestDigest:
		t.Errorf("layers, spec, runtime or base changed: %+v", r)
	}
	if res.Digest != digest.FromBytes(res.File) || !slices.Contains(fx.facts.Refs(testRun), res.Digest.String()) {
		t.Errorf("ref blob %s not stored under the run lease: %v", res.Digest, fx.facts.Refs(testRun))
	}
	rec, err := fx.ledger.Get(context.Background(), testRun)
	if err != nil || rec.State != ledger.StateSuspended || rec.Generation != 2 || rec.Ref != res.Digest || rec.Holder != nil {
		t.Fatalf("record %v (%v)", rec, err)
	}
	if _, err := snapshot.OpenRef(res.File, fx.trust); err != nil {
		t.Fatalf("the repinned ref does not open: %v", err)
	}

	// The old generation is superseded; the new one resumes on another
	// host (pinned).
	old := fx.request(g1)
	old.Config, old.Copy = []byte(unpinnedConfig), false
	wantVerdict(t, resume.Decide(context.Background(), fx.facts, fx.ledger, old), 9, resume.ClassSuperseded, resume.CheckClaim)
	other := testHost()
	other.ID = "99999999-2222-3333-4444-555555555555"
	fx.facts.SetHost(other)
	req := fx.request(res.File)
	req.Config, req.Copy = []byte(pinnedConfig(pinned)), false
	if v := resume.Decide(context.Background(), fx.facts, fx.ledger, req); !v.Accepted {
		t.Fatalf("the repinned generation on another host: %s", dump(v))
	}
	// Without the repin that host refuses it (4).
	unp := fx.request(g1)
	unp.Config = []byte(unpinnedConfig)
	wantVerdict(t, resume.Decide(context.Background(), fx.facts, fx.ledger, unp), 4, resume.ClassUnpinnedCrossHost, resume.CheckHost)

	// A rerun (its ref file lost) returns the recorded repin, changing
	// nothing; one with another declaration is refused: the record moved on.
	again, err := resume.Repin(context.Background(), h, fx.ledger, repinRequest(fx, g1, pinnedConfig(pinned)))
	if err != nil || !again.Finished || !bytes.Equal(again.File, res.File) || again.Digest != res.Digest {
		t.Fatalf("a rerun of the repin: %+v, %v", again, err)
	}
	if rec2, _ := fx.ledger.Get(context.Background(), testRun); rec2.Updated != rec.Updated || rec2.Generation != 2 {
		t.Errorf("the rerun changed the record: %v", rec2)
	}
	h.DeleteBlob(res.Digest) // the blob is gone: nothing to finish from
	_, err = resume.Repin(context.Background(), h, fx.ledger, repinRequest(fx, g1, pinnedConfig(pinned)))
	wantCheckError(t, err, resume.ClassClaimConflict, "generation 2 is recorded")
}

func TestRepinRefusals(t *testing.T) {
	other := digest.FromString("another manifest")
	cases := []struct {
		name   string
		config func(pinned string) string
		edit   func(fx *fixture)
		class  resume.Class
		names  string
	}{
		{name: "wrong digest", config: func(string) string { return pinnedConfig(testImage + "@" + other.String()) },
			class: resume.ClassManifestMismatch, names: "/image: offered"},
		{name: "not pinned", config: func(string) string { return unpinnedConfig },
			class: resume.ClassManifestMismatch, names: "/image"},
		{name: "another member changed", config: func(p string) string {
			return strings.Replace(pinnedConfig(p), `"C.UTF-8"`, `"C"`, 1)
		}, class: resume.ClassManifestMismatch, names: "/containerEnv/LANG"},
		{name: "does not ingest", config: func(string) string { return `{"image": 1}` }, class: resume.ClassBadInput, names: "/image"},
		{name: "ref pinned already", edit: func(fx *fixture) {
			fx.ref.Core.Image = testImage + "@" + fx.ref.Base.ManifestDigest.String()
			fx.ref.Manifest, fx.ref.Pinned = address(t, &fx.ref), true
		}, class: resume.ClassBadInput, names: "pinned already"},
		{name: "feature by tag", edit: func(fx *fixture) {
			fx.ref.Core.Features = append(fx.ref.Core.Features, envFeature("ghcr.io/devcontainers/features/node:1"))
			fx.ref.Manifest = address(t, &fx.ref)
		}, class: resume.ClassManifestMismatch, names: "/ref/core/features/0"},
		{name: "a /2 ref", edit: func(fx *fixture) { fx.ref.Schema, fx.ref.RunUID = snapshot.RefSchemaV2, "" },
			class: resume.ClassBadInput, names: snapshot.RefSchemaV2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx, g1 := suspendedFixture(t)
			if tc.edit != nil {
				tc.edit(fx)
				g1 = fx.signed()
			}
			pinned := testImage + "@" + fx.ref.Base.ManifestDigest.String()
			config := pinnedConfig(pinned)
			if tc.config != nil {
				config = tc.config(pinned)
			}
			h := newOpHost(fx.facts)
			_, err := resume.Repin(context.Background(), h, fx.ledger, repinRequest(fx, g1, config))
			wantCheckError(t, err, tc.class, tc.names)
			if refs := fx.facts.Refs(testRun); len(refs) != 0 {
				t.Errorf("a refused repin stored %v", refs)
			}
		})
	}

	t.Run("untrusted", func(t *testing.T) {
		fx, g1 := suspendedFixture(t)
		req := repinRequest(fx, g1, pinnedConfig(testImage+"@"+fx.ref.Base.ManifestDigest.String()))
		req.Trust = envelope.NewKeyRing(testKey("b").Public().(ed25519.PublicKey))
		_, err := resume.Repin(context.Background(), newOpHost(fx.facts), fx.ledger, req)
		wantCheckError(t, err, resume.ClassUntrusted, "g1.json")
	})
	t.Run("not recorded", func(t *testing.T) {
		fx := newFixture(t, unpinnedConfig)
		g1 := fx.signed()
		_, err := resume.Repin(context.Background(), newOpHost(fx.facts), fx.ledger, repinRequest(fx, g1, pinnedConfig(testImage+"@"+fx.ref.Base.ManifestDigest.String())))
		wantCheckError(t, err, resume.ClassClaimConflict, "no record")
		if refs := fx.facts.Refs(testRun); len(refs) != 0 {
			t.Errorf("a refused repin stored %v", refs)
		}
	})
}

// address is the manifest address of r's core.
func address(t *testing.T, r *snapshot.Ref) string {
	t.Helper()
	c, err := r.Core.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	return envmanifest.Address(c)
}

func envFeature(id string) envmanifest.Feature {
	return envmanifest.Feature{ID: id, Options: json.RawMessage(`{}`)}
}
