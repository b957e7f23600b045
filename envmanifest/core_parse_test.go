package envmanifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
)

// parseCoreText decodes text strictly and runs ParseCore on the root.
func parseCoreText(t *testing.T, text string) (Core, error) {
	t.Helper()
	n, rs := decode([]byte(text), false)
	if len(rs) > 0 {
		t.Fatalf("test input does not decode: %v", rs)
	}
	return ParseCore(n)
}

func TestParseCoreAccepts(t *testing.T) {
	c := signTestCore()
	canonical, err := c.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseCoreText(t, string(canonical))
	if err != nil {
		t.Fatal(err)
	}
	again, err := got.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, canonical) {
		t.Fatalf("round trip:\n%s\n%s", again, canonical)
	}
	// Minimal core; a local and a tarball feature.
	for _, text := range []string{
		`{"image":"docker.io/library/alpine:3","schema":"sandbox.env-manifest/1"}`,
		`{"features":[{"id":"./local-feature","options":{}},{"id":"https://example.com/devcontainer-feature-x.tgz","options":{"a":[1,{"b":null}]}}],"image":"docker.io/library/alpine@sha256:` + strings.Repeat("0", 64) + `","schema":"sandbox.env-manifest/1"}`,
	} {
		if _, err := parseCoreText(t, text); err != nil {
			t.Errorf("%s: %v", text, err)
		}
	}
}

func TestParseCoreRefuses(t *testing.T) {
	const img = `"image":"docker.io/library/alpine:3"`
	const sch = `"schema":"sandbox.env-manifest/1"`
	cases := []struct {
		name, text, pointer string
		class               Class
	}{
		{"unknown member", `{"extra":1,` + img + `,` + sch + `}`, "/extra", ClassUnknownProperty},
		{"case variant", `{"Image":"x",` + img + `,` + sch + `}`, "/Image", ClassUnknownProperty},
		{"missing image", `{` + sch + `}`, "/image", ClassMissing},
		{"missing schema", `{` + img + `}`, "/schema", ClassMissing},
		{"other schema", `{` + img + `,"schema":"sandbox.env-manifest/2"}`, "/schema", ClassInvalidValue},
		{"image not string", `{"image":1,` + sch + `}`, "/image", ClassInvalidValue},
		{"image not normalized", `{"image":"alpine:3",` + sch + `}`, "/image", ClassInvalidValue},
		{"image without tag", `{"image":"docker.io/library/alpine",` + sch + `}`, "/image", ClassInvalidValue},
		{"image bad digest", `{"image":"docker.io/library/alpine@sha256:` + strings.Repeat("A", 64) + `",` + sch + `}`, "/image", ClassInvalidValue},
		{"image null", `{"image":null,` + sch + `}`, "/image", ClassInvalidValue},
		{"remoteUser empty", `{` + img + `,"remoteUser":"",` + sch + `}`, "/remoteUser", ClassInvalidValue},
		{"remoteUser number", `{` + img + `,"remoteUser":0,` + sch + `}`, "/remoteUser", ClassInvalidValue},
		{"containerEnv empty", `{"containerEnv":{},` + img + `,` + sch + `}`, "/containerEnv", ClassInvalidValue},
		{"containerEnv array", `{"containerEnv":[],` + img + `,` + sch + `}`, "/containerEnv", ClassInvalidValue},
		{"containerEnv number value", `{"containerEnv":{"A":1},` + img + `,` + sch + `}`, "/containerEnv/A", ClassInvalidValue},
		{"containerEnv = in name", `{"containerEnv":{"A=B":"1"},` + img + `,` + sch + `}`, "/containerEnv/A=B", ClassInvalidValue},
		{"features object", `{"features":{},` + img + `,` + sch + `}`, "/features", ClassInvalidValue},
		{"features empty", `{"features":[],` + img + `,` + sch + `}`, "/features", ClassInvalidValue},
		{"feature unsorted", `{"features":[{"id":"ghcr.io/b/c:1","options":{}},{"id":"ghcr.io/a/c:1","options":{}}],` + img + `,` + sch + `}`, "/features/1/id", ClassInvalidValue},
		{"feature repeated", `{"features":[{"id":"ghcr.io/a/c:1","options":{}},{"id":"ghcr.io/a/c:1","options":{}}],` + img + `,` + sch + `}`, "/features/1/id", ClassInvalidValue},
		{"feature upper case", `{"features":[{"id":"ghcr.io/A/c:1","options":{}}],` + img + `,` + sch + `}`, "/features/0/id", ClassInvalidValue},
		{"feature no options", `{"features":[{"id":"ghcr.io/a/c:1"}],` + img + `,` + sch + `}`, "/features/0/options", ClassMissing},
		{"feature options string", `{"features":[{"id":"ghcr.io/a/c:1","options":"20"}],` + img + `,` + sch + `}`, "/features/0/options", ClassInvalidValue},
		{"feature extra member", `{"features":[{"id":"ghcr.io/a/c:1","options":{},"x":1}],` + img + `,` + sch + `}`, "/features/0/x", ClassUnknownProperty},
		{"feature local escapes", `{"features":[{"id":"./../x","options":{}}],` + img + `,` + sch + `}`, "/features/0/id", ClassInvalidValue},
		{"mounts empty", `{` + img + `,"mounts":[],` + sch + `}`, "/mounts", ClassInvalidValue},
		{"mount bad kind", `{` + img + `,"mounts":[{"kind":"npipe","target":"/a"}],` + sch + `}`, "/mounts/0/kind", ClassInvalidValue},
		{"mount no target", `{` + img + `,"mounts":[{"kind":"bind"}],` + sch + `}`, "/mounts/0/target", ClassMissing},
		{"mount readonly", `{` + img + `,"mounts":[{"kind":"bind","readonly":true,"target":"/a"}],` + sch + `}`, "/mounts/0/readonly", ClassUnknownProperty},
		{"mount empty source", `{` + img + `,"mounts":[{"kind":"bind","source":"","target":"/a"}],` + sch + `}`, "/mounts/0/source", ClassInvalidValue},
		{"mounts unsorted", `{` + img + `,"mounts":[{"kind":"tmpfs","target":"/b"},{"kind":"tmpfs","target":"/a"}],` + sch + `}`, "/mounts/1/target", ClassInvalidValue},
		{"mounts same path", `{` + img + `,"mounts":[{"kind":"tmpfs","target":"/a"},{"kind":"tmpfs","target":"/a/"}],` + sch + `}`, "/mounts/1/target", ClassConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCoreText(t, tc.text)
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("err %v, want *RefusedError", err)
			}
			found := false
			for _, r := range re.Refusals {
				found = found || (r.Pointer == tc.pointer && r.Class == tc.class)
			}
			if !found {
				t.Fatalf("refusals %v lack %q %s", re.Refusals, tc.pointer, tc.class)
			}
		})
	}
	// Pointers are those of the file: under a signed wrapper they start at /manifest.
	n, _ := decode([]byte(`{"manifest":{"extra":1,`+img+`,`+sch+`}}`), false)
	_, err := ParseCore(n.Get("manifest"))
	var re *RefusedError
	if !errors.As(err, &re) || re.Refusals[0].Pointer != "/manifest/extra" {
		t.Fatalf("nested pointer: %v", err)
	}
}

// TestSignVerifyIngested signs every core that ingestion produces from the
// C7 vectors and the shared corpus and verifies it back: ParseCore must
// accept whatever ingestion writes, with the same address.
func TestSignVerifyIngested(t *testing.T) {
	k := signTestKey(t)
	ring := envelope.NewKeyRing(signTestPub(k))
	check := func(t *testing.T, name string, canonical []byte, address string) {
		t.Helper()
		file, err := envelope.Sign(envelope.MemberManifest, canonical, k)
		if err != nil {
			t.Fatalf("%s: sign: %v", name, err)
		}
		vm, err := VerifySignedManifest(file, ring)
		if err != nil {
			t.Fatalf("%s: verify: %v\n%s", name, err, canonical)
		}
		if vm.Address != address {
			t.Fatalf("%s: address %s, want %s", name, vm.Address, address)
		}
	}
	vectors, _ := filepath.Glob(filepath.Join("testdata", "c7", "*.json"))
	n := 0
	for _, p := range vectors {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Expect struct {
				Canonical string `json:"canonical"`
				Address   string `json:"address"`
			} `json:"expect"`
		}
		if err := json.Unmarshal(data, &v); err != nil || v.Expect.Canonical == "" || v.Expect.Address == "" {
			continue // a refusal vector
		}
		check(t, p, []byte(v.Expect.Canonical), v.Expect.Address)
		n++
	}
	corpus, _ := filepath.Glob(filepath.Join(signTestShared(t), "corpus", "devcontainer", "*.json"))
	m := 0
	for _, p := range corpus {
		man, err := IngestFile(p, Options{})
		if err != nil {
			continue // most of the corpus is refused by design
		}
		check(t, p, man.Canonical, man.Address)
		m++
	}
	t.Logf("signed and verified %d C7 vector cores and %d ingested corpus files", n, m)
	if n+m == 0 {
		t.Fatal("no ingested core to check")
	}
}

// TestParseCoreWithCanonical: given the JCS of the core's text, the core
// is accepted with those very bytes, and given any other bytes (the JCS of
// another core, the text with one byte changed, a non-canonical layout of
// the same core) it is refused as not in normal form: the bytes are never
// trusted to be the core's JCS without a comparison.
func TestParseCoreWithCanonical(t *testing.T) {
	c := signTestCore()
	canonical, err := c.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	n, rs := decode(canonical, false)
	if len(rs) > 0 {
		t.Fatal(rs)
	}
	got, gotCanonical, err := ParseCoreWithCanonical(n, canonical)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotCanonical, canonical) || got.Image != c.Image {
		t.Fatalf("accepted %q with %q", got.Image, gotCanonical)
	}
	other := c
	other.RemoteUser = c.RemoteUser + "x"
	otherCanonical, err := other.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, canonical, "", " "); err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(canonical)
	flipped[len(flipped)/2] ^= 1
	for name, wrong := range map[string][]byte{
		"another core":  otherCanonical,
		"one byte":      flipped,
		"not canonical": indented.Bytes(),
	} {
		_, _, err := ParseCoreWithCanonical(n, wrong)
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Errorf("%s: err %v, want *RefusedError", name, err)
		}
	}
	if _, _, err := ParseCoreWithCanonical(n, nil); err == nil {
		t.Error("nil canonical bytes accepted")
	}
}
