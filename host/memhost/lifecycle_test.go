package memhost_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	lfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// TestLifecycleAcrossHosts follows one run through every consumer of the
// seam on in-memory hosts only: suspend on host A (generation 1), export
// with its base, import on host B (another host, another ledger; the run
// is pinned, so it may move), resume there as a copy with --start, the
// workload's edits, and suspend of the incarnation (generation 2, chained
// to generation 1), whose layers give the edited files.
func TestLifecycleAcrossHosts(t *testing.T) {
	ctx := context.Background()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	trust := envelope.NewKeyRing(key.Public().(ed25519.PublicKey))
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "devcontainer.json")
	newHost := func(id string) *memhost.Machine {
		return memhost.New(snapshot.Host{ID: id, IDSource: snapshot.IDSourceIntrospection,
			ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: "linux/amd64"})
	}

	// Host A: the base image as real blobs and the runtime's container.
	a := newHost("aaaaaaaa-0000-4000-8000-000000000001")
	layer := []byte("base layer")
	cfg, _ := json.Marshal(ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: "amd64"},
		Config: ocispec.ImageConfig{Env: []string{"PATH=/bin"}, Cmd: []string{"/bin/sh"}},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(layer)}}})
	mf, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: a.PutBlob(cfg), Size: int64(len(cfg))},
		Layers: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: a.PutBlob(layer), Size: int64(len(layer))}}})
	if err := a.SetImage("docker.io/library/busybox:1", ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest,
		Digest: a.PutBlob(mf), Size: int64(len(mf))}); err != nil {
		t.Fatal(err)
	}
	// The declaration pins the image (a run moves only when pinned).
	config := []byte(`{"image": "busybox:1@` + digest.FromBytes(mf).String() + `", "name": "lifecycle"}`)
	if err := os.WriteFile(cfgPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"work/notes.txt": []byte("generation one\n"), "work/keep.txt": []byte("kept\n")}
	// Its spec keeps containerd's five default namespaces: a spec recorded
	// on another host without them is refused (check 10).
	spec := []byte(`{"ociVersion":"1.2.0","process":{"args":["/bin/sh"],"cwd":"/","env":["PATH=/bin"],"user":{"uid":0,"gid":0}},` +
		`"root":{"path":"rootfs"},"hostname":"box-1","linux":{"namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network"}]}}`)
	a.AddContainer(memhost.Container{ID: "box-1", Image: "docker.io/library/busybox:1", Task: snapshot.TaskRunning, Files: files, Spec: spec})

	la := lfake.New()
	g1, err := suspend.Run(ctx, a, la, suspend.Request{ContainerID: "box-1", ConfigPath: cfgPath, Run: "life-1",
		Keys: []crypto.Signer{key}, Out: filepath.Join(dir, "g1.ref.json")})
	if err != nil {
		t.Fatalf("suspend on A: %v", err)
	}
	if g1.Ref.Generation != 1 || len(g1.Ref.Layers) != 1 {
		t.Fatalf("generation 1: %+v", g1.Ref)
	}

	// Export from A with the base; import on B.
	var archive bytes.Buffer
	if _, err := migrate.Export(ctx, a, g1.File, &archive, true); err != nil {
		t.Fatalf("export from A: %v", err)
	}
	b := newHost("bbbbbbbb-0000-4000-8000-000000000002")
	imp, err := migrate.Import(ctx, b, bytes.NewReader(archive.Bytes()), trust)
	if err != nil {
		t.Fatalf("import on B: %v", err)
	}
	if imp.Run != "life-1" || imp.BaseName == nil || !imp.BaseName.Created {
		t.Fatalf("import: run %q, base name %+v", imp.Run, imp.BaseName)
	}

	// Resume on B with its own ledger.
	lb := lfake.New()
	b.SetResumerAlive(func(pid int, _, _ string) bool { return pid == os.Getpid() })
	// B's ledger never recorded the run and no handoff exists: B resumes a
	// copy (--copy), which the source could still resume too.
	req := resume.Request{RefFile: g1.File, RefSource: "g1.ref.json", Config: config, ConfigPath: cfgPath, Trust: trust, Copy: true}
	v := resume.Resume(ctx, b, lb, b, req, resume.ResumeOptions{Start: true})
	if v.ExitCode != 0 {
		t.Fatalf("resume on B: exit %d, class %s: %+v", v.ExitCode, v.Class, v.Checks)
	}
	inc := v.Container
	got, err := b.Files(inc)
	if err != nil || !maps.EqualFunc(got, files, bytes.Equal) {
		t.Fatalf("incarnation %s on B holds %v (%v), want generation 1's files", inc, got, err)
	}

	// The workload works on B; suspend generation 2 there.
	edited := maps.Clone(files)
	edited["work/notes.txt"] = []byte("generation two\n")
	delete(edited, "work/keep.txt")
	edited["work/new.txt"] = []byte("new on B\n")
	if err := b.EditFiles(inc, func(f map[string][]byte) { clear(f); maps.Copy(f, edited) }); err != nil {
		t.Fatal(err)
	}
	g2, err := suspend.Run(ctx, b, lb, suspend.Request{ContainerID: inc, ConfigPath: cfgPath, Run: "life-1",
		Keys: []crypto.Signer{key}, Out: filepath.Join(dir, "g2.ref.json")})
	if err != nil {
		t.Fatalf("suspend generation 2 on B: %v", err)
	}
	ref, err := snapshot.OpenRef(g2.File, trust)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Generation != 2 || ref.Parent != g1.RefBlob || ref.Host.ID != "bbbbbbbb-0000-4000-8000-000000000002" ||
		len(ref.Layers) != 2 || ref.Layers[0] != g1.Ref.Layers[0] {
		t.Fatalf("generation 2: generation %d parent %s (want %s) host %s layers %d", ref.Generation, ref.Parent, g1.RefBlob, ref.Host.ID, len(ref.Layers))
	}
	tree, err := b.Tree(ref.Layers)
	if err != nil || !maps.EqualFunc(tree, edited, bytes.Equal) {
		t.Fatalf("generation 2's layers give %v (%v), want %v", tree, err, edited)
	}
}
