package resume_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

func TestDecideAccepted(t *testing.T) {
	fx := newFixture(t, baseConfig)
	v := fx.decide()
	wantVerdict(t, v, exitcode.OK, "", "")
	if len(v.Refusals) != 0 || len(v.Drift) != 0 {
		t.Errorf("refusals %v drift %v, want none", v.Refusals, v.Drift)
	}
	// The same environment declared differently (key order, comments,
	// short image name) has the same address.
	fx.config = `{"remoteUser":"vscode","mounts":[{"type":"volume","target":"/cache","source":"cache"}],
		"containerEnv":{"A":"1","LANG":"C.UTF-8"}, /* moved */ "image":"docker.io/library/busybox:1",
		"features":{"ghcr.io/devcontainers/features/node:1":{"version":"20"}}}`
	wantVerdict(t, fx.decide(), exitcode.OK, "", "")
}

// rawWrapper edits a signed ref file as generic JSON.
func rawWrapper(t *testing.T, file []byte, edit func(w map[string]any)) []byte {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal(file, &w); err != nil {
		t.Fatal(err)
	}
	edit(w)
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signInner signs an arbitrary inner ref object (JCS of inner) with keys.
func signInner(t *testing.T, inner map[string]any, keys ...crypto.Signer) []byte {
	t.Helper()
	raw, err := json.Marshal(inner)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := envmanifest.ParseSigned(append(append([]byte(`{"ref":`), raw...), '}'), "ref")
	if err != nil {
		t.Fatal(err)
	}
	b, err := envelope.Sign("ref", doc.Canonical, keys...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func innerOf(t *testing.T, fx *fixture) map[string]any {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal(fx.signed(), &w); err != nil {
		t.Fatal(err)
	}
	return w["ref"].(map[string]any)
}

func TestDecideRefFile(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, baseConfig)
	other := testKey("other")
	good := fx.signed()

	tests := []struct {
		name   string
		file   func() []byte
		code   int
		class  resume.Class
		failAt string
		detail string
	}{
		{"not json", func() []byte { return []byte("ref: demo-1\n") }, 2, resume.ClassBadInput, resume.CheckRefParse, "syntax"},
		{"empty file", func() []byte { return nil }, 2, resume.ClassBadInput, resume.CheckRefParse, ""},
		{"ref not an object", func() []byte { return []byte(`{"ref": [], "signatures": []}`) }, 2, resume.ClassBadInput, resume.CheckRefParse, "/ref"},
		{"no ref", func() []byte { return []byte(`{"signatures": []}`) }, 2, resume.ClassBadInput, resume.CheckRefParse, "/ref"},
		{"unknown wrapper member", func() []byte {
			return rawWrapper(t, good, func(w map[string]any) { w["comment"] = "x" })
		}, 2, resume.ClassBadInput, resume.CheckRefParse, "/comment"},
		{"duplicate key", func() []byte {
			return []byte(strings.Replace(string(good), `"ref": {`, `"ref": {"run": "x", `, 1))
		}, 2, resume.ClassBadInput, resume.CheckRefParse, "duplicate"},
		{"signatures missing", func() []byte {
			return rawWrapper(t, good, func(w map[string]any) { delete(w, "signatures") })
		}, 6, resume.ClassUntrusted, resume.CheckSignature, "signature missing"},
		{"signatures empty", func() []byte {
			return rawWrapper(t, good, func(w map[string]any) { w["signatures"] = []any{} })
		}, 6, resume.ClassUntrusted, resume.CheckSignature, "signature missing"},
		{"untrusted key", func() []byte {
			b, err := snapshot.SignRef(&fx.ref, other)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, 6, resume.ClassUntrusted, resume.CheckSignature, "trusted"},
		{"one of two trusted entries fails", func() []byte {
			// Both keys are trusted (see below); the second entry is a
			// valid signature by its key over other bytes.
			b, err := snapshot.SignRef(&fx.ref, fx.key, other)
			if err != nil {
				t.Fatal(err)
			}
			return rawWrapper(t, b, func(w map[string]any) {
				sigs := w["signatures"].([]any)
				sigs[1].(map[string]any)["sig"] = base64.StdEncoding.EncodeToString(ed25519.Sign(other, []byte("other bytes")))
			})
		}, 6, resume.ClassUntrusted, resume.CheckSignature, "/signatures/1"},
		{"edited after signing", func() []byte {
			return []byte(strings.Replace(string(good), `"keptRunning": false`, `"keptRunning": true`, 1))
		}, 6, resume.ClassUntrusted, resume.CheckSignature, "does not verify"},
		{"signed ref with an unknown member", func() []byte {
			inner := innerOf(t, fx)
			inner["note"] = "extra"
			return signInner(t, inner, fx.key)
		}, 2, resume.ClassBadInput, resume.CheckRefSchema, "/ref/note"},
		{"signed ref with a wrong type", func() []byte {
			inner := innerOf(t, fx)
			inner["pinned"] = "false"
			return signInner(t, inner, fx.key)
		}, 2, resume.ClassBadInput, resume.CheckRefSchema, "/ref/pinned"},
		{"signed ref of a newer schema", func() []byte {
			inner := innerOf(t, fx)
			inner["schema"] = "sandbox.snapshot-ref/4"
			return signInner(t, inner, fx.key)
		}, 2, resume.ClassBadInput, resume.CheckRefSchema, "newer"},
		{"manifest is not the address of core", func() []byte {
			inner := innerOf(t, fx)
			inner["manifest"] = envmanifest.Address([]byte("another core"))
			return signInner(t, inner, fx.key)
		}, 6, resume.ClassTampered, resume.CheckRefIntegrity, "/ref/manifest"},
		{"core edited, manifest kept", func() []byte {
			inner := innerOf(t, fx)
			inner["core"].(map[string]any)["remoteUser"] = "root"
			return signInner(t, inner, fx.key)
		}, 6, resume.ClassTampered, resume.CheckRefIntegrity, "/ref/manifest"},
		{"pinned is not IsPinned(core)", func() []byte {
			inner := innerOf(t, fx)
			inner["pinned"] = true
			return signInner(t, inner, fx.key)
		}, 6, resume.ClassTampered, resume.CheckRefIntegrity, "/ref/pinned"},
	}
	trust := envelope.NewKeyRing(fx.key.Public().(ed25519.PublicKey), other.Public().(ed25519.PublicKey))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := fx.request(tt.file())
			if tt.name == "one of two trusted entries fails" {
				req.Trust = trust
			}
			v := resume.Decide(ctx, fx.facts, fx.ledger, req)
			wantVerdict(t, v, tt.code, tt.class, tt.failAt)
			if f := v.Failed(); f != nil && !strings.Contains(f.Detail, tt.detail) {
				t.Errorf("detail %q does not mention %q", f.Detail, tt.detail)
			}
			if len(v.Refusals) != 0 || len(v.Drift) != 0 {
				t.Errorf("refusals %v drift %v: only check 5 and later fill them", v.Refusals, v.Drift)
			}
		})
	}

	// Both keys trusted, both entries good: accepted.
	b, err := snapshot.SignRef(&fx.ref, fx.key, other)
	if err != nil {
		t.Fatal(err)
	}
	req := fx.request(b)
	req.Trust = trust
	wantVerdict(t, resume.Decide(ctx, fx.facts, fx.ledger, req), 0, "", "")
}

func TestDecideOfferedIngest(t *testing.T) {
	t.Run("refused config", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		fx.config = `{"image": "busybox:1", "runArgs": ["--privileged"], "postCreateCommand": "make"}`
		v := fx.decide()
		wantVerdict(t, v, 2, resume.ClassBadInput, resume.CheckOfferedIngest)
		want := []string{"/postCreateCommand", "/runArgs"}
		if len(v.Refusals) != len(want) {
			t.Fatalf("refusals %v, want pointers %v", v.Refusals, want)
		}
		for i, r := range v.Refusals {
			if r.Pointer != want[i] || r.Class != envmanifest.ClassExecutesOrWidens {
				t.Errorf("refusal %d: %v, want %s executes-or-widens", i, r, want[i])
			}
		}
		if len(v.Drift) != 0 {
			t.Errorf("drift %v without an offered core", v.Drift)
		}
	})
	t.Run("lockfile used at suspension, absent now", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		fx.ref.Lockfile = digest.FromString("{}").String()
		v := fx.decide()
		wantVerdict(t, v, 2, resume.ClassBadInput, resume.CheckOfferedIngest)
		if len(v.Refusals) == 0 || v.Refusals[0].Class != envmanifest.ClassLockfile {
			t.Errorf("refusals %v, want a lockfile refusal", v.Refusals)
		}
		// With a lockfile beside the config it ingests again.
		fx.writeFile("devcontainer-lock.json", `{}`)
		wantVerdict(t, fx.decide(), 0, "", "")
	})
	t.Run("recorded policy applies", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		fx.ref.Policy = []string{"LD_PRELOAD"}
		fx.config = strings.Replace(baseConfig, `"A": "1"`, `"A": "1", "ld_preload": "/x.so"`, 1)
		v := fx.decide()
		wantVerdict(t, v, 2, resume.ClassBadInput, resume.CheckOfferedIngest)
		if len(v.Refusals) != 1 || v.Refusals[0].Class != envmanifest.ClassReservedEnv || v.Refusals[0].Pointer != "/containerEnv/ld_preload" {
			t.Errorf("refusals %v, want reserved-env at /containerEnv/ld_preload", v.Refusals)
		}
		// Without the recorded policy the same config ingests (and then
		// drifts).
		fx.ref.Policy = []string{}
		wantVerdict(t, fx.decide(), 3, resume.ClassManifestMismatch, resume.CheckManifest)
	})
}

func TestDecideManifestMismatch(t *testing.T) {
	fx := newFixture(t, baseConfig)
	fx.config = strings.Replace(baseConfig, `"A": "1"`, `"A": "2", "B": "3"`, 1)
	v := fx.decide()
	wantVerdict(t, v, 3, resume.ClassManifestMismatch, resume.CheckManifest)
	want := []resume.DriftEntry{
		{Pointer: "/containerEnv/A", Recorded: json.RawMessage(`"1"`), Offered: json.RawMessage(`"2"`)},
		{Pointer: "/containerEnv/B", Offered: json.RawMessage(`"3"`)},
	}
	if got, w := dump(v.Drift), dump(want); got != w {
		t.Errorf("drift\n%s\nwant\n%s", got, w)
	}
	if f := v.Failed(); !strings.Contains(f.Detail, fx.ref.Manifest) {
		t.Errorf("detail %q does not name the recorded address", f.Detail)
	}

	// A feature tag change is drift at /features/0.
	fx.config = strings.Replace(baseConfig, "node:1", "node:2", 1)
	v = fx.decide()
	wantVerdict(t, v, 3, resume.ClassManifestMismatch, resume.CheckManifest)
	if len(v.Drift) != 1 || v.Drift[0].Pointer != "/features/0" || v.Drift[0].Recorded == nil || v.Drift[0].Offered == nil {
		t.Errorf("drift %s, want one entry at /features/0 with both sides", dump(v.Drift))
	}
}

func TestDecideHost(t *testing.T) {
	other := testHost()
	other.ID = "99999999-2222-3333-4444-555555555555"
	override := testHost()
	override.IDSource = snapshot.IDSourceOverride // same id string, one-sided --host-id

	t.Run("unpinned, another host", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		fx.facts.SetHost(other)
		v := fx.decide()
		wantVerdict(t, v, 4, resume.ClassUnpinnedCrossHost, resume.CheckHost)
		if d := v.Failed().Detail; !strings.Contains(d, other.ID) || !strings.Contains(d, testHostID) {
			t.Errorf("detail %q does not name both hosts", d)
		}
	})
	t.Run("one-sided host-id override is another host", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		fx.facts.SetHost(override)
		wantVerdict(t, fx.decide(), 4, resume.ClassUnpinnedCrossHost, resume.CheckHost)
	})
	t.Run("override on both sides is the same host", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		fx.facts.SetHost(override)
		fx.ref.Host = override
		wantVerdict(t, fx.decide(), 0, "", "")
	})
	t.Run("pinned, another host", func(t *testing.T) {
		fx := newPinnedFixture(t)
		fx.facts.SetHost(other)
		v := fx.decide()
		wantVerdict(t, v, 0, "", "")
		if d := v.Check(resume.CheckHost).Detail; !strings.Contains(d, "pinned") {
			t.Errorf("host detail %q does not say pinned", d)
		}
	})
}

// newPinnedFixture declares the image by digest and a feature by digest.
func newPinnedFixture(t *testing.T) *fixture {
	t.Helper()
	probe := newFixture(t, baseConfig)
	md := probe.ref.Base.ManifestDigest
	fd := digest.FromString("node feature").Encoded()
	cfg := `{"image": "busybox@` + md.String() + `",
		"features": {"ghcr.io/devcontainers/features/node@sha256:` + fd + `": {}}}`
	fx := newFixture(t, cfg)
	if !fx.ref.Pinned {
		t.Fatalf("fixture not pinned: %s", fx.ref.Core.Image)
	}
	return fx
}

func TestDecideImage(t *testing.T) {
	t.Run("platform mismatch", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		fx.ref.Base.Platform = "linux/arm64"
		v := fx.decide()
		wantVerdict(t, v, 5, resume.ClassImageUnresolved, resume.CheckImage)
		if !strings.Contains(v.Failed().Detail, "linux/arm64") {
			t.Errorf("detail %q does not name the platform", v.Failed().Detail)
		}
	})
	t.Run("name re-pointed to other content", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		desc, _ := putImage(t, fx.facts, ocispec.Platform{OS: "linux", Architecture: "amd64"}, "another layer")
		if err := fx.facts.SetImage("busybox:1", desc); err != nil {
			t.Fatal(err)
		}
		v := fx.decide()
		wantVerdict(t, v, 5, resume.ClassImageDrifted, resume.CheckImage)
		if d := v.Failed().Detail; !strings.Contains(d, desc.Digest.String()) || !strings.Contains(d, fx.ref.Base.ManifestDigest.String()) {
			t.Errorf("detail %q does not name both digests", d)
		}
	})
	t.Run("name re-pointed and the recorded content gone", func(t *testing.T) {
		// The order within check 8 (docs/design.md "Resume decision"):
		// presence of the recorded content before the name's resolution,
		// so this is unresolved, not drifted.
		fx := newFixture(t, baseConfig)
		desc, _ := putImage(t, fx.facts, ocispec.Platform{OS: "linux", Architecture: "amd64"}, "another layer")
		if err := fx.facts.SetImage("busybox:1", desc); err != nil {
			t.Fatal(err)
		}
		fx.facts.DeleteBlob(fx.layer)
		v := fx.decide()
		wantVerdict(t, v, 5, resume.ClassImageUnresolved, resume.CheckImage)
		if !strings.Contains(v.Failed().Detail, fx.layer.String()) {
			t.Errorf("detail %q does not name the missing layer", v.Failed().Detail)
		}
	})
	t.Run("name unknown", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		fx.config = strings.Replace(baseConfig, "busybox:1", "busybox:2", 1)
		// Record the ref as if suspended from busybox:2 with the same bytes.
		m, err := envmanifest.Ingest([]byte(fx.config), envmanifest.Options{Path: fx.configPath()})
		if err != nil {
			t.Fatal(err)
		}
		fx.ref.Core, fx.ref.Manifest = m.Core, m.Address
		fx.ref.Base.Name = "docker.io/library/busybox:2"
		wantVerdict(t, fx.decide(), 5, resume.ClassImageUnresolved, resume.CheckImage)
	})
	t.Run("layer missing", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		fx.facts.DeleteBlob(fx.layer)
		v := fx.decide()
		wantVerdict(t, v, 5, resume.ClassImageUnresolved, resume.CheckImage)
		if !strings.Contains(v.Failed().Detail, fx.layer.String()) {
			t.Errorf("detail %q does not name the missing layer", v.Failed().Detail)
		}
	})
	t.Run("pinned, manifest missing", func(t *testing.T) {
		fx := newPinnedFixture(t)
		fx.facts.DeleteBlob(fx.ref.Base.ManifestDigest)
		wantVerdict(t, fx.decide(), 5, resume.ClassImageUnresolved, resume.CheckImage)
	})
	t.Run("pinned, digest is not the recorded one", func(t *testing.T) {
		fx := newPinnedFixture(t)
		desc, _ := putImage(t, fx.facts, ocispec.Platform{OS: "linux", Architecture: "amd64"}, "another layer")
		base, err := fx.facts.ResolveImage(context.Background(), "busybox@"+desc.Digest.String())
		if err != nil {
			t.Fatal(err)
		}
		fx.ref.Base = base // the recorded base is other bytes than core.image names
		wantVerdict(t, fx.decide(), 5, resume.ClassImageDrifted, resume.CheckImage)
	})
}

func TestDecideSnapshot(t *testing.T) {
	fx := newFixture(t, baseConfig)
	fx.ref.Layers[0].Size++
	v := fx.decide()
	wantVerdict(t, v, 7, resume.ClassSnapshotMissing, resume.CheckSnapshot)
	fx.ref.Layers[0].Size--
	fx.facts.DeleteBlob(fx.ref.Layers[0].Digest)
	v = fx.decide()
	wantVerdict(t, v, 7, resume.ClassSnapshotMissing, resume.CheckSnapshot)
	if !strings.Contains(v.Failed().Detail, fx.ref.Layers[0].Digest.String()) {
		t.Errorf("detail %q does not name the diff", v.Failed().Detail)
	}
}

// failingFacts makes one fact fail with a daemon error.
type failingFacts struct {
	resume.Facts
	host, resolve, missing, blob error
}

func (f failingFacts) Host(ctx context.Context) (snapshot.Host, error) {
	if f.host != nil {
		return snapshot.Host{}, f.host
	}
	return f.Facts.Host(ctx)
}

func (f failingFacts) ResolveImage(ctx context.Context, ref string) (snapshot.Base, error) {
	if f.resolve != nil {
		return snapshot.Base{}, f.resolve
	}
	return f.Facts.ResolveImage(ctx, ref)
}

func (f failingFacts) MissingContent(ctx context.Context, d digest.Digest) ([]digest.Digest, error) {
	if f.missing != nil {
		return nil, f.missing
	}
	return f.Facts.MissingContent(ctx, d)
}

func (f failingFacts) BlobSize(ctx context.Context, d digest.Digest) (int64, error) {
	if f.blob != nil {
		return 0, f.blob
	}
	return f.Facts.BlobSize(ctx, d)
}

// failingLedger fails every call with a storage error.
type failingLedger struct {
	ledger.Ledger
	err error
}

func (l failingLedger) Get(context.Context, string) (ledger.Record, error) {
	return ledger.Record{}, l.err
}

func TestDecideInternal(t *testing.T) {
	unavailable := errors.New("connection refused: " + errdefs.ErrUnavailable.Error())
	fx := newFixture(t, baseConfig)
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		facts  resume.Facts
		ledger ledger.Ledger
		failAt string
	}{
		{"host", failingFacts{Facts: fx.facts, host: unavailable}, fx.ledger, resume.CheckHost},
		{"resolve", failingFacts{Facts: fx.facts, resolve: unavailable}, fx.ledger, resume.CheckImage},
		{"missing", failingFacts{Facts: fx.facts, missing: unavailable}, fx.ledger, resume.CheckImage},
		{"blob", failingFacts{Facts: fx.facts, blob: unavailable}, fx.ledger, resume.CheckSnapshot},
		{"ledger", fx.facts, failingLedger{err: errors.New("ledger /x/ledger.db: ledger file locked by another process")}, resume.CheckClaim},
		{"no ledger", fx.facts, nil, resume.CheckClaim},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := resume.Decide(ctx, tt.facts, tt.ledger, fx.request(fx.signed()))
			wantVerdict(t, v, exitcode.Internal, resume.ClassInternal, tt.failAt)
		})
	}
}

func TestLoadRequest(t *testing.T) {
	fx := newFixture(t, baseConfig)
	ref := fx.writeFile("ref.json", string(fx.signed()))
	cfg := fx.writeFile("devcontainer.json", fx.config)
	pub := fx.writeFile("trust.pub", pemPublic(t, fx.key))
	req, err := resume.LoadRequest(ref, cfg, "", pub)
	if err != nil {
		t.Fatal(err)
	}
	req.Copy = true // the fixture's generation was never recorded by its ledger
	wantVerdict(t, resume.Decide(context.Background(), fx.facts, fx.ledger, req), 0, "", "")
	for _, args := range [][4]string{
		{ref + ".missing", cfg, "", pub},
		{ref, cfg + ".missing", "", pub},
		{ref, cfg, "", pub + ".missing"},
		{ref, cfg, "", ref}, // not a public key
	} {
		_, err := resume.LoadRequest(args[0], args[1], args[2], args[3])
		var ie *resume.InputError
		if !errors.As(err, &ie) {
			t.Errorf("LoadRequest%v: %v, want an *InputError", args, err)
			continue
		}
		if !strings.Contains(err.Error(), ie.Path) {
			t.Errorf("error %q does not name %s", err, ie.Path)
		}
	}
	if _, err := os.Stat(ref); err != nil {
		t.Fatal(err)
	}
}
