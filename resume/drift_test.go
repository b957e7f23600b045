package resume_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/resume"
)

func pemPublic(t *testing.T, key ed25519.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func feature(id, options string) envmanifest.Feature {
	return envmanifest.Feature{ID: id, Options: json.RawMessage(options)}
}

const node = "ghcr.io/devcontainers/features/node"

func TestDiffCores(t *testing.T) {
	base := envmanifest.Core{
		Schema:       envmanifest.CoreSchema,
		Image:        "docker.io/library/busybox:1",
		Features:     []envmanifest.Feature{feature("ghcr.io/devcontainers/features/go:1", `{}`), feature(node+":1", `{"version":"20"}`)},
		ContainerEnv: map[string]string{"A": "1", "B/x~": "2"},
		Mounts:       []envmanifest.Mount{{Source: "cache", Target: "/cache", Kind: "volume"}},
		RemoteUser:   "vscode",
	}
	tests := []struct {
		name string
		edit func(c *envmanifest.Core)
		want string // the drift as JSON
	}{
		{"equal", func(*envmanifest.Core) {}, `[]`},
		{"options written differently", func(c *envmanifest.Core) {
			c.Features = []envmanifest.Feature{c.Features[0], feature(node+":1", `{ "version" : "20" }`)}
		}, `[]`},
		{"env changed, added, removed; pointer escaped", func(c *envmanifest.Core) {
			c.ContainerEnv = map[string]string{"A": "9", "C": "3"}
		}, `[{"pointer":"/containerEnv/A","recorded":"1","offered":"9"},
			{"pointer":"/containerEnv/B~1x~0","recorded":"2"},
			{"pointer":"/containerEnv/C","offered":"3"}]`},
		{"feature tag to digest is one feature", func(c *envmanifest.Core) {
			c.Features = []envmanifest.Feature{c.Features[0], feature(node+"@sha256:"+strings.Repeat("a", 64), `{"version":"20"}`)}
		}, `[{"pointer":"/features/1","recorded":{"id":"` + node + `:1","options":{"version":"20"}},
			"offered":{"id":"` + node + `@sha256:` + strings.Repeat("a", 64) + `","options":{"version":"20"}}}]`},
		{"feature options changed after a new feature moved it", func(c *envmanifest.Core) {
			c.Features = []envmanifest.Feature{feature("ghcr.io/devcontainers/features/aws-cli:1", `{}`), c.Features[0], feature(node+":1", `{"version":"22"}`)}
		}, `[{"pointer":"/features/0","offered":{"id":"ghcr.io/devcontainers/features/aws-cli:1","options":{}}},
			{"pointer":"/features/1","offeredPointer":"/features/2","recorded":{"id":"` + node + `:1","options":{"version":"20"}},
			 "offered":{"id":"` + node + `:1","options":{"version":"22"}}}]`},
		{"feature removed", func(c *envmanifest.Core) { c.Features = c.Features[:1] },
			`[{"pointer":"/features/1","recorded":{"id":"` + node + `:1","options":{"version":"20"}}}]`},
		{"tarball and local features keyed as written", func(c *envmanifest.Core) {
			c.Features = []envmanifest.Feature{feature("./local", `{}`), feature("https://example.com/devcontainer-feature-x.tgz", `{}`)}
		}, `[{"pointer":"/features/0","recorded":{"id":"ghcr.io/devcontainers/features/go:1","options":{}}},
			{"pointer":"/features/0","offered":{"id":"./local","options":{}}},
			{"pointer":"/features/1","recorded":{"id":"` + node + `:1","options":{"version":"20"}}},
			{"pointer":"/features/1","offered":{"id":"https://example.com/devcontainer-feature-x.tgz","options":{}}}]`},
		{"mount by target", func(c *envmanifest.Core) {
			c.Mounts = []envmanifest.Mount{{Target: "/a", Kind: "tmpfs"}, {Source: "other", Target: "/cache/", Kind: "volume"}}
		}, `[{"pointer":"/mounts/0","offeredPointer":"/mounts/1","recorded":{"source":"cache","target":"/cache","kind":"volume"},
			"offered":{"source":"other","target":"/cache/","kind":"volume"}},
			{"pointer":"/mounts/0","offered":{"target":"/a","kind":"tmpfs"}}]`},
		{"image and remoteUser", func(c *envmanifest.Core) {
			c.Image = "docker.io/library/busybox:2"
			c.RemoteUser = ""
		}, `[{"pointer":"/image","recorded":"docker.io/library/busybox:1","offered":"docker.io/library/busybox:2"},
			{"pointer":"/remoteUser","recorded":"vscode"}]`},
		{"remoteUser added", func(c *envmanifest.Core) {
			c.RemoteUser = "root"
		}, `[{"pointer":"/remoteUser","recorded":"vscode","offered":"root"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			offered := base
			offered.Features = append([]envmanifest.Feature(nil), base.Features...)
			tt.edit(&offered)
			got, err := json.Marshal(resume.DiffCores(&base, &offered))
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, []byte(tt.want)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("drift\n got %s\nwant %s", got, want.Bytes())
			}
		})
	}
	// Recorded-only member: pointer into the recorded core, in both
	// directions.
	noUser := base
	noUser.RemoteUser = ""
	if got := resume.DiffCores(&noUser, &base); len(got) != 1 || got[0].Pointer != "/remoteUser" || got[0].Recorded != nil {
		t.Errorf("offered-only remoteUser: %s", dump(got))
	}
}

func TestVerdictJSON(t *testing.T) {
	fx := newFixture(t, baseConfig)
	// The ledger records the generation (a claim released), so the verdict
	// is no copy and has no "copy" member.
	if err := fx.claimAs(liveResumer(t, "earlier")).Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	v := fx.decide()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"accepted": "true", "class": "null", "exitCode": "0", "refusals": "[]", "drift": "[]"} {
		if string(m[k]) != want {
			t.Errorf("%s = %s, want %s", k, m[k], want)
		}
	}
	for _, k := range []string{"container", "notApplied", "fence", "takenOver"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s present in a --check verdict", k)
		}
	}
	if string(m["run"]) != `"demo-1"` || string(m["generation"]) != "1" {
		t.Errorf("run %s generation %s, want the verified ref's", m["run"], m["generation"])
	}
	if len(m) != 8 {
		t.Errorf("members %d, want 8: %s", len(m), b)
	}
	var checks []map[string]string
	if err := json.Unmarshal(m["checks"], &checks); err != nil {
		t.Fatal(err)
	}
	if len(checks) != 12 || checks[0]["name"] != "ref-parse" || checks[9]["name"] != "memory" || checks[10]["name"] != "spec" || checks[11]["name"] != "claim" || len(checks[0]) != 3 {
		t.Errorf("checks %v", checks)
	}
	var back resume.Verdict
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if dump(&back) != dump(v) {
		t.Errorf("round trip differs:\n%s\n%s", dump(&back), dump(v))
	}

	fx.config = strings.Replace(baseConfig, `"A": "1"`, `"A": "2"`, 1)
	b, _ = json.Marshal(fx.decide())
	if !bytes.Contains(b, []byte(`"class":"manifest-mismatch","exitCode":3`)) || !bytes.Contains(b, []byte(`"drift":[{"pointer":"/containerEnv/A"`)) {
		t.Errorf("mismatch verdict: %s", b)
	}
}

func TestClassExitCodes(t *testing.T) {
	want := map[resume.Class]int{
		resume.ClassBadInput: 2, resume.ClassUntrusted: 6, resume.ClassTampered: 6,
		resume.ClassManifestMismatch: 3, resume.ClassUnpinnedCrossHost: 4,
		resume.ClassImageUnresolved: 5, resume.ClassImageDrifted: 5,
		resume.ClassSnapshotMissing: 7, resume.ClassClaimConflict: 8, resume.ClassInternal: 1,
		resume.Class("nonsense"): 1,
	}
	for c, code := range want {
		if got := c.Code(); got != code {
			t.Errorf("%s: %d, want %d", c, got, code)
		}
	}
}
