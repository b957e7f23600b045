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

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// prevDir holds a run suspended and exported by the previous release
// (testdata/prev-release/README.md names the commit).
var prevDir = filepath.Join("testdata", "prev-release")

// prevBaseName is the base image of the previous release's run.
const prevBaseName = "example.test/prev/base:1"

// TestGeneratePrevReleaseFixtures writes testdata/prev-release with the
// previous release's CLI: SR_PREV_CLI names its binary (built from the
// commit testdata/prev-release/README.md names) and SR_PREV_OUT the
// directory to write. It is a generator, not a test: without SR_PREV_CLI
// it does nothing.
func TestGeneratePrevReleaseFixtures(t *testing.T) {
	old, out := os.Getenv("SR_PREV_CLI"), os.Getenv("SR_PREV_OUT")
	if old == "" || out == "" {
		t.Skip("a generator: set SR_PREV_CLI (the previous release's binary) and SR_PREV_OUT to regenerate testdata/prev-release")
	}
	d := harness.Start(t, "prevgen")
	im, err := testimage.Synthetic(testimage.HostPlatform(), "previous release base")
	if err != nil {
		t.Fatal(err)
	}
	d.Put(t, "", im)
	d.Tag(t, "", prevBaseName, im.Index)
	ctx := d.Context(t)
	img, err := d.Client.GetImage(ctx, prevBaseName)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatal(err)
	}
	cid := d.ID("prev-src")
	if _, err := d.Client.NewContainer(ctx, cid, client.WithImage(img), client.WithSnapshotter("overlayfs"),
		client.WithNewSnapshot(cid, img), client.WithNewSpec(oci.WithImageConfig(img))); err != nil {
		t.Fatal(err)
	}
	// The container's changes: a file added, one nested, the marker deleted.
	mounts, err := d.Client.SnapshotService("overlayfs").Mounts(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := mount.All(mounts, root); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"data.txt": "from the previous release\n", "var/prev/n.txt": "nested\n"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(root, testimage.MarkerPath)); err != nil {
		t.Fatal(err)
	}
	if err := mount.UnmountAll(root, 0); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	config := `{
	"image": "example.test/prev/base@` + im.Index.Digest.String() + `",
	"containerEnv": {"GREETING": "hello", "HOMEISH": "${localEnv:HOME}"},
	"mounts": ["type=volume,source=cache,target=/cache"]
}
`
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	pub, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
	if err != nil {
		t.Fatal(err)
	}
	ref, archive := filepath.Join(dir, "prev.ref.json"), filepath.Join(dir, "prev.tar")
	for _, args := range [][]string{
		{"suspend", "--container", cid, "--config", cfg, "--key", key, "--run", "prev-1", "--out", ref},
		{"export", "--ref", ref, "--out", archive, "--with-base"},
	} {
		cmd := exec.Command(old, append([]string{"--address", d.Address, "--namespace", d.Namespace}, args...)...)
		cmd.Env = append(os.Environ(), "SANDBOX_RESUME_HOST_ID=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", old, args[0], err, b)
		}
	}
	for src, dst := range map[string]string{cfg: "devcontainer.json", pub: "signer.pub", ref: "prev.ref.json", archive: "prev.tar"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPreviousReleaseResumes: a `/1` ref and the archive the previous
// release exported with its base (testdata/prev-release) import and resume
// on a fresh daemon: the import verifies the archive and writes the very
// ref file, names the base, and the run resumes as generation 1 into
// <run>-g2, created as the previous release created it (image config plus
// the containerEnv entries, under runc), its mounts and ${…} values in
// notApplied and the previous release's files in its tree.
func TestPreviousReleaseResumes(t *testing.T) {
	if p := testimage.HostPlatform(); p.OS != "linux" || p.Architecture != "amd64" {
		t.Skipf("the previous release's fixtures are linux/amd64, this host is %s/%s", p.OS, p.Architecture)
	}
	d := harness.Start(t, "prev")
	file := func(name string) string { return filepath.Join(prevDir, name) }
	refFile, err := os.ReadFile(file("prev.ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := snapshot.OpenRefUnsafe(refFile); err != nil || r.Schema != snapshot.RefSchemaV1 {
		t.Fatalf("the fixture is not a %s ref: %v", snapshot.RefSchemaV1, err)
	}

	imported := filepath.Join(t.TempDir(), "ref.json")
	var res struct {
		Run      string `json:"run"`
		BaseName struct {
			Name    string `json:"name"`
			Created bool   `json:"created"`
		} `json:"baseName"`
	}
	mustCLI(t, d, "", &res, "import", file("prev.tar"), "--trust", file("signer.pub"), "--out", imported)
	if got, _ := os.ReadFile(imported); !bytes.Equal(got, refFile) {
		t.Errorf("import --out wrote other bytes than the previous release's ref file")
	}
	if res.Run != "prev-1" || !res.BaseName.Created || !strings.HasPrefix(res.BaseName.Name, "example.test/prev/base@sha256:") {
		t.Errorf("import: %+v", res)
	}

	var ins map[string]any
	mustCLI(t, d, "", &ins, "inspect", "--trust", file("signer.pub"), file("prev.ref.json"))
	if ins["schema"] != snapshot.RefSchemaV1 || ins["generation"] != 1.0 || ins["verified"] != true || ins["spec"] != nil {
		t.Errorf("inspect: %v", ins)
	}

	r := &chainRun{d: d, run: "prev-1", ref: file("prev.ref.json"), cfg: file("devcontainer.json"), pub: file("signer.pub")}
	// The previous release recorded no ledger: its ref resumes as a copy.
	code, v := resumeChain(t, r, "--copy")
	if code != 0 {
		t.Fatalf("resume of the previous release's ref: exit %d: %s", code, failDetail(v))
	}
	id := resume.DefaultContainerID("prev-1", 1)
	if v.Container != id || v.Generation != 1 {
		t.Errorf("container %q generation %d, want %s and 1", v.Container, v.Generation, id)
	}
	if want := []string{"/containerEnv/HOMEISH", "/mounts/0"}; !slices.Equal(v.NotApplied, want) {
		t.Errorf("notApplied %v, want %v", v.NotApplied, want)
	}
	ctx := d.Context(t)
	c, err := d.Client.ContainerService().Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Process struct{ Env []string } `json:"process"`
		Linux   struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(c.Spec.GetValue(), &spec); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(spec.Process.Env, "GREETING=hello") || slices.ContainsFunc(spec.Process.Env, func(e string) bool { return strings.HasPrefix(e, "HOMEISH=") }) ||
		c.Runtime.Name != resume.DefaultRuntime || (c.Runtime.Options != nil && c.Runtime.Options.GetTypeUrl() != "") || spec.Linux.CgroupsPath != "/"+d.Namespace+"/"+id {
		t.Errorf("incarnation: env %v runtime %s %v cgroupsPath %q", spec.Process.Env, c.Runtime.Name, c.Runtime.Options, spec.Linux.CgroupsPath)
	}
	// Its tree: the previous release's changes over the base.
	mounts, err := d.Client.SnapshotService(c.Snapshotter).Mounts(ctx, c.SnapshotKey)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := mount.All(mounts, root); err != nil {
		t.Fatal(err)
	}
	defer mount.UnmountAll(root, 0)
	if b, err := os.ReadFile(filepath.Join(root, "data.txt")); err != nil || string(b) != "from the previous release\n" {
		t.Errorf("data.txt in the incarnation: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, testimage.MarkerPath)); !os.IsNotExist(err) {
		t.Errorf("the marker deleted before the suspend is back: %v", err)
	}

	// The run is live now: a second resume is 8.
	if code, v := resumeChain(t, r, "--container", "again"); code != 8 {
		t.Errorf("second resume: exit %d: %s", code, failDetail(v))
	}

	// Its next suspend writes a /3 generation 2 (docs/design.md
	// "SnapshotRef"): the /1 parent has no run UID, so one is minted, and
	// the ancestors start at that parent.
	_, key, err := envelope.WriteKeyPair(filepath.Join(t.TempDir(), "next"), false)
	if err != nil {
		t.Fatal(err)
	}
	g2 := filepath.Join(t.TempDir(), "g2.ref.json")
	mustCLI(t, d, "", nil, "suspend", "--container", id, "--config", file("devcontainer.json"), "--key", key, "--out", g2)
	b, err := os.ReadFile(g2)
	if err != nil {
		t.Fatal(err)
	}
	next, err := snapshot.OpenRefUnsafe(b)
	if err != nil || next.Schema != snapshot.RefSchemaV3 || next.Generation != 2 || next.Parent != digest.FromBytes(refFile) ||
		!snapshot.ValidRunUID(next.RunUID) || !slices.Equal(next.Ancestors, []digest.Digest{next.Parent}) {
		t.Fatalf("generation 2 after the /1 parent: %+v (err %v)", next, err)
	}
}
