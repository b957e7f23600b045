package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/envmanifest/adopt"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// adoptConfig is a devcontainer.json as lint --fix leaves it: comments,
// a tab layout, an image by tag and a feature by tag with a lockfile entry.
const adoptConfig = "{\n\t// The base image; pin adds its digest.\n\t\"image\": \"%s\",\n" +
	"\t\"features\": {\n\t\t// locked in devcontainer-lock.json\n\t\t\"ghcr.io/devcontainers/features/node:1\": {\"version\": \"20\"}\n\t},\n" +
	"\t\"containerEnv\": {\"LANG\": \"C.UTF-8\"}, // kept\n\t\"name\": \"adopt\"\n}\n"

var adoptNodeDigest = digest.FromString("sandbox-resume integration feature node")

// writeAdopt writes adoptConfig with image and its lockfile into a new
// directory and returns the config's path.
func writeAdopt(t *testing.T, image string) string {
	t.Helper()
	dir := t.TempDir()
	lock := `{"features": {"ghcr.io/devcontainers/features/node:1": {"version": "1.6.1", "resolved": "ghcr.io/devcontainers/features/node@` +
		adoptNodeDigest.String() + `", "integrity": "` + adoptNodeDigest.String() + `"}}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, envmanifest.LockfileName), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(strings.Replace(adoptConfig, "%s", image, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// pinnedAdopt is adoptConfig as pin must write it: the image name with
// "@<dg>" and the feature key replaced by the lockfile's resolved.
func pinnedAdopt(image string, dg digest.Digest) string {
	s := strings.Replace(adoptConfig, "%s", image+"@"+dg.String(), 1)
	return strings.Replace(s, "ghcr.io/devcontainers/features/node:1", "ghcr.io/devcontainers/features/node@"+adoptNodeDigest.String(), 1)
}

// TestPinAgainstContainerd pins against a real daemon: a name pointing at
// an index gets the index digest, one pointing at a single manifest the
// manifest digest; the whole file is compared (comments and layout kept),
// and manifest then says pinned. A name that does not resolve is 5 and
// leaves the file alone; lint with a daemon resolves the image too.
func TestPinAgainstContainerd(t *testing.T) {
	a := harness.Start(t, "pina")
	idx := harness.ImportBusybox(t, a, "busybox:1")
	single := harness.ImportBusyboxManifest(t, a, "busybox:single")

	for _, c := range []struct {
		image string
		want  digest.Digest
	}{{"busybox:1", idx.Index}, {"busybox:single", single.Manifest}} {
		cfg := writeAdopt(t, c.image)
		var out struct {
			Address string          `json:"address"`
			Pinned  bool            `json:"pinned"`
			Changed bool            `json:"changed"`
			Edits   []adopt.PinEdit `json:"edits"`
			Written string          `json:"written"`
		}
		mustCLI(t, a, "", &out, "pin", "--write", cfg)
		got, _ := os.ReadFile(cfg)
		if want := pinnedAdopt(c.image, c.want); string(got) != want {
			t.Errorf("%s: pinned file\n%s\nwant\n%s", c.image, got, want)
		}
		if !out.Pinned || !out.Changed || out.Written != cfg || len(out.Edits) != 2 {
			t.Errorf("%s: pin said %+v", c.image, out)
		}
		var m struct {
			Address string `json:"address"`
			Pinned  bool   `json:"pinned"`
		}
		mustCLI(t, a, "", &m, "manifest", cfg)
		if !m.Pinned || m.Address != out.Address {
			t.Errorf("%s: manifest says pinned %v address %s, pin said %s", c.image, m.Pinned, m.Address, out.Address)
		}
	}

	cfg := writeAdopt(t, "busybox:absent")
	before, _ := os.ReadFile(cfg)
	if code, stdout, _ := srcli(t, a, "", "pin", "--write", cfg); code != 5 || !strings.Contains(string(stdout), "image-unresolved") {
		t.Errorf("pin of an absent name: exit %d, want 5\n%s", code, stdout)
	}
	if after, _ := os.ReadFile(cfg); string(after) != string(before) {
		t.Error("a failed pin changed the file")
	}
	if code, _, _ := srcli(t, a, "", "lint", cfg); code != 5 {
		t.Errorf("lint of an absent name with a daemon: exit %d, want 5", code)
	}
	var lint struct {
		OK    bool               `json:"ok"`
		Image *adopt.ImageReport `json:"image"`
	}
	mustCLI(t, a, "", &lint, "lint", writeAdopt(t, "busybox:1"))
	if !lint.OK || lint.Image == nil || lint.Image.Digest != idx.Index || lint.Image.Reference != idx.Name {
		t.Errorf("lint with a daemon: %+v %+v", lint, lint.Image)
	}
}

// TestPinnedResumesAcrossHosts is issue 19's "done when": a run suspended
// from the tag-based file is refused on a second host (4), and a new run
// suspended from the file pin wrote resumes there (0). Both move with
// export --with-base and import; the pinned one is then resumed for real.
func TestPinnedResumesAcrossHosts(t *testing.T) {
	a := harness.Start(t, "pxa")
	b := harness.Start(t, "pxb")
	bb := harness.ImportBusybox(t, a, "busybox:1")
	dir := t.TempDir()
	pub, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
	if err != nil {
		t.Fatal(err)
	}
	unpinned := writeAdopt(t, "busybox:1")
	pinnedCfg := writeAdopt(t, "busybox:1")
	mustCLI(t, a, "", nil, "pin", "--write", pinnedCfg)

	for _, c := range []struct {
		name, cfg string
		code      int
		class     resume.Class
	}{
		{"unpinned", unpinned, 4, resume.ClassUnpinnedCrossHost},
		{"pinned", pinnedCfg, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := "adopt-" + c.name
			cid := scriptContainerWith(t, a, bb.Name, run, workload, oci.WithEnv([]string{"LANG=C.UTF-8"})) // as declared (suspend checks it)
			ref := filepath.Join(dir, run+".ref.json")
			if _, code := runCLI(t, a, "suspend", "--container", cid, "--config", c.cfg, "--key", key, "--run", run, "--out", ref); code != 0 {
				t.Fatalf("suspend: exit %d", code)
			}
			tarPath := filepath.Join(dir, run+".tar")
			mustCLI(t, a, "", nil, "export", "--ref", ref, "--out", tarPath, "--with-base")
			ns := b.NewNamespace()
			got := filepath.Join(dir, run+".b.ref.json")
			mustCLI(t, b, ns, nil, "import", tarPath, "--trust", pub, "--out", got)
			code, stdout, stderr := srcli(t, b, ns, "resume", "--check", "--copy", "--ref", got, "--config", c.cfg, "--trust", pub)
			var v resume.Verdict
			if err := json.Unmarshal(stdout, &v); err != nil {
				t.Fatalf("exit %d: not a verdict: %v\n%s\n%s", code, err, stdout, stderr)
			}
			if code != c.code || v.Class != c.class {
				t.Errorf("resume --check on the second host: exit %d class %q, want %d %q; %+v", code, v.Class, c.code, c.class, v.Checks)
			}
			if c.code != 0 {
				return
			}
			// and it does resume there: the incarnation is created.
			code, stdout, stderr = srcli(t, b, ns, "resume", "--copy", "--ref", got, "--config", c.cfg, "--trust", pub, "--container", b.ID(run))
			if err := json.Unmarshal(stdout, &v); err != nil || code != 0 || !v.Accepted {
				t.Errorf("resume on the second host: exit %d (%v)\n%s\n%s", code, err, stdout, stderr)
			}
		})
	}
}
