package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	lfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/runtime/containerd"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// update rewrites what the tests compare against: docs/ (TestDocs) and
// the golden CLI transcripts under testdata/ (make docs; go test
// ./cmd/sandbox-resume -update).
var update = flag.Bool("update", false, "rewrite docs/ and testdata/*.golden from the code (make docs)")

// The fixed facts of the command tests.
const (
	testHostID   = "11111111-2222-3333-4444-555555555555"
	testImage    = "docker.io/library/busybox:1"
	testRunID    = "demo-1"
	testRunUID   = "ruid:0123456789abcdef0123456789abcdef" // the world ref's run UID
	testConfig   = "{\n  // the run's declaration\n  \"image\": \"busybox:1\",\n  \"containerEnv\": {\"LANG\": \"C.UTF-8\"},\n  \"remoteUser\": \"vscode\"\n}\n"
	testKeyFile  = "k.key"
	testPubFile  = "k.pub"
	testRefFile  = "demo-1.g1.ref.json"
	testConfFile = "devcontainer.json"
)

func testHost() snapshot.Host {
	return snapshot.Host{ID: testHostID, IDSource: snapshot.IDSourceIntrospection,
		ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: "linux/amd64"}
}

// testKey is the fixed signing key of the command tests.
func testKey() ed25519.PrivateKey { return namedKey("test") }

// namedKey is a fixed Ed25519 key derived from name.
func namedKey(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("sandbox-resume cmd test key " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// fakeRuntime is the Runtime of the command tests: one in-memory host
// (host/memhost) that every command reaches, and a registry over it.
type fakeRuntime struct {
	*memhost.Machine
	registry *memhost.Registry

	mu     sync.Mutex
	closed bool
}

var _ Runtime = (*fakeRuntime)(nil)

func (f *fakeRuntime) Registry(*containerd.Transport) host.Registry { return f.registry }

func (f *fakeRuntime) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// testLedger is the ledger fake as a command opens it: Close is recorded,
// not done, so that a test reads the records afterwards.
type testLedger struct {
	*lfake.Ledger
	closed bool
}

func (l *testLedger) Close() error { l.closed = true; return nil }

// world is what one command test runs against: a temporary working
// directory, the fakes, a clock that steps 250ms a call from
// 2026-11-30T17:00:00Z, and what the command asked of the app.
type world struct {
	t   *testing.T
	dir string
	rt  *fakeRuntime
	l   *testLedger

	// connected and opened record the daemon and ledger flags the command
	// connected and opened with (nil: it did not).
	connected *daemonOptions
	opened    *ledgerOptions
	// connectErr, when set, is what connecting fails with.
	connectErr error

	mu    sync.Mutex
	clock time.Time
}

// newWorld makes a world in a new temporary directory, which becomes the
// working directory (so paths on the command line and in outputs are
// relative and the transcripts do not depend on where the test runs).
func newWorld(t *testing.T) *world {
	t.Helper()
	h := memhost.New(testHost())
	w := &world{t: t, dir: t.TempDir(), rt: &fakeRuntime{Machine: h, registry: memhost.NewRegistry(h)}, clock: time.Date(2026, 11, 30, 17, 0, 0, 0, time.UTC)}
	t.Chdir(w.dir)
	w.l = &testLedger{Ledger: lfake.New(lfake.WithClock(w.now))}
	return w
}

func (w *world) now() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock
	w.clock = w.clock.Add(250 * time.Millisecond)
	return now
}

// testRandom is where the fake world's suspends read run UIDs from: a
// fixed stream, so the transcripts do not change.
func testRandom() io.Reader { return rand.NewChaCha8([32]byte{'r', 'u', 'i', 'd'}) }

// app returns the app over w's fakes.
func (w *world) app(stdin string, stdout, stderr *bytes.Buffer) *app {
	a := newApp(strings.NewReader(stdin), stdout, stderr)
	a.now = w.now
	a.random = testRandom()
	a.connect = func(_ context.Context, d daemonOptions) (Runtime, error) {
		w.connected = &d
		if w.connectErr != nil {
			return nil, w.connectErr
		}
		return w.rt, nil
	}
	a.openLedger = func(_ context.Context, o ledgerOptions) (ledger.Ledger, error) {
		w.opened = &o
		return w.l, nil
	}
	return a
}

// run runs the CLI with args over w and returns the exit code, stdout and
// stderr.
func (w *world) run(args ...string) (int, string, string) {
	return w.runStdin("", args...)
}

func (w *world) runStdin(stdin string, args ...string) (int, string, string) {
	w.t.Helper()
	var out, errb bytes.Buffer
	code := w.app(stdin, &out, &errb).run(context.Background(), args)
	return code, out.String(), errb.String()
}

// write writes a file into w's directory.
func (w *world) write(name, content string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, name), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// read reads a file of w's directory.
func (w *world) read(name string) []byte {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.dir, name))
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

// writeKeys writes testKey as k.key (PKCS#8 PEM) and k.pub (PKIX PEM).
func (w *world) writeKeys() {
	w.t.Helper()
	w.writeKeyPair("k", testKey())
}

// writeKeyPair writes key as PREFIX.key and PREFIX.pub.
func (w *world) writeKeyPair(prefix string, key ed25519.PrivateKey) {
	w.t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		w.t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		w.t.Fatal(err)
	}
	w.write(prefix+".key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	if err := os.Chmod(filepath.Join(w.dir, prefix+".key"), 0o600); err != nil { // a key group or other may read is refused
		w.t.Fatal(err)
	}
	w.write(prefix+".pub", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))
}

// suspendedRun is run demo-1 as suspend would have left it, as bytes:
// the base image (manifest, config, one layer), the zstd rootfs diff, the
// runtime spec, and the SnapshotRef signed with testKey, recording
// testConfig on testHost.
type suspendedRun struct {
	blobs    map[digest.Digest][]byte
	manifest ocispec.Descriptor
	ref      *snapshot.Ref
	refFile  []byte
}

// rawZstd returns data as one zstd frame of raw blocks (RFC 8878 §3.1):
// a valid frame whose bytes, unlike a compressor's, never change.
func rawZstd(data []byte) []byte {
	out := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58} // magic; no checksum, no size; window 2 MiB
	for first := true; first || len(data) > 0; first = false {
		n := min(len(data), 1<<17)
		hdr := uint32(n) << 3 // block type 0: raw
		if n == len(data) {
			hdr |= 1 // last block
		}
		out = binary.LittleEndian.AppendUint32(out, hdr)[:len(out)+3]
		out = append(out, data[:n]...)
		data = data[n:]
	}
	return out
}

// newSuspendedRun builds the run's bytes.
func newSuspendedRun(t *testing.T) *suspendedRun {
	t.Helper()
	r := &suspendedRun{blobs: map[digest.Digest][]byte{}}
	put := func(b []byte) digest.Digest {
		d := digest.FromBytes(b)
		r.blobs[d] = b
		return d
	}
	layer := []byte("base layer")
	cfg, err := json.Marshal(ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: "amd64"},
		Config: ocispec.ImageConfig{Env: []string{"PATH=/bin"}},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(layer)}}})
	if err != nil {
		t.Fatal(err)
	}
	mf, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: put(cfg), Size: int64(len(cfg))},
		Layers: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: put(layer), Size: int64(len(layer))}}})
	if err != nil {
		t.Fatal(err)
	}
	r.manifest = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: put(mf), Size: int64(len(mf))}
	tarBytes := bytes.Repeat([]byte("a changed file\n"), 64) // stands for the diff's tar
	diff := rawZstd(tarBytes)
	spec := recordedSpec()
	m, err := envmanifest.Ingest([]byte(testConfig), envmanifest.Options{Path: filepath.Join("/work", testConfFile)})
	if err != nil {
		t.Fatal(err)
	}
	r.ref = &snapshot.Ref{Schema: snapshot.RefSchema, Run: testRunID, RunUID: testRunUID, Generation: 1, Manifest: m.Address, Core: m.Core,
		Pinned: m.IsPinned(), Policy: []string{}, Host: testHost(), Base: r.base(), Created: "2026-11-30T16:30:00Z",
		Layers: []snapshot.Layer{{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: put(diff), Size: int64(len(diff)),
			DiffID: digest.FromBytes(tarBytes), UncompressedSize: int64(len(tarBytes))}},
		Spec:    &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: put(spec), Size: int64(len(spec))},
		Runtime: &snapshot.Runtime{Name: "io.containerd.runc.v2"}}
	if r.refFile, err = snapshot.SignRef(r.ref, testKey()); err != nil {
		t.Fatal(err)
	}
	return r
}

// base is what the image resolves to.
func (r *suspendedRun) base() snapshot.Base {
	var mf ocispec.Manifest
	var cfg ocispec.Image
	_ = json.Unmarshal(r.blobs[r.manifest.Digest], &mf)
	_ = json.Unmarshal(r.blobs[mf.Config.Digest], &cfg)
	return snapshot.Base{Name: testImage, ManifestDigest: r.manifest.Digest, ConfigDigest: mf.Config.Digest,
		Platform: "linux/amd64", DiffIDs: cfg.RootFS.DiffIDs}
}

// withFacts gives w's host r's blobs and image (by its manifest), in
// namespace sandbox-resume.
func (w *world) withFacts(r *suspendedRun) *world {
	w.t.Helper()
	f := w.rt.Machine
	f.SetNamespace("sandbox-resume")
	for _, b := range r.blobs {
		f.PutBlob(b)
	}
	if err := f.SetImage(testImage, r.manifest); err != nil {
		w.t.Fatal(err)
	}
	// The resumer of a claim this test process made is alive; no other is.
	f.SetResumerAlive(func(pid int, _, _ string) bool { return pid == os.Getpid() })
	return w
}

// withCapturer gives w's host r's image and a running container box-1 of
// it.
func (w *world) withCapturer(r *suspendedRun) *world {
	c := w.rt.Machine
	var layers []digest.Digest
	var mf ocispec.Manifest
	_ = json.Unmarshal(r.blobs[r.manifest.Digest], &mf)
	for _, l := range mf.Layers {
		layers = append(layers, l.Digest)
	}
	c.AddImage(memhost.Image{Base: r.base(), Layers: layers})
	// The runtime created box-1 as the declaration says: LANG is in its
	// spec's environment (suspend checks it).
	c.AddContainer(memhost.Container{ID: "box-1", Image: testImage, Task: snapshot.TaskRunning,
		Files: map[string][]byte{"/home/vscode/notes.txt": []byte("work in progress\n")},
		// remoteUser "vscode" is the spec's uid 0 in the image's /etc/passwd
		// (suspend resolves it there).
		ImageFiles: map[string][]byte{"etc/passwd": []byte("root:x:0:0:root:/root:/bin/sh\nvscode:x:0:0::/home/vscode:/bin/sh\n")},
		Runtime:    snapshot.Runtime{Name: "io.containerd.runc.v2"},
		Spec: []byte(`{"ociVersion":"1.2.0","process":{"args":["/bin/sh"],"cwd":"/","env":["PATH=/usr/bin:/bin","LANG=C.UTF-8"],` +
			`"user":{"uid":0,"gid":0}},"root":{"path":"rootfs"},"hostname":"box-1","mounts":[{"destination":"/proc","type":"proc","source":"proc"}],` +
			`"linux":{"namespaces":[{"type":"pid"},{"type":"mount"}]}}`)})
	return w
}

// withStore gives w's host r's blobs (and the registry over it).
func (w *world) withStore(r *suspendedRun) *world {
	for _, b := range r.blobs {
		w.rt.Put(b)
	}
	return w
}

// suspended records r in w's ledger as suspend does: generation 1,
// suspended by box-1.
func (w *world) suspended(r *suspendedRun) {
	w.t.Helper()
	_, err := w.l.Suspended(context.Background(), ledger.SuspendRequest{Run: r.ref.Run, Generation: 1, Ref: digest.FromBytes(r.refFile),
		Container: ledger.Container{Host: testHostID, Namespace: "sandbox-resume", ID: "box-1"},
		Created:   time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)})
	if err != nil {
		w.t.Fatal(err)
	}
}

// goldenCase is one command line of a golden transcript: setup makes its
// world (a fresh one for the text run and for the --output json run),
// check, when set, looks at the world after the text run.
type goldenCase struct {
	args  []string
	stdin string
	setup func(w *world)
	check func(t *testing.T, w *world, code int)
}

// scrub replaces what a transcript must not depend on (a random key's
// id, a temporary directory) with a placeholder.
var scrubs = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`/tmp/[^\s"]*/`), "$TMP/"},
}

// golden runs each case twice — as given, and with --output json before
// its arguments — and compares the transcript (command line, exit code,
// stdout, stderr) with testdata/<name>.golden; -update rewrites it.
func golden(t *testing.T, name string, cases ...goldenCase) {
	t.Helper()
	var b strings.Builder
	for _, tc := range cases {
		for _, args := range [][]string{tc.args, append([]string{"--output", "json"}, tc.args...)} {
			w := newWorld(t)
			if tc.setup != nil {
				tc.setup(w)
			}
			code, stdout, stderr := w.runStdin(tc.stdin, args...)
			if tc.check != nil && len(args) == len(tc.args) {
				tc.check(t, w, code)
			}
			if w.rt.closed != (w.connected != nil) || (w.opened != nil && !w.l.closed) {
				t.Errorf("%q: the runtime (connected %t, closed %t) or the ledger (opened %t, closed %t) was left open",
					args, w.connected != nil, w.rt.closed, w.opened != nil, w.l.closed)
			}
			fmt.Fprintf(&b, "$ sandbox-resume %s\nexit %d\n--- stdout\n%s--- stderr\n%s\n", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	got := b.String()
	for _, s := range scrubs {
		got = s.re.ReplaceAllString(got, s.with)
	}
	checkGolden(t, filepath.Join("testdata", name+".golden"), []byte(got))
}

// checkGolden compares got with the file path under the package
// directory, or with -update writes it.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	path = filepath.Join(packageDir, path)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is missing (go test ./cmd/sandbox-resume -update writes it)", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (go test ./cmd/sandbox-resume -update rewrites it):\n%s", path, lineDiff(string(want), string(got)))
	}
}

// packageDir is this package's directory: the working directory the test
// started in (worlds change it).
var packageDir = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return wd
}()

// lineDiff lists the first lines where want and got differ.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(wl), len(gl)) && shown < 12; i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			fmt.Fprintf(&b, "line %d:\n  want %q\n  got  %q\n", i+1, w, g)
			shown++
		}
	}
	return b.String()
}

// recordedSpec is the runtime spec of the suspended run's container, with
// containerd's default namespaces: a spec without them shares the host's,
// and a resume judges such a spec from another host (a copy) privileged
// (docs/design.md "Hardening").
func recordedSpec() []byte {
	return []byte(`{"ociVersion":"1.2.0","process":{"args":["/bin/sh"],"cwd":"/","env":["PATH=/usr/bin:/bin"],"user":{"uid":0,"gid":0}},` +
		`"root":{"path":"rootfs"},"hostname":"box-1","mounts":[{"destination":"/proc","type":"proc","source":"proc"}],` +
		`"linux":{"namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network"}]}}`)
}
