package integration

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// cli builds cmd/sandbox-resume with the fault points (-tags faultpoint,
// internal/faultpoint) once per test process into a fresh directory under
// the system temp dir (shared by every test of the process, so no single
// test's cleanup may remove it; about 20 MB). It is built without -race
// even when the tests are (a faster binary; the race detector covers the
// same code in the packages' own tests).
func cli(t testing.TB) string {
	t.Helper()
	cliOnce.Do(func() { cliPath, cliErr = buildCLI("sandbox-resume", "-tags", "faultpoint") })
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

var (
	plainOnce sync.Once
	plainPath string
	plainErr  error
)

// plainCLI builds cmd/sandbox-resume as `make build` does (no build tags:
// no fault points), once per test process, beside cli's binary.
func plainCLI(t testing.TB) string {
	t.Helper()
	cli(t) // the directory TestMain removes
	plainOnce.Do(func() { plainPath, plainErr = buildCLI("sandbox-resume-plain") })
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	return plainPath
}

// buildCLI builds ./cmd/sandbox-resume with the extra go build flags into
// the directory of cliPath (made on first use) as name, static
// (CGO_ENABLED=0) as `make build` builds it.
func buildCLI(name string, flags ...string) (string, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(cliPath)
	if cliPath == "" {
		if dir, err = os.MkdirTemp("", "sr-cli-"); err != nil {
			return "", err
		}
	}
	path := filepath.Join(dir, name)
	args := append(append([]string{"build", "-o", path}, flags...), "./cmd/sandbox-resume")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return path, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return path, nil
}

const suspendedConfig = `{
	"image": "busybox:1",
	"features": {"ghcr.io/devcontainers/features/node:1": {"version": "20"}},
	"containerEnv": {"A": "1", "LANG": "C.UTF-8"}
}`

// suspended is a run recorded as suspend records it: the harness's busybox
// image resolved through daemon d, a rootfs diff blob written under the run
// lease, and a SnapshotRef signed with a fresh key.
type suspended struct {
	d       *harness.Daemon
	dir     string
	ref     snapshot.Ref
	refPath string
	pub     string // trusted key file
	key     ed25519.PrivateKey
	diff    []byte
	image   harness.BusyboxImage
}

func suspend(t testing.TB, d *harness.Daemon, config string) *suspended {
	t.Helper()
	s := &suspended{d: d, dir: t.TempDir()}
	s.image = harness.ImportBusybox(t, d, "busybox:1")
	r := d.Connect(t, "")
	cfg := s.writeConfig(t, "devcontainer.json", config)
	m, err := envmanifest.IngestFile(cfg, envmanifest.Options{Path: cfg})
	if err != nil {
		t.Fatal(err)
	}
	host, err := r.Host(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	base, err := r.ResolveImage(ctx(t), m.Core.Image)
	if err != nil {
		t.Fatal(err)
	}
	const run = "itest-1"
	s.diff = []byte("rootfs diff of " + run + " on " + d.Name + " declared as " + m.Address)
	s.ref = snapshot.Ref{
		Schema: snapshot.RefSchema, Run: run, RunUID: "ruid:0123456789abcdef0123456789abcdef", Generation: 1, Manifest: m.Address, Core: m.Core,
		Pinned: m.Core.IsPinned(), Policy: []string{}, Host: host, Base: base,
		Layers: []snapshot.Layer{{
			MediaType: ocispec.MediaTypeImageLayerZstd,
			Digest:    digest.FromBytes(s.diff), Size: int64(len(s.diff)),
			DiffID: digest.FromString("tar of " + run), UncompressedSize: 10240,
		}},
		Spec:    &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: digest.FromString(fixtureSpec), Size: int64(len(fixtureSpec))},
		Runtime: &snapshot.Runtime{Name: "io.containerd.runc.v2"},
		Created: "2026-11-30T17:00:00Z",
	}
	writeDiff(t, d, d.Namespace, run, s.diff)

	prefix := filepath.Join(s.dir, "signer")
	pub, keyPath, err := envelope.WriteKeyPair(prefix, false)
	if err != nil {
		t.Fatal(err)
	}
	s.pub = pub
	if s.key, err = envelope.LoadPrivateKey(keyPath); err != nil {
		t.Fatal(err)
	}
	s.refPath = filepath.Join(s.dir, "ref.json")
	s.sign(t)
	return s
}

// sign (re)writes the ref file from s.ref.
func (s *suspended) sign(t testing.TB) {
	t.Helper()
	file, err := snapshot.SignRef(&s.ref, s.key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.refPath, file, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *suspended) writeConfig(t testing.TB, name, text string) string {
	t.Helper()
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fixtureSpec is the runtime spec the hand-made refs of these tests record;
// writeDiff stores it beside every diff.
const fixtureSpec = `{"ociVersion":"1.2.0","process":{"args":["/bin/sh"],"cwd":"/"},"root":{"path":"rootfs"},"linux":{"namespaces":[{"type":"pid"},{"type":"network"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]}}`

// writeDiff writes blob, and the blob of fixtureSpec, into namespace ns of
// d under the run lease, as suspend does (an unleased blob is collected).

func writeDiff(t testing.TB, d *harness.Daemon, ns, run string, blob []byte) {
	t.Helper()
	c := namespaces.WithNamespace(ctx(t), ns)
	id := snapshot.RunLeasePrefix + run
	if _, err := d.Client.LeasesService().Create(c, leases.WithID(id)); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	c = leases.WithLease(c, id)
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: digest.FromBytes(blob), Size: int64(len(blob))}
	if err := content.WriteBlob(c, d.Client.ContentStore(), "diff-"+run, bytes.NewReader(blob), desc); err != nil {
		t.Fatal(err)
	}
	spec := ocispec.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: digest.FromString(fixtureSpec), Size: int64(len(fixtureSpec))}
	if err := content.WriteBlob(c, d.Client.ContentStore(), "spec-"+run, strings.NewReader(fixtureSpec), spec); err != nil {
		t.Fatal(err)
	}
}

// check runs `sandbox-resume --output json resume --check` against daemon
// d in namespace ns (d's namespace when "") and returns the exit code and
// the verdict.
func check(t *testing.T, d *harness.Daemon, ns string, s *suspended, config string, extra ...string) (int, *resume.Verdict) {
	t.Helper()
	if ns == "" {
		ns = d.Namespace
	}
	cfg := s.writeConfig(t, "offered.json", config)
	args := append([]string{"--address", d.Address, "--namespace", ns, "--output", "json"}, extra...)
	// The hand-made ref was never suspended through this daemon's ledger:
	// a copy (docs/design.md "Exactly once across hosts").
	args = append(args, "resume", "--check", "--copy", "--ref", s.refPath, "--config", cfg, "--trust", s.pub)
	cmd := exec.Command(cli(t), args...)
	cmd.Env = cliEnv(args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var v resume.Verdict
	dec := json.NewDecoder(&stdout)
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("exit %d: stdout is not a verdict: %v\nstderr: %s", code, err, stderr.String())
	}
	if dec.More() {
		t.Errorf("more than one JSON value on stdout")
	}
	if code != v.ExitCode {
		t.Errorf("exit code %d, verdict says %d", code, v.ExitCode)
	}
	return code, &v
}

func wantRefused(t *testing.T, code int, v *resume.Verdict, wantCode int, class resume.Class, failAt string) {
	t.Helper()
	f := v.Failed()
	switch {
	case code != wantCode || v.Class != class:
		t.Errorf("exit %d class %q, want %d %q; verdict %+v", code, v.Class, wantCode, class, v.Checks)
	case wantCode == 0 && (f != nil || !v.Accepted):
		t.Errorf("accepted with a failed check: %+v", v.Checks)
	case wantCode != 0 && (f == nil || f.Name != failAt):
		t.Errorf("failed check %+v, want %s", f, failAt)
	}
}

func TestResumeCheckSameHost(t *testing.T) {
	d := harness.Start(t, "rsame")
	s := suspend(t, d, suspendedConfig)

	code, v := check(t, d, "", s, suspendedConfig)
	wantRefused(t, code, v, 0, "", "")
	if len(v.Drift) != 0 || len(v.Refusals) != 0 {
		t.Errorf("drift %v refusals %v", v.Drift, v.Refusals)
	}

	t.Run("containerEnv change", func(t *testing.T) {
		code, v := check(t, d, "", s, strings.Replace(suspendedConfig, `"A": "1"`, `"A": "2"`, 1))
		wantRefused(t, code, v, 3, resume.ClassManifestMismatch, resume.CheckManifest)
		if len(v.Drift) != 1 || v.Drift[0].Pointer != "/containerEnv/A" {
			t.Errorf("drift %+v, want /containerEnv/A", v.Drift)
		}
	})
	t.Run("feature tag change", func(t *testing.T) {
		code, v := check(t, d, "", s, strings.Replace(suspendedConfig, "node:1", "node:2", 1))
		wantRefused(t, code, v, 3, resume.ClassManifestMismatch, resume.CheckManifest)
		if len(v.Drift) != 1 || v.Drift[0].Pointer != "/features/0" {
			t.Errorf("drift %+v, want /features/0", v.Drift)
		}
	})
	t.Run("untrusted key", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "other")
		pub, _, err := envelope.WriteKeyPair(other, false)
		if err != nil {
			t.Fatal(err)
		}
		s2 := *s
		s2.pub = pub
		code, v := check(t, d, "", &s2, suspendedConfig)
		wantRefused(t, code, v, 6, resume.ClassUntrusted, resume.CheckSignature)
	})
	t.Run("one-sided host-id override", func(t *testing.T) {
		code, v := check(t, d, "", s, suspendedConfig, "--host-id", s.ref.Host.ID)
		wantRefused(t, code, v, 4, resume.ClassUnpinnedCrossHost, resume.CheckHost)
	})
	t.Run("previous release's claim lease", func(t *testing.T) {
		// The upgrade rule: no ledger record and a /1 claim lease → 8
		// naming the lease and its container; --check leaves the lease.
		id := snapshot.ClaimLease(s.ref.Run)
		lm := d.Client.LeasesService()
		c := d.Context(t)
		if _, err := lm.Create(c, leases.WithID(id), leases.WithLabels(map[string]string{
			resume.LabelLegacyClaimContainer: d.ID("resumed"), snapshot.LabelPrefix + "claim.pid": strconv.Itoa(os.Getpid()),
		})); err != nil {
			t.Fatal(err)
		}
		code, v := check(t, d, "", s, suspendedConfig)
		wantRefused(t, code, v, 8, resume.ClassClaimConflict, resume.CheckClaim)
		if f := v.Failed(); f == nil || !strings.Contains(f.Detail, d.ID("resumed")) || !strings.Contains(f.Detail, id) {
			t.Errorf("claim detail does not name the lease and its container: %+v", f)
		}
		ls, err := lm.List(c, "id=="+strconv.Quote(id))
		if err != nil || len(ls) != 1 {
			t.Fatalf("--check removed the claim lease: %v, %v", ls, err)
		}
		if err := lm.Delete(c, leases.Lease{ID: id}, leases.SynchronousDelete); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("live in the ledger", func(t *testing.T) {
		refFile, err := os.ReadFile(s.refPath)
		if err != nil {
			t.Fatal(err)
		}
		l := daemonLedger(t, d, "")
		h := ledger.Holder{Container: ledger.Container{Host: s.ref.Host.ID, Namespace: d.Namespace, ID: d.ID("resumed")}}
		cl, err := l.Claim(d.Context(t), ledger.ClaimRequest{Run: s.ref.Run, Generation: 1, Ref: digest.FromBytes(refFile), Holder: h, Copy: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Live(d.Context(t), h.Container); err != nil {
			t.Fatal(err)
		}
		code, v := check(t, d, "", s, suspendedConfig)
		wantRefused(t, code, v, 8, resume.ClassClaimConflict, resume.CheckClaim)
		if f := v.Failed(); f == nil || !strings.Contains(f.Detail, d.ID("resumed")) || !strings.Contains(f.Detail, s.ref.Host.ID) {
			t.Errorf("claim detail does not name the holder and its host: %+v", f)
		}
		if _, err := l.Discard(d.Context(t), s.ref.Run, true); err != nil {
			t.Fatal(err)
		}
		code, v = check(t, d, "", s, suspendedConfig)
		wantRefused(t, code, v, 9, resume.ClassSuperseded, resume.CheckClaim)
		// The subtests below judge content, not the ledger: they start from
		// no record again (a discarded or purged record would make every
		// claim 9, and verdict precedence would report that instead).
		if err := os.Remove(ledgerPath(d.Address, d.Namespace)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("image name re-pointed", func(t *testing.T) {
		harness.ImportBusyboxVariant(t, d, "busybox:1", "moved")
		t.Cleanup(func() { harness.ImportBusybox(t, d, "busybox:1") })
		code, v := check(t, d, "", s, suspendedConfig)
		wantRefused(t, code, v, 5, resume.ClassImageDrifted, resume.CheckImage)
	})
	t.Run("diff blob gone", func(t *testing.T) {
		d.DeleteBlob(t, "", s.ref.Layers[0].Digest)
		code, v := check(t, d, "", s, suspendedConfig)
		wantRefused(t, code, v, 7, resume.ClassSnapshotMissing, resume.CheckSnapshot)
	})
}

func TestResumeCheckTwoHosts(t *testing.T) {
	a := harness.Start(t, "rhosta")
	b := harness.Start(t, "rhostb")

	t.Run("unpinned", func(t *testing.T) {
		s := suspend(t, a, suspendedConfig)
		harness.ImportBusybox(t, b, "busybox:1")
		writeDiff(t, b, b.Namespace, s.ref.Run, s.diff)
		code, v := check(t, b, "", s, suspendedConfig)
		wantRefused(t, code, v, 4, resume.ClassUnpinnedCrossHost, resume.CheckHost)
		if f := v.Failed(); f == nil || !strings.Contains(f.Detail, s.ref.Host.ID) {
			t.Errorf("host detail does not name the recorded host: %+v", f)
		}
	})
	t.Run("pinned", func(t *testing.T) {
		bb := harness.ImportBusybox(t, a, "busybox:1")
		pinned := `{"image": "busybox@` + bb.Index.String() + `",
			"features": {"ghcr.io/devcontainers/features/node@sha256:` + digest.FromString("node").Encoded() + `": {}}}`
		s := suspend(t, a, pinned)
		if !s.ref.Pinned {
			t.Fatalf("ref not pinned: %s", s.ref.Core.Image)
		}
		// Base present on b, run not moved there: 7.
		harness.ImportBusybox(t, b, "busybox:1")
		code, v := check(t, b, "", s, pinned)
		wantRefused(t, code, v, 7, resume.ClassSnapshotMissing, resume.CheckSnapshot)
		if c := v.Check(resume.CheckHost); c.Result != resume.ResultPass {
			t.Errorf("host check %+v, want pass (pinned)", c)
		}
		// Neither base nor run (a fresh namespace on b): 5.
		code, v = check(t, b, b.NewNamespace(), s, pinned)
		wantRefused(t, code, v, 5, resume.ClassImageUnresolved, resume.CheckImage)
		// Both moved: accepted on the other host.
		writeDiff(t, b, b.Namespace, s.ref.Run, s.diff)
		code, v = check(t, b, "", s, pinned)
		wantRefused(t, code, v, 0, "", "")
	})
}

// TestResumeBitFlips flips every bit of one ref file and decides against a
// real daemon in-process: each flip is refused (6, or 2 where the file no
// longer parses or the ref no longer decodes) unless the file still
// verifies and its inner object's JCS equals the original's (an edit JCS
// cancels out, such as the case of a hex digit in a \u escape), which must
// then be accepted.
func TestResumeBitFlips(t *testing.T) {
	d := harness.Start(t, "rflip")
	s := suspend(t, d, suspendedConfig)
	r := d.Connect(t, "")
	led := daemonLedger(t, d, "")
	file, err := os.ReadFile(s.refPath)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := envelope.Parse(file, envelope.MemberRef)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := envelope.LoadTrust(s.pub)
	if err != nil {
		t.Fatal(err)
	}
	req := resume.Request{Config: []byte(suspendedConfig), ConfigPath: filepath.Join(s.dir, "offered.json"), Trust: trust}
	c := context.Background()
	counts := map[int]int{}
	flipped := make([]byte, len(file))
	for i := range file {
		for bit := 0; bit < 8; bit++ {
			copy(flipped, file)
			flipped[i] ^= 1 << bit
			req.RefFile = flipped
			v := resume.Decide(c, r, led, req)
			counts[v.ExitCode]++
			same := false
			if doc, err := envelope.Parse(flipped, envelope.MemberRef); err == nil && doc.Verify(trust) == nil && bytes.Equal(doc.Canonical, orig.Canonical) {
				same = true
			}
			switch {
			case same && v.ExitCode != 0:
				t.Errorf("byte %d bit %d: the same inner object refused: %s %s", i, bit, v.Class, v.Failed().Detail)
			case !same && v.ExitCode != exitcode.Refused && v.ExitCode != exitcode.Untrusted:
				t.Errorf("byte %d bit %d: exit %d (%s), want 2 or 6", i, bit, v.ExitCode, v.Class)
			}
		}
	}
	t.Logf("%d flips: exit codes %v", len(file)*8, counts)
	if counts[exitcode.Untrusted] == 0 || counts[exitcode.Refused] == 0 {
		t.Errorf("flips did not reach both refusals: %v", counts)
	}
}

// BenchmarkDecideWarmDaemon is the in-process decision (all ten checks,
// accepted) against a warm daemon; goal p50 ≤ 2 ms (docs/design.md "Performance goals").
func BenchmarkDecideWarmDaemon(b *testing.B) {
	d := harness.Start(b, "rbench")
	s := suspend(b, d, suspendedConfig)
	r := d.Connect(b, "")
	led := daemonLedger(b, d, "")
	req, err := resume.LoadRequest(s.refPath, s.writeConfig(b, "offered.json", suspendedConfig), "", s.pub)
	if err != nil {
		b.Fatal(err)
	}
	c := context.Background()
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		v := resume.Decide(c, r, led, req)
		lat[i] = time.Since(t0)
		if v.ExitCode != 0 {
			b.Fatalf("exit %d: %+v", v.ExitCode, v.Failed())
		}
	}
	reportPercentiles(b, lat)
}

// reportPercentiles reports the p50 and p90 of per-iteration latencies in
// milliseconds (the goals of docs/design.md "Performance goals" are stated as p50).
func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*9/10])/1e6, "p90-ms")
}

// BenchmarkResumeCheckProcess is the `resume --check` process (start,
// connect, ten checks, text output) of the binary `make build` builds
// (plainCLI: static, no fault points) against a warm daemon; goal ≤ 12 ms
// per run (docs/design.md "Performance goals").
func BenchmarkResumeCheckProcess(b *testing.B) {
	d := harness.Start(b, "rbproc")
	s := suspend(b, d, suspendedConfig)
	cfg := s.writeConfig(b, "offered.json", suspendedConfig)
	bin := plainCLI(b)
	args := []string{"--address", d.Address, "--namespace", d.Namespace, "resume", "--check", "--copy",
		"--ref", s.refPath, "--config", cfg, "--trust", s.pub}
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		out, err := exec.Command(bin, args...).CombinedOutput()
		lat[i] = time.Since(t0)
		if err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
	reportPercentiles(b, lat)
}
