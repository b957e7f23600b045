package integration

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// These tests move runs between daemons as OCI artifacts (docs/design.md "Moving
// runs"): archives (export/import), a registry on 127.0.0.1 (push/pull),
// the interop commands, and hostile archives.

// diffLayer builds a real rootfs diff: a tar holding files, compressed with
// zstd, and returns the blob and its ref description.
func diffLayer(t testing.TB, files map[string]string) ([]byte, snapshot.Layer) {
	t.Helper()
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, name := range []string{"data.txt", "var/sr/n.txt"} {
		body, ok := files[name]
		if !ok {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var blob bytes.Buffer
	zw, err := compression.CompressStream(&blob, compression.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(tarBuf.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return blob.Bytes(), snapshot.Layer{
		MediaType: ocispec.MediaTypeImageLayerZstd,
		Digest:    digest.FromBytes(blob.Bytes()), Size: int64(blob.Len()),
		DiffID: digest.FromBytes(tarBuf.Bytes()), UncompressedSize: int64(tarBuf.Len()),
	}
}

// suspendReal is suspend (resume_test.go) with a real zstd tar diff in
// place of the placeholder blob, so the receiving side's diffID check runs
// on real content; edit changes the diff record before signing.
func suspendReal(t testing.TB, d *harness.Daemon, config string, edit func(*snapshot.Layer)) *suspended {
	t.Helper()
	s := suspend(t, d, config)
	blob, diff := diffLayer(t, map[string]string{"data.txt": "hello-from-" + d.Name + "\n", "var/sr/n.txt": "nested\n"})
	if edit != nil {
		edit(&diff)
	}
	s.diff, s.ref.Layers[0] = blob, diff
	writeDiff(t, d, d.Namespace, s.ref.Run, blob)
	s.sign(t)
	return s
}

func pinnedConfig(bb harness.BusyboxImage) string {
	return `{"image": "busybox@` + bb.Index.String() + `",
		"features": {"ghcr.io/devcontainers/features/node@sha256:` + digest.FromString("node").Encoded() + `": {}}}`
}

// srcli runs the CLI against daemon d in namespace ns with --output json
// and returns the exit code, stdout and stderr.
func srcli(t testing.TB, d *harness.Daemon, ns string, args ...string) (int, []byte, string) {
	t.Helper()
	return srcliEnv(t, d, ns, nil, args...)
}

// srcliEnv is srcli with env ("NAME=value") added to the environment.
func srcliEnv(t testing.TB, d *harness.Daemon, ns string, env []string, args ...string) (int, []byte, string) {
	t.Helper()
	if ns == "" {
		ns = d.Namespace
	}
	full := append([]string{"--address", d.Address, "--namespace", ns, "--output", "json"}, args...)
	cmd := exec.Command(cli(t), full...)
	cmd.Env = cliEnv(full, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.Bytes(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stdout.Bytes(), stderr.String()
}

// mustCLI runs srcli and fails unless it exits 0; it decodes stdout into
// out when out is not nil.
func mustCLI(t testing.TB, d *harness.Daemon, ns string, out any, args ...string) {
	t.Helper()
	code, stdout, stderr := srcli(t, d, ns, args...)
	if code != 0 {
		t.Fatalf("sandbox-resume %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
	}
	if out != nil {
		if err := json.Unmarshal(stdout, out); err != nil {
			t.Fatalf("sandbox-resume %s: stdout is not JSON: %v\n%s", args[0], err, stdout)
		}
	}
}

// withRef returns a copy of s whose ref file is path (as written on
// another host).
func withRef(s *suspended, path string) *suspended {
	c := *s
	c.refPath = path
	return &c
}

func TestMoveArchiveTwoHosts(t *testing.T) {
	a := harness.Start(t, "mva")
	b := harness.Start(t, "mvb")
	bb := harness.ImportBusybox(t, a, "busybox:1")
	pinned := pinnedConfig(bb)
	s := suspendReal(t, a, pinned, nil)
	dir := t.TempDir()

	run := filepath.Join(dir, "run.tar")
	var exp migrate.ExportResult
	mustCLI(t, a, "", &exp, "export", "--ref", s.refPath, "--out", run)
	if exp.Run != s.ref.Run || exp.Artifact.ArtifactType != migrate.ArtifactType || len(exp.Base) != 0 {
		t.Errorf("export result %+v", exp)
	}
	withBase := filepath.Join(dir, "run-base.tar")
	var expB migrate.ExportResult
	mustCLI(t, a, "", &expB, "export", "--ref", s.refPath, "--out", withBase, "--with-base")
	if len(expB.Base) != 1 || expB.Base[0] != bb.Index.String() {
		t.Errorf("--with-base shipped %v, want the complete index %s", expB.Base, bb.Index)
	}
	if expB.Artifact.Digest != exp.Artifact.Digest {
		t.Errorf("the same ref gave two artifact digests: %s, %s", exp.Artifact.Digest, expB.Artifact.Digest)
	}
	if fi, err := os.Stat(run); err != nil || fi.Size() != exp.Size {
		t.Errorf("archive %s: %v, size %d, reported %d", run, err, fi.Size(), exp.Size)
	}

	// Import on b without the base: the run is there, the base is not: 5.
	got := filepath.Join(dir, "b.ref.json")
	var imp migrate.ImportResult
	mustCLI(t, b, "", &imp, "import", run, "--trust", s.pub, "--out", got)
	if imp.Run != s.ref.Run || imp.Artifact.Digest != exp.Artifact.Digest || imp.Lease != snapshot.RunLease(s.ref.Run) {
		t.Errorf("import result %+v", imp)
	}
	want, _ := os.ReadFile(s.refPath)
	if b2, _ := os.ReadFile(got); !bytes.Equal(b2, want) {
		t.Errorf("imported ref file differs from the exported one")
	}
	rb := b.Connect(t, "")
	for _, dg := range []digest.Digest{s.ref.Layers[0].Digest, exp.Artifact.Digest, digest.FromBytes(want)} {
		if held, err := rb.LeaseHolds(ctx(t), imp.Lease, dg); err != nil || !held {
			t.Errorf("run lease on b does not hold %s (%v)", dg, err)
		}
	}
	code, v := check(t, b, "", withRef(s, got), pinned)
	wantRefused(t, code, v, 5, resume.ClassImageUnresolved, resume.CheckImage)

	// The archive with the base: accepted on b.
	mustCLI(t, b, "", nil, "import", withBase, "--trust", s.pub, "--out", got)
	code, v = check(t, b, "", withRef(s, got), pinned)
	wantRefused(t, code, v, 0, "", "")

	t.Run("unpinned", func(t *testing.T) {
		s := suspendReal(t, a, suspendedConfig, nil)
		tarPath := filepath.Join(t.TempDir(), "unpinned.tar")
		mustCLI(t, a, "", nil, "export", "--ref", s.refPath, "--out", tarPath, "--with-base")
		ns := b.NewNamespace()
		refOut := filepath.Join(t.TempDir(), "ref.json")
		mustCLI(t, b, ns, nil, "import", tarPath, "--trust", s.pub, "--out", refOut)
		code, v := check(t, b, ns, withRef(s, refOut), suspendedConfig)
		wantRefused(t, code, v, 4, resume.ClassUnpinnedCrossHost, resume.CheckHost)
	})
	t.Run("untrusted", func(t *testing.T) {
		other := suspendReal(t, a, pinned, nil) // a fresh signer key
		refOut := filepath.Join(t.TempDir(), "ref.json")
		code, stdout, _ := srcli(t, b, b.NewNamespace(), "import", run, "--trust", other.pub, "--out", refOut)
		if code != 6 {
			t.Errorf("import with another key trusted: exit %d, want 6: %s", code, stdout)
		}
		if _, err := os.Stat(refOut); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("untrusted import wrote %s", refOut)
		}
	})
	t.Run("export errors", func(t *testing.T) {
		ns := a.NewNamespace() // no base, no diff here
		code, _, _ := srcli(t, a, ns, "export", "--ref", s.refPath, "--out", filepath.Join(t.TempDir(), "x.tar"))
		if code != 7 {
			t.Errorf("export without the diff: exit %d, want 7", code)
		}
		writeDiff(t, a, ns, s.ref.Run, s.diff)
		out := filepath.Join(t.TempDir(), "x.tar")
		code, _, _ = srcli(t, a, ns, "export", "--ref", s.refPath, "--out", out)
		if code != 5 {
			t.Errorf("export without the base: exit %d, want 5", code)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("failed export left %s", out)
		}
	})
}

// tags returns the tags of repo in the registry.
func tags(t testing.TB, reg *harness.Registry, repo string) []string {
	t.Helper()
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Get("http://" + reg.Host + "/v2/" + repo + "/tags/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tl struct {
		Tags []string `json:"tags"`
	}
	json.NewDecoder(resp.Body).Decode(&tl)
	return tl.Tags
}

func TestMovePushPull(t *testing.T) {
	a := harness.Start(t, "mpa")
	c := harness.Start(t, "mpc")
	reg := harness.StartRegistry(t)
	bb := harness.ImportBusybox(t, a, "busybox:1")
	pinned := pinnedConfig(bb)
	s := suspendReal(t, a, pinned, nil)
	target := reg.Host + "/runs/demo:" + s.ref.Run

	var pr migrate.PushResult
	mustCLI(t, a, "", &pr, "push", "--plain-http", "--ref", s.refPath, target)
	if len(pr.Base) != 2 || pr.Base[0] != bb.Manifest.String() || pr.Base[1] != bb.Index.String() {
		t.Errorf("pushed base %v, want manifest %s then index %s", pr.Base, bb.Manifest, bb.Index)
	}
	if got := tags(t, reg, "runs/demo"); len(got) != 1 || got[0] != s.ref.Run {
		t.Errorf("tags of runs/demo: %v, want only %q (the base goes by digest)", got, s.ref.Run)
	}

	// Pull on c: the base is missing, so it comes by digest.
	refOut := filepath.Join(t.TempDir(), "c.ref.json")
	var pl migrate.PullResult
	mustCLI(t, c, "", &pl, "pull", "--plain-http", "--trust", s.pub, target, "--out", refOut)
	if want := reg.Host + "/runs/demo@" + bb.Manifest.String(); pl.BaseFrom != want {
		t.Errorf("base pulled from %q, want %q", pl.BaseFrom, want)
	}
	if pl.Artifact.Digest != pr.Artifact.Digest {
		t.Errorf("pulled artifact %s, pushed %s", pl.Artifact.Digest, pr.Artifact.Digest)
	}
	code, v := check(t, c, "", withRef(s, refOut), pinned)
	wantRefused(t, code, v, 0, "", "")

	// A second pull finds the base and fetches nothing for it.
	pl = migrate.PullResult{}
	mustCLI(t, c, "", &pl, "pull", "--plain-http", "--trust", s.pub, target, "--out", refOut)
	if pl.BaseFrom != "" {
		t.Errorf("second pull fetched the base again from %s", pl.BaseFrom)
	}

	t.Run("new resolver per push", func(t *testing.T) {
		// Two pushes of the same content to two repositories in one process:
		// a reused resolver would skip the second (notes/derisk.md step 4).
		ra := a.Connect(t, "")
		file, _ := os.ReadFile(s.refPath)
		for _, repo := range []string{"runs/one", "runs/two"} {
			ref, err := migrate.ParseRemoteRef(reg.Host+"/"+repo+":"+s.ref.Run, false)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := migrate.Push(ctx(t), ra, ra.Registry(plainTransport(t)), file, ref); err != nil {
				t.Fatal(err)
			}
			if got := tags(t, reg, repo); len(got) != 1 {
				t.Errorf("tags of %s after push: %v", repo, got)
			}
		}
	})
	t.Run("base absent until pulled by digest", func(t *testing.T) {
		ns := c.NewNamespace()
		// Put only the artifact here (an import of the archive without base):
		// check says 5; a pull then fetches the base by digest: accepted.
		tarPath := filepath.Join(t.TempDir(), "run.tar")
		mustCLI(t, a, "", nil, "export", "--ref", s.refPath, "--out", tarPath)
		out := filepath.Join(t.TempDir(), "ref.json")
		mustCLI(t, c, ns, nil, "import", tarPath, "--trust", s.pub, "--out", out)
		code, v := check(t, c, ns, withRef(s, out), pinned)
		wantRefused(t, code, v, 5, resume.ClassImageUnresolved, resume.CheckImage)
		pl = migrate.PullResult{}
		mustCLI(t, c, ns, &pl, "pull", "--plain-http", "--trust", s.pub, target, "--out", out)
		if pl.BaseFrom == "" {
			t.Errorf("pull did not fetch the missing base")
		}
		code, v = check(t, c, ns, withRef(s, out), pinned)
		wantRefused(t, code, v, 0, "", "")
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"push", "--plain-http", "--ref", s.refPath, "registry.example.com/runs/demo:x"},
			{"pull", "--plain-http", "--trust", s.pub, "registry.example.com/runs/demo:x", "--out", filepath.Join(t.TempDir(), "r.json")},
			{"pull", "--plain-http", "--trust", s.pub, reg.Host + "/runs/demo", "--out", filepath.Join(t.TempDir(), "r.json")},                     // no tag, no --run
			{"pull", "--plain-http", "--trust", s.pub, target, "--run", s.ref.Run, "--out", filepath.Join(t.TempDir(), "r.json")},                  // a tag and --run
			{"pull", "--plain-http", "--trust", s.pub, reg.Host + "/runs/demo", "--run", "Bad_Run", "--out", filepath.Join(t.TempDir(), "r.json")}, // not a run id
			{"push", "--ref", s.refPath, reg.Host + "/runs/demo@sha256:" + strings.Repeat("a", 64)},                                                // a digest
		} {
			if code, _, _ := srcli(t, c, "", args...); code != 64 {
				t.Errorf("%v: exit %d, want 64", args, code)
			}
		}
	})
	t.Run("untrusted pull", func(t *testing.T) {
		other := suspendReal(t, a, pinned, nil)
		out := filepath.Join(t.TempDir(), "r.json")
		ns := c.NewNamespace()
		if code, stdout, _ := srcli(t, c, ns, "pull", "--plain-http", "--trust", other.pub, target, "--out", out); code != 6 {
			t.Errorf("pull with another key trusted: exit %d, want 6: %s", code, stdout)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("untrusted pull wrote %s", out)
		}
		if n := countBlobs(t, c, ns); n != 0 {
			t.Errorf("untrusted pull stored %d blobs", n)
		}
	})
}

func TestMoveInterop(t *testing.T) {
	a := harness.Start(t, "mia")
	bb := harness.ImportBusybox(t, a, "busybox:1")
	s := suspendReal(t, a, pinnedConfig(bb), nil)
	dir := t.TempDir()
	run := filepath.Join(dir, "run.tar")
	var exp migrate.ExportResult
	mustCLI(t, a, "", &exp, "export", "--ref", s.refPath, "--out", run)

	skopeo := testenv.LookPath(t, "skopeo", "make deps installs it")
	out, err := exec.Command(skopeo, "inspect", "--raw", "oci-archive:"+run).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo inspect --raw: %v\n%s", err, out)
	}
	if digest.FromBytes(bytes.TrimSpace(out)) != exp.Artifact.Digest && digest.FromBytes(out) != exp.Artifact.Digest {
		t.Errorf("skopeo inspect --raw returned bytes with another digest than %s:\n%s", exp.Artifact.Digest, out)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(out, &m); err != nil || m.ArtifactType != migrate.ArtifactType || m.Config.MediaType != snapshot.MediaTypeRef ||
		len(m.Layers) != 2 || m.Layers[0].Digest != s.ref.Layers[0].Digest || m.Layers[1].Digest != s.ref.Spec.Digest ||
		m.Layers[1].MediaType != snapshot.MediaTypeSpec || m.Subject == nil || m.Subject.Digest != bb.Manifest ||
		m.Annotations[migrate.AnnotationRun] != s.ref.Run || m.Annotations[ocispec.AnnotationCreated] != s.ref.Created {
		t.Errorf("artifact manifest (%v): %s", err, out)
	}

	layout := filepath.Join(dir, "layout")
	if out, err := exec.Command("skopeo", "copy", "oci-archive:"+run, "oci:"+layout).CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy: %v\n%s", err, out)
	}
	for _, d := range []digest.Digest{exp.Artifact.Digest, s.ref.Layers[0].Digest, s.ref.Spec.Digest} {
		b, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", d.Encoded()))
		if err != nil || digest.FromBytes(b) != d {
			t.Errorf("skopeo's copy lacks blob %s (%v)", d, err)
		}
	}

	ctr := filepath.Join(harness.Binaries(t), "ctr")
	ns := a.NewNamespace()
	if out, err := exec.Command(ctr, "-a", a.Address, "-n", ns, "images", "import", "--no-unpack", run).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import --no-unpack: %v\n%s", err, out)
	}
	out, err = exec.Command(ctr, "-a", a.Address, "-n", ns, "images", "ls").CombinedOutput()
	if err != nil || !strings.Contains(string(out), migrate.ArtifactImageName(s.ref.Run)) || !strings.Contains(string(out), exp.Artifact.Digest.String()) {
		t.Errorf("ctr images ls after import (%v):\n%s", err, out)
	}
}

// entry is one tar entry of an archive being edited.
type entry struct {
	hdr  tar.Header
	data []byte
}

func readEntries(t testing.TB, path string) []entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []entry
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out = append(out, entry{*h, b})
	}
}

func writeEntries(t testing.TB, path string, es []entry) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := e.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.data)
	}
	tw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func blobName(d digest.Digest) string { return "blobs/sha256/" + d.Encoded() }

func find(es []entry, name string) int {
	for i, e := range es {
		if e.hdr.Name == name {
			return i
		}
	}
	return -1
}

// replaceManifest rewrites the artifact manifest with edit, renames its
// blob and re-points index.json, so the archive is consistent except for
// what edit changed.
func replaceManifest(t testing.TB, es []entry, old digest.Digest, edit func(*ocispec.Manifest)) []entry {
	t.Helper()
	i := find(es, blobName(old))
	var m ocispec.Manifest
	if err := json.Unmarshal(es[i].data, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	body, _ := json.Marshal(&m)
	nd := digest.FromBytes(body)
	es[i].data, es[i].hdr.Name = body, blobName(nd)
	j := find(es, "index.json")
	var idx ocispec.Index
	json.Unmarshal(es[j].data, &idx)
	for k := range idx.Manifests {
		if idx.Manifests[k].Digest == old {
			idx.Manifests[k].Digest, idx.Manifests[k].Size = nd, int64(len(body))
		}
	}
	es[j].data, _ = json.Marshal(&idx)
	return es
}

func editIndex(t testing.TB, es []entry, edit func(*ocispec.Index)) []entry {
	t.Helper()
	j := find(es, "index.json")
	var idx ocispec.Index
	if err := json.Unmarshal(es[j].data, &idx); err != nil {
		t.Fatal(err)
	}
	edit(&idx)
	es[j].data, _ = json.Marshal(&idx)
	return es
}

// countBlobs counts the blobs in the content store of namespace ns.
func countBlobs(t testing.TB, d *harness.Daemon, ns string) int {
	t.Helper()
	n := 0
	err := d.Client.ContentStore().Walk(namespaces.WithNamespace(ctx(t), ns), func(content.Info) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMoveHostileArchives(t *testing.T) {
	a := harness.Start(t, "mha")
	b := harness.Start(t, "mhb")
	bb := harness.ImportBusybox(t, a, "busybox:1")
	s := suspendReal(t, a, pinnedConfig(bb), nil)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tar")
	var exp migrate.ExportResult
	mustCLI(t, a, "", &exp, "export", "--ref", s.refPath, "--out", good, "--with-base")
	layer := s.ref.Layers[0].Digest

	// Archives whose ref records a wrong diffID or a too small
	// uncompressedSize, signed by a trusted key: only the layer check can
	// catch them. suspendReal uses a fresh key each time: trust every signer.
	trustDir := filepath.Join(dir, "trust")
	os.Mkdir(trustDir, 0o755)
	addTrust := func(pub string) {
		b, _ := os.ReadFile(pub)
		os.WriteFile(filepath.Join(trustDir, filepath.Base(filepath.Dir(pub))+".pub"), b, 0o644)
	}
	addTrust(s.pub)
	var bigPath, badIDPath string
	{
		s2 := suspendReal(t, a, pinnedConfig(bb), func(d *snapshot.Layer) { d.UncompressedSize -= 512 })
		addTrust(s2.pub)
		bigPath = filepath.Join(dir, "big.tar")
		mustCLI(t, a, "", nil, "export", "--ref", s2.refPath, "--out", bigPath)
		s3 := suspendReal(t, a, pinnedConfig(bb), func(d *snapshot.Layer) { d.DiffID = digest.FromString("another tar") })
		addTrust(s3.pub)
		badIDPath = filepath.Join(dir, "badid.tar")
		mustCLI(t, a, "", nil, "export", "--ref", s3.refPath, "--out", badIDPath)
	}

	// The good archive imports with that trust directory.
	mustCLI(t, b, b.NewNamespace(), nil, "import", good, "--trust", trustDir)

	cases := []struct {
		name string
		make func(es []entry) []entry
		path string // a prepared archive instead of make
	}{
		{name: "traversal", make: func(es []entry) []entry {
			return append(es, entry{tar.Header{Name: "../escape", Mode: 0o644, Typeflag: tar.TypeReg}, []byte("x")})
		}},
		{name: "traversal inside blobs", make: func(es []entry) []entry {
			return append(es, entry{tar.Header{Name: "blobs/sha256/../../../tmp/x", Mode: 0o644, Typeflag: tar.TypeReg}, []byte("x")})
		}},
		{name: "absolute name", make: func(es []entry) []entry {
			return append(es, entry{tar.Header{Name: "/etc/x", Mode: 0o644, Typeflag: tar.TypeReg}, []byte("x")})
		}},
		{name: "symlink", make: func(es []entry) []entry {
			i := find(es, blobName(layer))
			es[i] = entry{tar.Header{Name: blobName(layer), Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, nil}
			return es
		}},
		{name: "hard link", make: func(es []entry) []entry {
			return append(es, entry{tar.Header{Name: "blobs/sha256/" + strings.Repeat("0", 64), Typeflag: tar.TypeLink, Linkname: blobName(layer)}, nil})
		}},
		{name: "other directory", make: func(es []entry) []entry {
			return append(es, entry{tar.Header{Name: "blobs/sha512/", Mode: 0o755, Typeflag: tar.TypeDir}, nil})
		}},
		{name: "duplicate name", make: func(es []entry) []entry {
			i := find(es, "index.json")
			return append(es, es[i])
		}},
		{name: "corrupted layer", make: func(es []entry) []entry {
			i := find(es, blobName(layer))
			d := append([]byte{}, es[i].data...)
			d[len(d)/2] ^= 0x40
			es[i].data = d
			return es
		}},
		{name: "size mismatch in index.json", make: func(es []entry) []entry {
			return editIndex(t, es, func(idx *ocispec.Index) { idx.Manifests[0].Size++ })
		}},
		{name: "index names an absent blob", make: func(es []entry) []entry {
			return editIndex(t, es, func(idx *ocispec.Index) {
				idx.Manifests = append(idx.Manifests, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("absent"), Size: 6})
			})
		}},
		{name: "layer absent", make: func(es []entry) []entry {
			i := find(es, blobName(layer))
			return append(es[:i], es[i+1:]...)
		}},
		{name: "config of the wrong media type", make: func(es []entry) []entry {
			return replaceManifest(t, es, exp.Artifact.Digest, func(m *ocispec.Manifest) { m.Config.MediaType = ocispec.MediaTypeImageConfig })
		}},
		{name: "layer not the ref's", make: func(es []entry) []entry {
			return replaceManifest(t, es, exp.Artifact.Digest, func(m *ocispec.Manifest) { m.Layers[0].MediaType = ocispec.MediaTypeImageLayerGzip })
		}},
		{name: "an unrelated image in index.json", make: func(es []entry) []entry {
			return editIndex(t, es, func(idx *ocispec.Index) {
				idx.Manifests = append(idx.Manifests, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: layer, Size: s.ref.Layers[0].Size})
			})
		}},
		{name: "decompresses beyond uncompressedSize", path: bigPath},
		{name: "wrong diffID", path: badIDPath},
	}
	base := readEntries(t, good)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			p := tc.path
			if p == "" {
				es := make([]entry, len(base))
				copy(es, base)
				p = filepath.Join(work, "hostile.tar")
				writeEntries(t, p, tc.make(es))
			}
			before, _ := os.ReadDir(work)
			ns := b.NewNamespace()
			out := filepath.Join(work, "ref.json")
			code, stdout, stderr := srcli(t, b, ns, "import", p, "--trust", trustDir, "--out", out)
			if code != 2 {
				t.Fatalf("import: exit %d, want 2\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			var je struct {
				Error struct{ Class, Message string } `json:"error"`
			}
			if err := json.Unmarshal(stdout, &je); err != nil || je.Error.Message == "" {
				t.Errorf("stdout is not a JSON error (%v): %s", err, stdout)
			}
			t.Logf("refused: %s", je.Error.Message)
			if after, _ := os.ReadDir(work); len(after) != len(before) {
				t.Errorf("import wrote into %s: %d entries, %d before", work, len(after), len(before))
			}
			if n := countBlobs(t, b, ns); n != 0 {
				t.Errorf("%d blobs left in the content store of %s after the refusal", n, ns)
			}
			ls, err := b.Client.LeasesService().List(namespaces.WithNamespace(ctx(t), ns))
			if err != nil || len(ls) != 0 {
				t.Errorf("leases left after the refusal: %v (%v)", ls, err)
			}
		})
	}

	t.Run("containerd's importer alone accepts the corrupted layer", func(t *testing.T) {
		es := make([]entry, len(base))
		copy(es, base)
		i := find(es, blobName(layer))
		d := append([]byte{}, es[i].data...)
		d[len(d)/2] ^= 0x40
		es[i].data = d
		p := filepath.Join(t.TempDir(), "corrupt.tar")
		writeEntries(t, p, es)
		f, _ := os.Open(p)
		defer f.Close()
		c := namespaces.WithNamespace(ctx(t), b.NewNamespace())
		l, err := b.Client.LeasesService().Create(c, leases.WithRandomID())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Client.LeasesService().Delete(c, l, leases.SynchronousDelete)
		if _, err := archive.ImportIndex(leases.WithLease(c, l.ID), b.Client.ContentStore(), f); err != nil {
			t.Fatalf("ImportIndex refused it (the premise of the pre-scan changed): %v", err)
		}
		if _, err := b.Client.ContentStore().Info(c, layer); err == nil {
			t.Errorf("the corrupted layer is stored under its declared digest")
		}
	})
}
