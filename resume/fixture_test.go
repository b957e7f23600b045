package resume_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	lfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// testKey returns a fixed Ed25519 key derived from name, so refs are
// reproducible across runs.
func testKey(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("sandbox-resume resume test key " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

const (
	testImage    = "docker.io/library/busybox:1"
	testRun      = "demo-1"
	testRunUID   = "ruid:0123456789abcdef0123456789abcdef" // the fixture ref's run UID
	testHostID   = "11111111-2222-3333-4444-555555555555"
	testPlatform = "linux/amd64"
	baseConfig   = `{
	// the run's declaration at suspension
	"image": "busybox:1",
	"features": {"ghcr.io/devcontainers/features/node:1": {"version": "20"}},
	"containerEnv": {"LANG": "C.UTF-8", "A": "1"},
	"mounts": [{"source": "cache", "target": "/cache", "type": "volume"}],
	"remoteUser": "vscode",
}`
)

// fixture is one suspended run in a fake content store: an image
// (manifest, config, one layer) named testImage, a rootfs diff blob, a
// SnapshotRef recording them, signed with testKey("a").
type fixture struct {
	t      testing.TB
	facts  *memhost.Machine
	ledger *lfake.Ledger
	key    ed25519.PrivateKey
	trust  *envelope.KeyRing
	ref    snapshot.Ref
	dir    string // the config's folder
	config string // offered devcontainer.json text
	layer  digest.Digest
}

func testHost() snapshot.Host {
	return snapshot.Host{ID: testHostID, IDSource: snapshot.IDSourceIntrospection,
		ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: testPlatform}
}

// putImage stores an image manifest for platform with one layer whose
// content is layer and returns the manifest descriptor.
func putImage(t testing.TB, f *memhost.Machine, platform ocispec.Platform, layer string) (ocispec.Descriptor, digest.Digest) {
	t.Helper()
	layerDigest := f.PutBlob([]byte(layer))
	cfg := ocispec.Image{
		Platform: platform,
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromString("diffid " + layer)}},
	}
	cb, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cd := f.PutBlob(cb)
	m := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: cd, Size: int64(len(cb))},
		Layers:    []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: layerDigest, Size: int64(len(layer))}},
	}
	mb, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	md := f.PutBlob(mb)
	return ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: md, Size: int64(len(mb))}, layerDigest
}

// newFixture suspends a run declared by config (JSONC) into a fresh memhost.
func newFixture(t testing.TB, config string) *fixture {
	t.Helper()
	facts := memhost.New(testHost())
	fx := &fixture{
		t:      t,
		facts:  facts,
		ledger: lfake.New(),
		key:    testKey("a"),
		dir:    t.TempDir(),
		config: config,
	}
	fx.trust = envelope.NewKeyRing(fx.key.Public().(ed25519.PublicKey))
	desc, layer := putImage(t, facts, ocispec.Platform{OS: "linux", Architecture: "amd64"}, "base layer")
	fx.layer = layer
	if err := facts.SetImage(testImage, desc); err != nil {
		t.Fatal(err)
	}
	m, err := envmanifest.Ingest([]byte(config), envmanifest.Options{Path: fx.configPath()})
	if err != nil {
		t.Fatalf("ingest the suspension config: %v", err)
	}
	ctx := context.Background()
	base, err := facts.ResolveImage(ctx, testImage)
	if err != nil {
		t.Fatal(err)
	}
	diff := []byte("zstd rootfs diff of " + testRun)
	spec := []byte(`{"ociVersion":"1.2.0","process":{"args":["/bin/sh"],"cwd":"/"},"root":{"path":"rootfs"},"linux":{"namespaces":[{"type":"pid"},{"type":"network"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]}}`)
	fx.ref = snapshot.Ref{
		Schema:     snapshot.RefSchema,
		Run:        testRun,
		RunUID:     testRunUID,
		Generation: 1,
		Manifest:   m.Address,
		Core:       m.Core,
		Pinned:     m.Core.IsPinned(),
		Policy:     []string{},
		Host:       testHost(),
		Base:       base,
		Layers: []snapshot.Layer{{
			MediaType:        ocispec.MediaTypeImageLayerZstd,
			Digest:           facts.PutBlob(diff),
			Size:             int64(len(diff)),
			DiffID:           digest.FromString("uncompressed diff"),
			UncompressedSize: 4096,
		}},
		Spec:    &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: facts.PutBlob(spec), Size: int64(len(spec))},
		Runtime: &snapshot.Runtime{Name: "io.containerd.runc.v2"},
		Created: "2026-11-30T17:00:00Z",
	}
	return fx
}

// v1 turns fx.ref into a `/1` ref: one layer, no spec, no runtime.
func (fx *fixture) v1() {
	fx.ref.Schema, fx.ref.Spec, fx.ref.Runtime, fx.ref.RunUID = snapshot.RefSchemaV1, nil, nil, ""
}

// setSpec stores spec as the recorded spec blob and records it in fx.ref.
func (fx *fixture) setSpec(spec string) {
	fx.ref.Spec = &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: fx.facts.PutBlob([]byte(spec)), Size: int64(len(spec))}
}

func (fx *fixture) configPath() string { return filepath.Join(fx.dir, "devcontainer.json") }

// signed returns the ref file of fx.ref signed with fx.key.
func (fx *fixture) signed() []byte {
	fx.t.Helper()
	b, err := snapshot.SignRef(&fx.ref, fx.key)
	if err != nil {
		fx.t.Fatal(err)
	}
	return b
}

// request offers fx.config with the ref file refFile.
func (fx *fixture) request(refFile []byte) resume.Request {
	return resume.Request{
		RefFile:    refFile,
		RefSource:  "ref.json",
		Config:     []byte(fx.config),
		ConfigPath: fx.configPath(),
		Trust:      fx.trust,
		// The fixture's generations are signed here, not suspended through
		// its ledger: a resume of one is a copy (docs/design.md "Exactly
		// once across hosts", not-handed-off). TestClaimCheckOutcomes sets
		// Copy per case.
		Copy: true,
	}
}

// decide signs fx.ref and decides with fx's facts and ledger.
func (fx *fixture) decide() *resume.Verdict {
	fx.t.Helper()
	return resume.Decide(context.Background(), fx.facts, fx.ledger, fx.request(fx.signed()))
}

// writeFile writes a file into the config's folder.
func (fx *fixture) writeFile(name, content string) string {
	fx.t.Helper()
	p := filepath.Join(fx.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		fx.t.Fatal(err)
	}
	return p
}

// wantVerdict asserts the exit code, the class, and the check results:
// every check before failAt passes, failAt fails, the rest are skipped
// (failAt "" means all pass).
func wantVerdict(t *testing.T, v *resume.Verdict, code int, class resume.Class, failAt string) {
	t.Helper()
	if v.ExitCode != code || v.Class != class || v.Accepted != (failAt == "") {
		t.Errorf("verdict: exit %d class %q accepted %t, want exit %d class %q accepted %t\n%s",
			v.ExitCode, v.Class, v.Accepted, code, class, failAt == "", dump(v))
	}
	if len(v.Checks) != len(resume.CheckNames) {
		t.Fatalf("%d checks, want %d", len(v.Checks), len(resume.CheckNames))
	}
	state := resume.ResultPass
	for i, c := range v.Checks {
		if c.Name != resume.CheckNames[i] {
			t.Errorf("check %d is %q, want %q", i, c.Name, resume.CheckNames[i])
		}
		want := state
		if c.Name == failAt {
			want = resume.ResultFail
			state = resume.ResultSkipped
		}
		if c.Result != want {
			t.Errorf("check %s: %s (%s), want %s", c.Name, c.Result, c.Detail, want)
		}
		if c.Detail == "" {
			t.Errorf("check %s has no detail", c.Name)
		}
	}
}

func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
