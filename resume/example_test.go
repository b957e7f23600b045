package resume_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	lfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Decide whether a suspended run may resume, over the in-memory host
// host/memhost (runtime/containerd gives the same facts from a daemon, and
// a ledger the claims). The run was suspended with a declaration whose
// SnapshotRef is signed by a trusted key; offering the same declaration is
// accepted (written differently: the address is what counts), offering
// one that changes the environment is refused with the drift, and so is a
// ref nobody trusted signed.
func ExampleDecide() {
	ctx := context.Background()
	host := snapshot.Host{ID: "11111111-2222-3333-4444-555555555555", IDSource: snapshot.IDSourceIntrospection,
		ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: "linux/amd64"}
	facts := memhost.New(host)
	// The base image in the content store: one layer, its config, its manifest.
	layer := []byte("base layer")
	cfg, _ := json.Marshal(ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: "amd64"},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(layer)}}})
	mf, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: facts.PutBlob(cfg), Size: int64(len(cfg))},
		Layers: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: facts.PutBlob(layer), Size: int64(len(layer))}}})
	err := facts.SetImage("docker.io/library/busybox:1", ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: facts.PutBlob(mf), Size: int64(len(mf))})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The suspension: the declaration's manifest, the base resolved, the
	// rootfs diff stored, the SnapshotRef signed.
	const config = `{"image": "busybox:1", "containerEnv": {"LANG": "C.UTF-8"}, "remoteUser": "vscode"}`
	const path = "/work/demo/.devcontainer/devcontainer.json" // for lockfile discovery only; never read
	m, err := envmanifest.Ingest([]byte(config), envmanifest.Options{Path: path})
	if err != nil {
		fmt.Println(err)
		return
	}
	base, err := facts.ResolveImage(ctx, "busybox:1")
	if err != nil {
		fmt.Println(err)
		return
	}
	diff := []byte("the run's rootfs diff (zstd)")
	spec := []byte(`{"ociVersion":"1.2.0","process":{"args":["sh"],"cwd":"/"},"root":{"path":"rootfs"},"linux":{"namespaces":[{"type":"pid"},{"type":"network"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]}}`)
	ref := snapshot.Ref{Schema: snapshot.RefSchema, Run: "demo-1", RunUID: "ruid:0123456789abcdef0123456789abcdef", Generation: 1, Manifest: m.Address, Core: m.Core, Pinned: m.IsPinned(),
		Policy: []string{}, Host: host, Base: base, Created: "2026-11-30T17:00:00Z",
		Layers: []snapshot.Layer{{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: facts.PutBlob(diff), Size: int64(len(diff)),
			DiffID: digest.FromString("the uncompressed tar"), UncompressedSize: 4096}},
		Spec:    &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: facts.PutBlob(spec), Size: int64(len(spec))},
		Runtime: &snapshot.Runtime{Name: "io.containerd.runc.v2"}}
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	refFile, err := snapshot.SignRef(&ref, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	trust := envelope.NewKeyRing(key.Public().(ed25519.PublicKey))

	decide := func(offered string, trust *envelope.KeyRing) {
		// The ref was signed here, not suspended through this (empty)
		// ledger: it is resumed as a copy.
		v := resume.Decide(ctx, facts, lfake.New(), resume.Request{
			RefFile: refFile, RefSource: "demo-1.ref.json", Config: []byte(offered), ConfigPath: path, Trust: trust, Copy: true})
		fmt.Printf("accepted %t, class %q, exit %d\n", v.Accepted, v.Class, v.ExitCode)
		for _, c := range v.Checks {
			if c.Result == resume.ResultFail { // the checks after it are skipped
				fmt.Printf("  check %s failed\n", c.Name)
			}
		}
		for _, d := range v.Drift {
			fmt.Printf("  drift %s: %s -> %s\n", d.Pointer, d.Recorded, d.Offered)
		}
	}
	decide(`{
		// the same declaration, written differently
		"remoteUser": "vscode",
		"containerEnv": {"LANG": "C.UTF-8"},
		"image": "docker.io/library/busybox:1",
	}`, trust)
	decide(`{"image": "busybox:1", "containerEnv": {"LANG": "C"}, "remoteUser": "vscode"}`, trust)
	decide(config, envelope.NewKeyRing())
	// Output:
	// accepted true, class "", exit 0
	// accepted false, class "manifest-mismatch", exit 3
	//   check manifest failed
	//   drift /containerEnv/LANG: "C.UTF-8" -> "C"
	// accepted false, class "untrusted", exit 6
	//   check signature failed
}
