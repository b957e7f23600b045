package integration

import (
	"encoding/json"
	"errors"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/runtime/containerd"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// These tests move runs through registries as operators run them
// (docs/design.md "Moving runs"): htpasswd auth with credentials from a
// Docker config or a credential helper, a private CA, a flaky network in
// front of the registry, and runs found by generation.

// emptyDockerConfig is a Docker config file with no credentials, so the
// tests never read the caller's ~/.docker.
func emptyDockerConfig(t testing.TB) string {
	t.Helper()
	_, file := harness.DockerConfig(t, nil, nil)
	return file
}

// plainTransport is the registry transport for a plain-HTTP loopback
// registry with no credentials.
func plainTransport(t testing.TB) *containerd.Transport {
	t.Helper()
	reg, err := containerd.NewTransport(containerd.RegistryOptions{ConfigFile: emptyDockerConfig(t), PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// errorOf decodes the {"error": …} object (jsonError) a failed command
// prints under --output json.
func errorOf(t testing.TB, stdout []byte) (class, message string) {
	t.Helper()
	var e jsonError
	if err := json.Unmarshal(stdout, &e); err != nil {
		t.Fatalf("stdout is not a JSON error: %v\n%s", err, stdout)
	}
	return e.Error.Class, e.Error.Message
}

var (
	credHelperOnce sync.Once
	credHelperDir  string
	credHelperErr  error
)

// credHelper builds docker-credential-srtest (./credhelper) once per
// process into its own directory and writes creds (server → user,
// secret) beside it; it returns the directory, to put first on PATH. The
// helper appends each call to calls.log there.
func credHelper(t testing.TB, creds map[string][2]string) string {
	t.Helper()
	credHelperOnce.Do(func() {
		root, err := harness.RepoRoot()
		if err != nil {
			credHelperErr = err
			return
		}
		dir, err := os.MkdirTemp("", "sr-credhelper-")
		if err != nil {
			credHelperErr = err
			return
		}
		credHelperDir = dir // TestMain removes it, built or not
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "docker-credential-srtest"), "./test/integration/credhelper")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			credHelperErr = errors.New("go build ./test/integration/credhelper: " + err.Error() + "\n" + string(out))
			return
		}
	})
	if credHelperErr != nil {
		t.Fatal(credHelperErr)
	}
	m := map[string]map[string]string{}
	for server, c := range creds {
		m[server] = map[string]string{"Username": c[0], "Secret": c[1]}
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(credHelperDir, "creds.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(credHelperDir, "calls.log"))
	return credHelperDir
}

// leaseCount is the number of leases in namespace ns of d.
func leaseCount(t testing.TB, d *harness.Daemon, ns string) int {
	t.Helper()
	ls, err := d.Client.LeasesService().List(namespaces.WithNamespace(ctx(t), ns))
	if err != nil {
		t.Fatal(err)
	}
	return len(ls)
}

func TestRegistryAuthTLS(t *testing.T) {
	a := harness.Start(t, "raa")
	c := harness.Start(t, "rac")
	reg := harness.StartRegistryWith(t, harness.RegistryConfig{Users: map[string]string{"alice": "alice-pw", "bob": "bob-pw"}, TLS: true})
	bb := harness.ImportBusybox(t, a, "busybox:1")
	pinned := pinnedConfig(bb)
	s := suspendReal(t, a, pinned, nil)
	ca := "--registry-cacert=" + reg.CAFile
	noCreds := []string{"DOCKER_CONFIG=" + t.TempDir()}

	// config.json in $DOCKER_CONFIG (auths).
	cfgDir, cfgFile := harness.DockerConfig(t, map[string]string{reg.Host: "alice:alice-pw"}, nil)
	withConfig := []string{"DOCKER_CONFIG=" + cfgDir}
	target := reg.Host + "/runs/auth:" + s.ref.Run
	t.Run("config.json", func(t *testing.T) {
		var pr migrate.PushResult
		code, stdout, stderr := srcliEnv(t, a, "", withConfig, "push", ca, "--ref", s.refPath, target)
		if code != 0 {
			t.Fatalf("push with $DOCKER_CONFIG/config.json: exit %d\n%s\n%s", code, stdout, stderr)
		}
		json.Unmarshal(stdout, &pr)
		if got := reg.Tags(t, "runs/auth", "alice", "alice-pw"); !slices.Equal(got, []string{s.ref.Run}) {
			t.Errorf("tags of runs/auth: %v", got)
		}
		ns := c.NewNamespace()
		out := filepath.Join(t.TempDir(), "ref.json")
		code, stdout, stderr = srcliEnv(t, c, ns, noCreds, "pull", ca, "--registry-config", cfgFile, "--trust", s.pub, target, "--out", out)
		if code != 0 {
			t.Fatalf("pull with --registry-config: exit %d\n%s\n%s", code, stdout, stderr)
		}
		var pl migrate.PullResult
		json.Unmarshal(stdout, &pl)
		if pl.Artifact.Digest != pr.Artifact.Digest || pl.BaseFrom == "" {
			t.Errorf("pulled %s (base from %q), pushed %s", pl.Artifact.Digest, pl.BaseFrom, pr.Artifact.Digest)
		}
		code, v := check(t, c, ns, withRef(s, out), pinned)
		wantRefused(t, code, v, 0, "", "")
	})

	t.Run("credential helper", func(t *testing.T) {
		dir := credHelper(t, map[string][2]string{reg.Host: {"bob", "bob-pw"}})
		_, helperCfg := harness.DockerConfig(t, nil, map[string]string{reg.Host: "srtest"})
		env := append(slices.Clone(noCreds), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		helperTarget := reg.Host + "/runs/helper:" + s.ref.Run
		if code, stdout, stderr := srcliEnv(t, a, "", env, "push", ca, "--registry-config", helperCfg, "--ref", s.refPath, helperTarget); code != 0 {
			t.Fatalf("push with a credential helper: exit %d\n%s\n%s", code, stdout, stderr)
		}
		out := filepath.Join(t.TempDir(), "ref.json")
		if code, stdout, stderr := srcliEnv(t, c, c.NewNamespace(), env, "pull", ca, "--registry-config", helperCfg, "--trust", s.pub, helperTarget, "--out", out); code != 0 {
			t.Fatalf("pull with a credential helper: exit %d\n%s\n%s", code, stdout, stderr)
		}
		calls, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
		if !strings.Contains(string(calls), "get "+reg.Host+"\n") {
			t.Errorf("the helper was not asked for %s; calls:\n%s", reg.Host, calls)
		}
	})

	t.Run("wrong credentials", func(t *testing.T) {
		_, bad := harness.DockerConfig(t, map[string]string{reg.Host: "alice:wrong"}, nil)
		for _, cfg := range []string{bad, emptyDockerConfig(t)} {
			denied := reg.Host + "/runs/denied:" + s.ref.Run
			code, stdout, _ := srcliEnv(t, a, "", noCreds, "push", ca, "--registry-config", cfg, "--ref", s.refPath, denied)
			if code != 1 {
				t.Fatalf("push with bad credentials: exit %d, want 1\n%s", code, stdout)
			}
			class, msg := errorOf(t, stdout)
			t.Logf("push with bad credentials: %s", msg)
			if class != "internal" || !strings.Contains(msg, "registry "+reg.Host+": unauthorized") {
				t.Errorf("push error %s %q, want internal naming %s and unauthorized", class, msg, reg.Host)
			}
			if got := reg.Tags(t, "runs/denied", "alice", "alice-pw"); len(got) != 0 {
				t.Errorf("a refused push stored tags %v", got)
			}

			ns := c.NewNamespace()
			out := filepath.Join(t.TempDir(), "ref.json")
			code, stdout, _ = srcliEnv(t, c, ns, noCreds, "pull", ca, "--registry-config", cfg, "--trust", s.pub, target, "--out", out)
			if code != 1 {
				t.Fatalf("pull with bad credentials: exit %d, want 1\n%s", code, stdout)
			}
			_, msg = errorOf(t, stdout)
			t.Logf("pull with bad credentials: %s", msg)
			if !strings.Contains(msg, reg.Host) || !strings.Contains(msg, "unauthorized") {
				t.Errorf("pull error %q does not name %s and unauthorized", msg, reg.Host)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused pull wrote %s", out)
			}
			if n := countBlobs(t, c, ns); n != 0 {
				t.Errorf("a refused pull stored %d blobs", n)
			}
		}
	})

	t.Run("private CA", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "ref.json")
		for _, tc := range []struct {
			d    *harness.Daemon
			ns   string
			args []string
		}{
			{a, "", []string{"push", "--ref", s.refPath, reg.Host + "/runs/noca:" + s.ref.Run}},
			{c, c.NewNamespace(), []string{"pull", "--trust", s.pub, target, "--out", out}},
		} {
			args := tc.args
			code, stdout, _ := srcliEnv(t, tc.d, tc.ns, withConfig, args...)
			if code != 1 {
				t.Fatalf("%s without --registry-cacert: exit %d, want 1\n%s", args[0], code, stdout)
			}
			_, msg := errorOf(t, stdout)
			t.Logf("%s without the CA: %s", args[0], msg)
			if !strings.Contains(msg, "certificate") || !strings.Contains(msg, reg.Host) {
				t.Errorf("%s without the CA: %q, want a certificate error naming %s", args[0], msg, reg.Host)
			}
		}
		if got := reg.Tags(t, "runs/noca", "alice", "alice-pw"); len(got) != 0 {
			t.Errorf("tags %v", got)
		}
		code, stdout, _ := srcliEnv(t, a, "", noCreds, "push", "--registry-cacert", filepath.Join(t.TempDir(), "absent.pem"), "--registry-config", cfgFile, "--ref", s.refPath, target)
		if code != 2 {
			t.Errorf("a missing --registry-cacert file: exit %d, want 2\n%s", code, stdout)
		}
		code, stdout, _ = srcliEnv(t, a, "", noCreds, "push", ca, "--registry-config", filepath.Join(t.TempDir(), "absent.json"), "--ref", s.refPath, target)
		if code != 2 {
			t.Errorf("a missing --registry-config file: exit %d, want 2\n%s", code, stdout)
		}
	})

	t.Run("skopeo copy --src-creds", func(t *testing.T) {
		testenv.LookPath(t, "skopeo", "make deps")
		layout := filepath.Join(t.TempDir(), "layout")
		out, err := exec.Command("skopeo", "copy", "--src-creds", "alice:alice-pw", "--src-cert-dir", reg.CertDir,
			"docker://"+target, "oci:"+layout+":run").CombinedOutput()
		if err != nil {
			t.Fatalf("skopeo copy: %v\n%s", err, out)
		}
		raw, err := exec.Command("skopeo", "inspect", "--raw", "oci:"+layout+":run").Output()
		if err != nil {
			t.Fatal(err)
		}
		var pr migrate.PushResult
		_, stdout, _ := srcliEnv(t, a, "", withConfig, "push", ca, "--ref", s.refPath, target) // the same push again: its result names the artifact
		json.Unmarshal(stdout, &pr)
		if got := digest.FromBytes(raw); got != pr.Artifact.Digest {
			t.Errorf("skopeo read manifest %s, we pushed %s:\n%s", got, pr.Artifact.Digest, raw)
		}
		for _, d := range []digest.Digest{s.ref.Layers[0].Digest} {
			if b, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", d.Encoded())); err != nil || digest.FromBytes(b) != d {
				t.Errorf("skopeo's copy lacks layer %s (%v)", d, err)
			}
		}
		bad, err := exec.Command("skopeo", "copy", "--src-creds", "alice:wrong", "--src-cert-dir", reg.CertDir,
			"docker://"+target, "oci:"+filepath.Join(t.TempDir(), "x")+":run").CombinedOutput()
		if err == nil {
			t.Errorf("skopeo copy with wrong credentials succeeded: %s", bad)
		}
	})
}

func TestRegistryFlakyNetwork(t *testing.T) {
	a := harness.Start(t, "rfa")
	c := harness.Start(t, "rfc")
	reg := harness.StartRegistry(t)
	proxy := harness.StartFlakyProxy(t, reg)
	bb := harness.ImportBusybox(t, a, "busybox:1")
	pinned := pinnedConfig(bb)
	s := suspendReal(t, a, pinned, nil)
	target := proxy.Host + "/runs/flaky:" + s.ref.Run
	env := []string{"DOCKER_CONFIG=" + t.TempDir()}

	start := time.Now()
	code, stdout, stderr := srcliEnv(t, a, "", env, "--debug", "push", "--plain-http", "--ref", s.refPath, target)
	if code != 0 {
		t.Fatalf("push through the flaky proxy: exit %d\n%s\nstderr:\n%s\nproxy: %v", code, stdout, stderr, proxy.Events())
	}
	t.Logf("push through the flaky proxy took %s; proxy: %d× 503, %d resets; %d retries logged", time.Since(start), proxy.Count("503"), proxy.Count("reset"), strings.Count(stderr, "msg=\"retrying"))
	for _, want := range []string{"503 HEAD", "503 PUT", "reset PUT"} {
		if proxy.Count(want) == 0 {
			t.Errorf("the proxy never did %q: %v", want, proxy.Events())
		}
	}
	for _, want := range []string{"retrying blob transfer", "level=DEBUG"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("push --debug stderr lacks %q:\n%s", want, stderr)
		}
	}
	var pr migrate.PushResult
	json.Unmarshal(stdout, &pr)

	t.Run("a pull that finally fails stores nothing", func(t *testing.T) {
		// Every request for the base's layer fails: the artifact is fetched
		// into the temporary lease first, then the base fails for good. (c
		// has none of it yet: containerd shares blobs between namespaces.)
		broken := harness.StartFlakyProxyWith(t, reg, func(p *harness.FlakyProxy) {
			p.Fails = 1 << 30
			p.Only = func(object string) bool { return object == bb.Image.Layers[0].Digest.String() }
		})
		ns := c.NewNamespace()
		out := filepath.Join(t.TempDir(), "ref.json")
		start := time.Now()
		code, stdout, stderr := srcliEnv(t, c, ns, env, "--debug", "pull", "--plain-http", "--trust", s.pub, broken.Host+"/runs/flaky:"+s.ref.Run, "--out", out)
		if code != 1 {
			t.Fatalf("pull with a broken base layer: exit %d, want 1\n%s\n%s", code, stdout, stderr)
		}
		_, msg := errorOf(t, stdout)
		t.Logf("pull with a broken base layer, after %s: %s", time.Since(start), msg)
		if layer := bb.Image.Layers[0].Digest.String(); !strings.Contains(msg, layer) || !strings.Contains(msg, "503") || !strings.Contains(msg, "gave up after 5 attempts") {
			t.Errorf("pull with a broken base layer: %q, want a 503 naming %s after 5 attempts", msg, layer)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a failed pull wrote %s", out)
		}
		if broken.Count("503 GET "+bb.Image.Layers[0].Digest.String()) < 2 {
			t.Errorf("the broken layer was not retried: %v", broken.Events())
		}
		if n := countBlobs(t, c, ns); n != 0 {
			t.Errorf("a failed pull left %d blobs", n)
		}
		if n := leaseCount(t, c, ns); n != 0 {
			t.Errorf("a failed pull left %d leases", n)
		}
	})

	proxy.Forget() // the pull meets two 503s per object too
	ns := c.NewNamespace()
	out := filepath.Join(t.TempDir(), "ref.json")
	code, stdout, stderr = srcliEnv(t, c, ns, env, "--debug", "pull", "--plain-http", "--trust", s.pub, target, "--out", out)
	if code != 0 {
		t.Fatalf("pull through the flaky proxy: exit %d\n%s\nstderr:\n%s\nproxy: %v", code, stdout, stderr, proxy.Events())
	}
	for _, want := range []string{"503 GET", "reset GET"} {
		if proxy.Count(want) == 0 {
			t.Errorf("the proxy never did %q: %v", want, proxy.Events())
		}
	}
	// The tag's manifest is resolved outside any blob transfer: the
	// transport retries it; blobs are fetched again whole.
	for _, want := range []string{"retrying registry request", "retrying blob transfer"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("pull --debug stderr lacks %q:\n%s", want, stderr)
		}
	}
	var pl migrate.PullResult
	json.Unmarshal(stdout, &pl)
	if pl.Artifact.Digest != pr.Artifact.Digest || pl.BaseFrom == "" {
		t.Errorf("pulled %s (base from %q), pushed %s", pl.Artifact.Digest, pl.BaseFrom, pr.Artifact.Digest)
	}
	code, v := check(t, c, ns, withRef(s, out), pinned)
	wantRefused(t, code, v, 0, "", "")
}

func TestRegistryRunsByGeneration(t *testing.T) {
	a := harness.Start(t, "rga")
	c := harness.Start(t, "rgc")
	reg := harness.StartRegistry(t)
	bb := harness.ImportBusybox(t, a, "busybox:1")
	pinned := pinnedConfig(bb)
	repo := reg.Host + "/runs/gen"
	env := []string{"DOCKER_CONFIG=" + t.TempDir()}

	// Three refs of run itest-1 (/1 refs are generation 1, so generations
	// 2 and 3 are pushed under explicit tags), and noise.
	var gens []*suspended
	var pushed []migrate.PushResult
	for i, target := range []string{repo, repo + ":itest-1.g2", repo + ":itest-1.g3"} {
		s := suspendReal(t, a, pinned, nil)
		var pr migrate.PushResult
		code, stdout, stderr := srcliEnv(t, a, "", env, "push", "--plain-http", "--ref", s.refPath, target)
		if code != 0 {
			t.Fatalf("push %d: exit %d\n%s\n%s", i+1, code, stdout, stderr)
		}
		json.Unmarshal(stdout, &pr)
		gens, pushed = append(gens, s), append(pushed, pr)
	}
	if pushed[0].Target != repo+":itest-1.g1" {
		t.Errorf("a push without a tag went to %s, want %s:itest-1.g1", pushed[0].Target, repo)
	}
	mustCLI(t, a, "", nil, "push", "--plain-http", "--ref", gens[0].refPath, repo+":itest-1.g10x")
	mustCLI(t, a, "", nil, "push", "--plain-http", "--ref", gens[0].refPath, repo+":itest-10.g9")
	tags := reg.Tags(t, "runs/gen", "", "")
	for _, want := range []string{"itest-1.g1", "itest-1.g2", "itest-1.g3"} {
		if !slices.Contains(tags, want) {
			t.Errorf("tags %v lack %s", tags, want)
		}
	}

	// The tags API pages (n=1: one Link per tag).
	paged, err := containerd.NewTransport(containerd.RegistryOptions{ConfigFile: emptyDockerConfig(t), PlainHTTP: true, TagPageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := paged.Tags(ctx(t), repo)
	slices.Sort(listed)
	slices.Sort(tags)
	if err != nil || !slices.Equal(listed, tags) {
		t.Errorf("paged tags %v (%v), want %v", listed, err, tags)
	}

	ns := c.NewNamespace()
	out := filepath.Join(t.TempDir(), "ref.json")
	var pl migrate.PullResult
	code, stdout, stderr := srcliEnv(t, c, ns, env, "pull", "--plain-http", "--trust", gens[2].pub, repo, "--run", "itest-1", "--out", out)
	if code != 0 {
		t.Fatalf("pull --run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	json.Unmarshal(stdout, &pl)
	if pl.Source != repo+":itest-1.g3" || pl.Artifact.Digest != pushed[2].Artifact.Digest {
		t.Errorf("pull --run itest-1 took %s (%s), want %s:itest-1.g3 (%s)", pl.Source, pl.Artifact.Digest, repo, pushed[2].Artifact.Digest)
	}
	code, v := check(t, c, ns, withRef(gens[2], out), pinned)
	wantRefused(t, code, v, 0, "", "")

	code, stdout, _ = srcliEnv(t, c, c.NewNamespace(), env, "pull", "--plain-http", "--trust", gens[2].pub, repo, "--run", "itest-2", "--out", out)
	if code != 1 {
		t.Errorf("pull --run of a run with no tag: exit %d, want 1\n%s", code, stdout)
	} else if _, msg := errorOf(t, stdout); !strings.Contains(msg, "runs/gen") || !strings.Contains(msg, "itest-2") {
		t.Errorf("pull --run itest-2: %q does not name the repository and the run", msg)
	}
}
