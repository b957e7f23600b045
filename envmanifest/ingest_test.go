package envmanifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	dgA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	dgB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	sch = `"schema":"sandbox.env-manifest/1"`
	gh  = "ghcr.io/devcontainers/features/"
)

func img(rest string) string { return `{"image":"ubuntu:22.04"` + rest + `}` }

// canonical core prefix/suffix helpers for the hand-written expectations
const ubuntu = `"image":"docker.io/library/ubuntu:22.04"`

// TestIngestNormalization: inputs that ingest, with the canonical bytes
// written by hand from docs/design.md "Normalization" and "Ingestion".
func TestIngestNormalization(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"image tag normalized", `{"image":"ubuntu:22.04"}`, `{` + ubuntu + `,` + sch + `}`},
		{"bare image gets latest", `{"image":"ubuntu"}`, `{"image":"docker.io/library/ubuntu:latest",` + sch + `}`},
		{"image with registry kept", `{"image":"mcr.microsoft.com/devcontainers/base:2-jammy"}`, `{"image":"mcr.microsoft.com/devcontainers/base:2-jammy",` + sch + `}`},
		{"digest image gets no tag", `{"image":"debian@` + dgA + `"}`, `{"image":"docker.io/library/debian@` + dgA + `",` + sch + `}`},
		{"tag beside digest kept", `{"image":"debian:12@` + dgA + `"}`, `{"image":"docker.io/library/debian:12@` + dgA + `",` + sch + `}`},
		{"sha512 digest accepted", `{"image":"debian@sha512:` + strings.Repeat("c", 128) + `"}`, `{"image":"docker.io/library/debian@sha512:` + strings.Repeat("c", 128) + `",` + sch + `}`},
		{"empty members are absent", img(`,"features":{},"containerEnv":{},"mounts":[],"remoteUser":""`), `{` + ubuntu + `,` + sch + `}`},
		{"remoteUser", img(`,"remoteUser":"vscode"`), `{` + ubuntu + `,"remoteUser":"vscode",` + sch + `}`},
		{"containerEnv sorted, variables kept", img(`,"containerEnv":{"B":"2","A":"${localEnv:HOME}/x"}`), `{"containerEnv":{"A":"${localEnv:HOME}/x","B":"2"},` + ubuntu + `,` + sch + `}`},
		{"feature object options", img(`,"features":{"` + gh + `node:1":{"version":"20"}}`), `{"features":[{"id":"` + gh + `node:1","options":{"version":"20"}}],` + ubuntu + `,` + sch + `}`},
		{"feature empty options", img(`,"features":{"` + gh + `git:1":{}}`), `{"features":[{"id":"` + gh + `git:1","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"feature string shorthand", img(`,"features":{"` + gh + `node:1":"20"}`), `{"features":[{"id":"` + gh + `node:1","options":{"version":"20"}}],` + ubuntu + `,` + sch + `}`},
		{"feature true shorthand", img(`,"features":{"` + gh + `node:1":true}`), `{"features":[{"id":"` + gh + `node:1","options":{"version":true}}],` + ubuntu + `,` + sch + `}`},
		{"feature options canonicalized, types kept", img(`,"features":{"` + gh + `common-utils:2":{"uid":1000,"s":"1000","n":{"b":1.50,"a":[true,null]}}}`),
			`{"features":[{"id":"` + gh + `common-utils:2","options":{"n":{"a":[true,null],"b":1.5},"s":"1000","uid":1000}}],` + ubuntu + `,` + sch + `}`},
		{"legacy bare id", img(`,"features":{"node":{}}`), `{"features":[{"id":"` + gh + `node:1","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"legacy golang maps to go", img(`,"features":{"golang":"1.22"}`), `{"features":[{"id":"` + gh + `go:1","options":{"version":"1.22"}}],` + ubuntu + `,` + sch + `}`},
		{"legacy common maps to common-utils", img(`,"features":{"common":{}}`), `{"features":[{"id":"` + gh + `common-utils:1","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"feature id lower-cased", img(`,"features":{"GHCR.IO/DevContainers/Features/Node:1":{}}`), `{"features":[{"id":"` + gh + `node:1","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"bare OCI feature gets latest", img(`,"features":{"` + gh + `node":{}}`), `{"features":[{"id":"` + gh + `node:latest","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"digest feature", img(`,"features":{"` + gh + `node@` + dgA + `":{}}`), `{"features":[{"id":"` + gh + `node@` + dgA + `","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"uppercase digest hex lower-cased first", img(`,"features":{"` + gh + `node@` + strings.ToUpper(dgA) + `":{}}`), `{"features":[{"id":"` + gh + `node@` + dgA + `","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"feature tag beside digest kept", img(`,"features":{"` + gh + `node:1@` + dgA + `":{}}`), `{"features":[{"id":"` + gh + `node:1@` + dgA + `","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"devcontainers-contrib kept", img(`,"features":{"ghcr.io/devcontainers-contrib/features/hatch:2":{}}`), `{"features":[{"id":"ghcr.io/devcontainers-contrib/features/hatch:2","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"registry with port", img(`,"features":{"localhost:5000/features/x:1":{}}`), `{"features":[{"id":"localhost:5000/features/x:1","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"tarball kept as written", img(`,"features":{"https://Example.com/f/devcontainer-feature-Hello_1.tgz":{}}`), `{"features":[{"id":"https://Example.com/f/devcontainer-feature-Hello_1.tgz","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"local id cleaned", img(`,"features":{"./local-features/../x//y/":{}}`), `{"features":[{"id":"./x/y","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"features sorted by id", img(`,"features":{"` + gh + `python:1":{},"./z":{},"https://h/devcontainer-feature-a.tgz":{},"` + gh + `go:1":{}}`),
			`{"features":[{"id":"./z","options":{}},{"id":"` + gh + `go:1","options":{}},{"id":"` + gh + `python:1","options":{}},{"id":"https://h/devcontainer-feature-a.tgz","options":{}}],` + ubuntu + `,` + sch + `}`},
		{"mount string", img(`,"mounts":["source=/a,target=/x,type=bind"]`), `{` + ubuntu + `,"mounts":[{"kind":"bind","source":"/a","target":"/x"}],` + sch + `}`},
		{"mount string aliases and case", img(`,"mounts":["SRC=/a,Dst=/x,TYPE=BIND"]`), `{` + ubuntu + `,"mounts":[{"kind":"bind","source":"/a","target":"/x"}],` + sch + `}`},
		{"mount destination alias", img(`,"mounts":["destination=/x,source=v"]`), `{` + ubuntu + `,"mounts":[{"kind":"volume","source":"v","target":"/x"}],` + sch + `}`},
		{"mount string defaults to volume", img(`,"mounts":["target=/v"]`), `{` + ubuntu + `,"mounts":[{"kind":"volume","target":"/v"}],` + sch + `}`},
		{"mount tmpfs in string form", img(`,"mounts":["type=tmpfs,target=/t"]`), `{` + ubuntu + `,"mounts":[{"kind":"tmpfs","target":"/t"}],` + sch + `}`},
		{"mount consistency dropped", img(`,"mounts":["type=bind,source=/a,target=/x,consistency=cached",{"type":"volume","target":"/y","consistency":"delegated"}]`),
			`{` + ubuntu + `,"mounts":[{"kind":"bind","source":"/a","target":"/x"},{"kind":"volume","target":"/y"}],` + sch + `}`},
		{"mount CSV quoting", img(`,"mounts":["\"source=${localWorkspaceFolder}/a,b\",target=/q,type=bind"]`), `{` + ubuntu + `,"mounts":[{"kind":"bind","source":"${localWorkspaceFolder}/a,b","target":"/q"}],` + sch + `}`},
		{"mount empty source is absent", img(`,"mounts":[{"type":"volume","source":"","target":"/e"},"source=,target=/f"]`),
			`{` + ubuntu + `,"mounts":[{"kind":"volume","target":"/e"},{"kind":"volume","target":"/f"}],` + sch + `}`},
		{"mounts sorted by target, stored as written", img(`,"mounts":["target=/b/",{"type":"bind","source":"s","target":"/a"}]`),
			`{` + ubuntu + `,"mounts":[{"kind":"bind","source":"s","target":"/a"},{"kind":"volume","target":"/b/"}],` + sch + `}`},
		{"cosmetic and networking members excluded", img(`,"name":"x","customizations":{"vscode":{}},"forwardPorts":[3000],"hostRequirements":{"cpus":2}`), `{` + ubuntu + `,` + sch + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Ingest([]byte(tt.in), Options{})
			if err != nil {
				t.Fatalf("Ingest: %v", err)
			}
			if string(m.Canonical) != tt.want {
				t.Errorf("canonical =\n  %s\nwant\n  %s", m.Canonical, tt.want)
			}
			if m.Address != Address([]byte(tt.want)) {
				t.Errorf("address %s is not the BLAKE3 of the canonical bytes", m.Address)
			}
		})
	}
}

// TestIngestRefusals: every refusal row of docs/design.md "Ingestion" and the
// class table, expected pointers and classes written by hand (sorted by
// pointer, stable).
func TestIngestRefusals(t *testing.T) {
	tests := []struct {
		name string
		in   string
		opts Options
		want []pc
	}{
		{"unknown property (case variant)", `{"Image":"ubuntu"}`, Options{}, []pc{{"/Image", ClassUnknownProperty}, {"/image", ClassMissing}}},
		{"missing image alone", `{"name":"x"}`, Options{}, []pc{{"/image", ClassMissing}}},
		{"missing image beside others", `{"build":{},"runArgs":[]}`, Options{}, []pc{{"/build", ClassExecutesOrWidens}, {"/image", ClassMissing}, {"/runArgs", ClassExecutesOrWidens}}},
		{"privileged false still refused", img(`,"privileged":false`), Options{}, []pc{{"/privileged", ClassExecutesOrWidens}}},
		{"lifecycle commands", img(`,"postCreateCommand":"x","initializeCommand":[],"onCreateCommand":{}`), Options{}, []pc{{"/initializeCommand", ClassExecutesOrWidens}, {"/onCreateCommand", ClassExecutesOrWidens}, {"/postCreateCommand", ClassExecutesOrWidens}}},
		{"changes what runs", img(`,"containerUser":"root","remoteEnv":{},"workspaceFolder":"/w"`), Options{}, []pc{{"/containerUser", ClassChangesWhatRuns}, {"/remoteEnv", ClassChangesWhatRuns}, {"/workspaceFolder", ClassChangesWhatRuns}}},
		{"hostRequirements.gpu false", img(`,"hostRequirements":{"cpus":2,"gpu":false}`), Options{}, []pc{{"/hostRequirements/gpu", ClassExecutesOrWidens}}},
		{"null identity member", img(`,"features":null,"mounts":null,"containerEnv":null,"remoteUser":null`), Options{}, []pc{{"/containerEnv", ClassInvalidValue}, {"/features", ClassInvalidValue}, {"/mounts", ClassInvalidValue}, {"/remoteUser", ClassInvalidValue}}},
		{"null image is invalid, not missing", `{"image":null}`, Options{}, []pc{{"/image", ClassInvalidValue}}},
		{"duplicate image", `{"image":"a","image":"b"}`, Options{}, []pc{{"/image", ClassDuplicateKey}}},
		{"duplicate refused member gets both", img(`,"postCreateCommand":"a","postCreateCommand":"b"`), Options{}, []pc{{"/postCreateCommand", ClassDuplicateKey}, {"/postCreateCommand", ClassExecutesOrWidens}}},
		{"duplicate inside excluded member", img(`,"customizations":{"a":1,"a":2}`), Options{}, []pc{{"/customizations/a", ClassDuplicateKey}}},
		{"duplicate feature key", img(`,"features":{"node":{},"node":{}}`), Options{}, []pc{{"/features/node", ClassDuplicateKey}}},
		{"number refused in options", img(`,"features":{"node":{"v":9007199254740993}}`), Options{}, []pc{{"/features/node/v", ClassNumber}}},
		{"image not a string", `{"image":1}`, Options{}, []pc{{"/image", ClassInvalidValue}}},
		{"image invalid reference", `{"image":"Ubuntu:22.04"}`, Options{}, []pc{{"/image", ClassInvalidValue}}},
		{"image variable makes it invalid", `{"image":"${localEnv:IMG:mcr.microsoft.com/base:2}"}`, Options{}, []pc{{"/image", ClassInvalidValue}}},
		{"image short sha256", `{"image":"debian@sha256:` + strings.Repeat("a", 63) + `"}`, Options{}, []pc{{"/image", ClassInvalidValue}}},
		{"image uppercase sha256", `{"image":"debian@sha256:` + strings.Repeat("A", 64) + `"}`, Options{}, []pc{{"/image", ClassInvalidValue}}},
		{"image unknown algorithm", `{"image":"debian@md5:` + strings.Repeat("a", 32) + `"}`, Options{}, []pc{{"/image", ClassInvalidValue}}},
		{"features not an object", img(`,"features":[]`), Options{}, []pc{{"/features", ClassInvalidValue}}},
		{"feature false", img(`,"features":{"node":false}`), Options{}, []pc{{"/features/node", ClassInvalidValue}}},
		{"feature empty string", img(`,"features":{"node":""}`), Options{}, []pc{{"/features/node", ClassInvalidValue}}},
		{"feature number value", img(`,"features":{"node":1}`), Options{}, []pc{{"/features/node", ClassInvalidValue}}},
		{"feature null value", img(`,"features":{"node":null}`), Options{}, []pc{{"/features/node", ClassInvalidValue}}},
		{"legacy gradle maven jupyterlab", img(`,"features":{"gradle":{},"maven":{},"jupyterlab":{}}`), Options{}, []pc{{"/features/gradle", ClassInvalidValue}, {"/features/jupyterlab", ClassInvalidValue}, {"/features/maven", ClassInvalidValue}}},
		{"unknown bare id", img(`,"features":{"fish":{}}`), Options{}, []pc{{"/features/fish", ClassInvalidValue}}},
		{"legacy match is case-sensitive", img(`,"features":{"Node":{}}`), Options{}, []pc{{"/features/Node", ClassInvalidValue}}},
		{"GitHub-release shorthand", img(`,"features":{"devcontainers/features/go@v0.0.1":{},"owner/repo/feat":{}}`), Options{}, []pc{{"/features/devcontainers~1features~1go@v0.0.1", ClassInvalidValue}, {"/features/owner~1repo~1feat", ClassInvalidValue}}},
		{"non-ASCII feature id", img(`,"features":{"ghcr.io/ü/x:1":{}}`), Options{}, []pc{{"/features/ghcr.io~1ü~1x:1", ClassInvalidValue}}},
		{"feature short digest", img(`,"features":{"ghcr.io/a/b@sha256:abc":{}}`), Options{}, []pc{{"/features/ghcr.io~1a~1b@sha256:abc", ClassInvalidValue}}},
		{"two keys one id (legacy)", img(`,"features":{"node":{},"` + gh + `node:1":{}}`), Options{}, []pc{{"/features/ghcr.io~1devcontainers~1features~1node:1", ClassConflict}, {"/features/node", ClassConflict}}},
		{"two keys one id (case)", img(`,"features":{"ghcr.io/a/b:1":{},"GHCR.io/a/b:1":"x"}`), Options{}, []pc{{"/features/GHCR.io~1a~1b:1", ClassConflict}, {"/features/ghcr.io~1a~1b:1", ClassConflict}}},
		{"tarball over http", img(`,"features":{"http://h/devcontainer-feature-a.tgz":{}}`), Options{}, []pc{{"/features/http:~1~1h~1devcontainer-feature-a.tgz", ClassInvalidValue}}},
		{"tarball with credentials", img(`,"features":{"https://u:p@h/devcontainer-feature-a.tgz":{}}`), Options{}, []pc{{"/features/https:~1~1u:p@h~1devcontainer-feature-a.tgz", ClassInvalidValue}}},
		{"tarball with query", img(`,"features":{"https://h/devcontainer-feature-a.tgz?x=1":{}}`), Options{}, []pc{{"/features/https:~1~1h~1devcontainer-feature-a.tgz?x=1", ClassInvalidValue}}},
		{"tarball with fragment", img(`,"features":{"https://h/devcontainer-feature-a.tgz#f":{}}`), Options{}, []pc{{"/features/https:~1~1h~1devcontainer-feature-a.tgz#f", ClassInvalidValue}}},
		{"tarball bad name", img(`,"features":{"https://h/feature-a.tgz":{},"https://h/devcontainer-feature-a.b.tgz":{}}`), Options{}, []pc{{"/features/https:~1~1h~1devcontainer-feature-a.b.tgz", ClassInvalidValue}, {"/features/https:~1~1h~1feature-a.tgz", ClassInvalidValue}}},
		{"local absolute", img(`,"features":{"/abs/x":{}}`), Options{}, []pc{{"/features/~1abs~1x", ClassInvalidValue}}},
		{"local escaping", img(`,"features":{"../x":{},"./../x":{},"./a/../../b":{}}`), Options{}, []pc{{"/features/..~1x", ClassInvalidValue}, {"/features/.~1..~1x", ClassInvalidValue}, {"/features/.~1a~1..~1..~1b", ClassInvalidValue}}},
		{"local ./ alone", img(`,"features":{"./":{},"./a/..":{}}`), Options{}, []pc{{"/features/.~1", ClassInvalidValue}, {"/features/.~1a~1..", ClassInvalidValue}}},
		{"containerEnv not an object", img(`,"containerEnv":["A=1"]`), Options{}, []pc{{"/containerEnv", ClassInvalidValue}}},
		{"containerEnv bad keys and values", img(`,"containerEnv":{"":"x","A=B":"x","N":1,"Z":null}`), Options{}, []pc{{"/containerEnv/", ClassInvalidValue}, {"/containerEnv/A=B", ClassInvalidValue}, {"/containerEnv/N", ClassInvalidValue}, {"/containerEnv/Z", ClassInvalidValue}}},
		{"reserved env in any case", img(`,"containerEnv":{"ld_preload":"x","OK":"y"}`), Options{Reserved: []string{"LD_PRELOAD"}}, []pc{{"/containerEnv/ld_preload", ClassReservedEnv}}},
		{"mounts not an array", img(`,"mounts":{}`), Options{}, []pc{{"/mounts", ClassInvalidValue}}},
		{"mount element not string or object", img(`,"mounts":[1]`), Options{}, []pc{{"/mounts/0", ClassInvalidValue}}},
		{"mount readonly flag", img(`,"mounts":["target=/x,readonly"]`), Options{}, []pc{{"/mounts/0", ClassChangesWhatRuns}}},
		{"mount readonly=false", img(`,"mounts":["target=/x,readonly=false"]`), Options{}, []pc{{"/mounts/0", ClassChangesWhatRuns}}},
		{"mount two options, two refusals", img(`,"mounts":["target=/x,ro,volume-opt=a=b"]`), Options{}, []pc{{"/mounts/0", ClassChangesWhatRuns}, {"/mounts/0", ClassChangesWhatRuns}}},
		{"mount unknown option", img(`,"mounts":["target=/x,foo=1"]`), Options{}, []pc{{"/mounts/0", ClassInvalidValue}}},
		{"mount repeated key", img(`,"mounts":["target=/1,target=/2"]`), Options{}, []pc{{"/mounts/0", ClassInvalidValue}}},
		{"mount repeated key through an alias", img(`,"mounts":["target=/v","source=a,SRC=b,target=/w"]`), Options{}, []pc{{"/mounts/1", ClassInvalidValue}}},
		{"mount repeated type", img(`,"mounts":["type=bind,type=volume,target=/x,source=/a"]`), Options{}, []pc{{"/mounts/0", ClassInvalidValue}}},
		{"mount LF", img(`,"mounts":["target=/x\n"]`), Options{}, []pc{{"/mounts/0", ClassInvalidValue}}},
		{"mount CR", img(`,"mounts":["target=/x\r"]`), Options{}, []pc{{"/mounts/0", ClassInvalidValue}}},
		{"mount bad type", img(`,"mounts":["type=npipe,target=/x"]`), Options{}, []pc{{"/mounts/0", ClassInvalidValue}}},
		{"mount string without target", img(`,"mounts":["source=/a,type=bind"]`), Options{}, []pc{{"/mounts/0", ClassMissing}}},
		{"mount object missing type and target", img(`,"mounts":[{"source":"/a"}]`), Options{}, []pc{{"/mounts/0/target", ClassMissing}, {"/mounts/0/type", ClassMissing}}},
		{"mount object tmpfs refused", img(`,"mounts":[{"type":"tmpfs","target":"/t"}]`), Options{}, []pc{{"/mounts/0/type", ClassInvalidValue}}},
		{"mount object type case-sensitive", img(`,"mounts":[{"type":"Bind","target":"/t"}]`), Options{}, []pc{{"/mounts/0/type", ClassInvalidValue}}},
		{"mount object readonly", img(`,"mounts":[{"type":"bind","source":"/a","target":"/t","readonly":true}]`), Options{}, []pc{{"/mounts/0/readonly", ClassChangesWhatRuns}}},
		{"mount object unknown key", img(`,"mounts":[{"type":"bind","target":"/t","external":true}]`), Options{}, []pc{{"/mounts/0/external", ClassInvalidValue}}},
		{"mount object comma in target", img(`,"mounts":[{"type":"bind","source":"/a","target":"/t,readonly"}]`), Options{}, []pc{{"/mounts/0/target", ClassInvalidValue}}},
		{"mount object LF in source", img(`,"mounts":[{"type":"bind","source":"/a\n","target":"/t"}]`), Options{}, []pc{{"/mounts/0/source", ClassInvalidValue}}},
		{"mount targets equal after Clean", img(`,"mounts":["target=/x",{"type":"bind","source":"/s","target":"/x/"},"target=/y"]`), Options{}, []pc{{"/mounts/0", ClassConflict}, {"/mounts/1", ClassConflict}}},
		{"remoteUser not a string", img(`,"remoteUser":5`), Options{}, []pc{{"/remoteUser", ClassInvalidValue}}},
		{"fatal syntax stops everything", `{"runArgs":[] "x"}`, Options{}, []pc{{"", ClassSyntax}}},
		{"refusals sorted by pointer", `{"runArgs":[],"Zeta":1,"build":{},"features":{"fish":1}}`, Options{}, []pc{{"/Zeta", ClassUnknownProperty}, {"/build", ClassExecutesOrWidens}, {"/features/fish", ClassInvalidValue}, {"/features/fish", ClassInvalidValue}, {"/image", ClassMissing}, {"/runArgs", ClassExecutesOrWidens}}}, // the id and the value
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Ingest([]byte(tt.in), tt.opts)
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("Ingest = %v, %v; want a *RefusedError", m, err)
			}
			if re.Source != "-" {
				t.Errorf("Source = %q, want -", re.Source)
			}
			if !samePCs(re.Refusals, tt.want) {
				t.Errorf("refusals =\n  %v\nwant\n  %v", re.Refusals, tt.want)
			}
			if !sort.SliceIsSorted(re.Refusals, func(i, j int) bool { return re.Refusals[i].Pointer < re.Refusals[j].Pointer }) {
				t.Error("refusals are not sorted by pointer")
			}
		})
	}
}

// TestIngestDeterminism: spellings docs/design.md "Normalization" says share one address.
func TestIngestDeterminism(t *testing.T) {
	groups := [][]string{
		{
			`{"image":"ubuntu:22.04","remoteUser":"u","containerEnv":{"A":"1","B":"2"}}`,
			"\ufeff{\n  // comment\n  \"containerEnv\": {\"B\": \"2\", \"A\": \"1\",},\n  /* c */ \"remoteUser\": \"u\",\n  \"image\": \"docker.io/library/ubuntu:22.04\",\n}\n",
			`{"image":"ubuntu:22.04","remoteUser":"u","containerEnv":{"A":"1","B":"2"},"name":"cosmetic","forwardPorts":[1]}`,
		},
		{`{"image":"ubuntu"}`, `{"image":"ubuntu:latest"}`, `{"image":"docker.io/library/ubuntu:latest"}`, `{"image":"index.docker.io/library/ubuntu"}`},
		{
			img(`,"features":{"` + gh + `node:1":"20"}`),
			img(`,"features":{"` + gh + `node:1":{"version":"20"}}`),
			img(`,"features":{"GHCR.IO/devcontainers/features/NODE:1":{"version":"20"}}`),
			img(`,"features":{"node":"20"}`),
		},
		{
			img(`,"mounts":["source=/a,target=/x,type=bind"]`),
			img(`,"mounts":["type=bind,src=/a,dst=/x"]`),
			img(`,"mounts":["Type=Bind,Source=/a,Destination=/x,consistency=cached"]`),
			img(`,"mounts":[{"target":"/x","source":"/a","type":"bind"}]`),
		},
	}
	for gi, g := range groups {
		var first string
		for i, in := range g {
			m, err := Ingest([]byte(in), Options{})
			if err != nil {
				t.Fatalf("group %d member %d: %v", gi, i, err)
			}
			if i == 0 {
				first = m.Address
			} else if m.Address != first {
				t.Errorf("group %d member %d: address %s, want %s (canonical %s)", gi, i, m.Address, first, m.Canonical)
			}
		}
	}
}

// TestIngestExcluded: top-level pointers of cosmetic/networking members,
// sorted, escaped.
func TestIngestExcluded(t *testing.T) {
	m, err := Ingest([]byte(img(`,"name":"n","$schema":"s","forwardPorts":[],"appPort":1,"customizations":{},"otherPortsAttributes":{},"portsAttributes":{},"waitFor":"x","shutdownAction":"none","secrets":{},"hostRequirements":{},"extensions":[],"settings":{},"devPort":1,"codespaces":{}`)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "/$schema /appPort /codespaces /customizations /devPort /extensions /forwardPorts /hostRequirements /name /otherPortsAttributes /portsAttributes /secrets /settings /shutdownAction /waitFor"
	if got := strings.Join(m.Excluded, " "); got != want {
		t.Errorf("excluded = %s\nwant %s", got, want)
	}
	m, err = Ingest([]byte(img("")), Options{})
	if err != nil || len(m.Excluded) != 0 {
		t.Errorf("excluded = %v, %v; want none", m.Excluded, err)
	}
}

// TestPinned: seed 002 and docs/design.md "Pinned".
func TestPinned(t *testing.T) {
	tests := []struct {
		name                string
		in                  string
		pinned, imagePinned bool
	}{
		{"tag image", `{"image":"debian:12"}`, false, false},
		{"digest image, no features", `{"image":"debian@` + dgA + `"}`, true, true},
		{"digest image, features by tag (seed 002)", `{"image":"debian@` + dgA + `","features":{"rust":{},"node":{}}}`, false, true},
		{"digest image, one feature by tag", `{"image":"debian@` + dgA + `","features":{"` + gh + `rust@` + dgB + `":{},"` + gh + `node:1":{}}}`, false, true},
		{"digest image and digest features", `{"image":"debian@` + dgA + `","features":{"` + gh + `rust@` + dgB + `":{},"` + gh + `node:1@` + dgA + `":{}}}`, true, true},
		{"tag image, digest features", `{"image":"debian:12","features":{"` + gh + `rust@` + dgB + `":{}}}`, false, false},
		{"tarball feature is never pinned", `{"image":"debian@` + dgA + `","features":{"https://h/devcontainer-feature-a.tgz":{}}}`, false, true},
		{"local feature is never pinned", `{"image":"debian@` + dgA + `","features":{"./f":{}}}`, false, true},
		{"sha512 image is unpinned", `{"image":"debian@sha512:` + strings.Repeat("c", 128) + `"}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Ingest([]byte(tt.in), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if m.IsPinned() != tt.pinned || m.ImagePinned() != tt.imagePinned {
				t.Errorf("pinned %v imagePinned %v, want %v %v", m.IsPinned(), m.ImagePinned(), tt.pinned, tt.imagePinned)
			}
		})
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func lockEntry(key, resolved, integrity string) string {
	return `"` + key + `":{"version":"1.0.0","resolved":"` + resolved + `","integrity":"` + integrity + `"}`
}

// TestLockfile: docs/design.md "Normalization": lockfile.
func TestLockfile(t *testing.T) {
	node := gh + "node:1"
	cfg := `{"image":"debian@` + dgA + `","features":{"` + node + `":{"version":"20"},"./local":{},"https://h/devcontainer-feature-a.tgz":{}}}`
	good := `{"features":{` + lockEntry(node, gh+"node@"+dgB, dgB) + `,` + lockEntry("https://h/devcontainer-feature-a.tgz", "https://h/devcontainer-feature-a.tgz", "sha256:00") + `}}`
	wantPinnedCore := `{"features":[{"id":"./local","options":{}},{"id":"` + gh + `node@` + dgB + `","options":{"version":"20"}},{"id":"https://h/devcontainer-feature-a.tgz","options":{}}],"image":"docker.io/library/debian@` + dgA + `",` + sch + `}`

	t.Run("discovered beside devcontainer.json replaces the id", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "devcontainer.json"), cfg)
		writeFile(t, filepath.Join(dir, "devcontainer-lock.json"), good)
		m, err := IngestFile(filepath.Join(dir, "devcontainer.json"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Canonical) != wantPinnedCore {
			t.Errorf("canonical = %s\nwant %s", m.Canonical, wantPinnedCore)
		}
		sum := sha256.Sum256([]byte(good))
		if m.Lockfile != "sha256:"+hex.EncodeToString(sum[:]) || m.LockfilePath != filepath.Join(dir, "devcontainer-lock.json") {
			t.Errorf("lockfile = %s %s", m.Lockfile, m.LockfilePath)
		}
	})
	t.Run("dotted config uses the dotted lockfile only", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, ".devcontainer.json"), cfg)
		writeFile(t, filepath.Join(dir, "devcontainer-lock.json"), good)
		m, err := IngestFile(filepath.Join(dir, ".devcontainer.json"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Lockfile != "" || strings.Contains(string(m.Canonical), dgB) {
			t.Errorf("devcontainer-lock.json was used beside .devcontainer.json: %s", m.Canonical)
		}
		writeFile(t, filepath.Join(dir, ".devcontainer-lock.json"), good)
		m, err = IngestFile(filepath.Join(dir, ".devcontainer.json"), Options{})
		if err != nil || string(m.Canonical) != wantPinnedCore {
			t.Errorf("with .devcontainer-lock.json: %v %s", err, m.Canonical)
		}
	})
	t.Run("explicit lockfile, stdin", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "x.json"), good)
		m, err := Ingest([]byte(cfg), Options{Lockfile: filepath.Join(dir, "x.json")})
		if err != nil || string(m.Canonical) != wantPinnedCore {
			t.Errorf("%v %s", err, m.Canonical)
		}
	})
	t.Run("stdin has no discovery", func(t *testing.T) {
		m, err := Ingest([]byte(cfg), Options{})
		if err != nil || m.Lockfile != "" {
			t.Errorf("%v %v", err, m)
		}
	})
	t.Run("empty lockfile has no entries", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "devcontainer.json"), cfg)
		writeFile(t, filepath.Join(dir, "devcontainer-lock.json"), "")
		m, err := IngestFile(filepath.Join(dir, "devcontainer.json"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(m.Canonical), `"`+node+`"`) || m.Lockfile != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
			t.Errorf("%s %s", m.Canonical, m.Lockfile)
		}
	})
	t.Run("pinning makes the manifest pinned", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "devcontainer.json"), `{"image":"debian@`+dgA+`","features":{"`+node+`":{}}}`)
		writeFile(t, filepath.Join(dir, "devcontainer-lock.json"), good)
		m, err := IngestFile(filepath.Join(dir, "devcontainer.json"), Options{})
		if err != nil || !m.IsPinned() {
			t.Errorf("%v pinned=%v", err, m != nil && m.IsPinned())
		}
	})
	refused := []struct {
		name, cfg, lock string
		opts            Options
		noLock          bool
		want            []pc
	}{
		{"integrity disagrees", cfg, `{"features":{` + lockEntry(node, gh+"node@"+dgB, dgA) + `}}`, Options{}, false, []pc{{"/features/" + strings.ReplaceAll(node, "/", "~1"), ClassLockfile}}},
		{"resolved not a digest reference", cfg, `{"features":{` + lockEntry(node, gh+"node:1", dgB) + `}}`, Options{}, false, []pc{{"/features/" + strings.ReplaceAll(node, "/", "~1"), ClassLockfile}}},
		{"lockfile does not parse (comments)", cfg, "// c\n" + good, Options{}, false, []pc{{"", ClassLockfile}}},
		{"lockfile duplicate keys", cfg, `{"features":{},"features":{}}`, Options{}, false, []pc{{"", ClassLockfile}}},
		{"key digest differs from entry", `{"image":"debian@` + dgA + `","features":{"` + gh + `node@` + dgA + `":{}}}`, `{"features":{` + lockEntry(gh+"node@"+dgA, gh+"node@"+dgB, dgB) + `}}`, Options{}, false, []pc{{"/features/" + strings.ReplaceAll(gh+"node@"+dgA, "/", "~1"), ClassLockfile}}},
		{"required but absent", cfg, "", Options{RequireLockfile: true}, true, []pc{{"", ClassLockfile}}},
		{"explicit path missing", cfg, "", Options{Lockfile: "/nonexistent/lock.json"}, true, []pc{{"", ClassLockfile}}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "devcontainer.json"), tt.cfg)
			if !tt.noLock {
				writeFile(t, filepath.Join(dir, "devcontainer-lock.json"), tt.lock)
			}
			_, err := IngestFile(filepath.Join(dir, "devcontainer.json"), tt.opts)
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want refused", err)
			}
			if !samePCs(re.Refusals, tt.want) {
				t.Errorf("refusals = %v, want %v", re.Refusals, tt.want)
			}
			if re.Source != filepath.Join(dir, "devcontainer.json") {
				t.Errorf("Source = %q", re.Source)
			}
		})
	}
	t.Run("lookup uses the key exactly as written", func(t *testing.T) {
		dir := t.TempDir()
		upper := "GHCR.IO/devcontainers/features/node:1"
		writeFile(t, filepath.Join(dir, "devcontainer.json"), `{"image":"debian:12","features":{"`+upper+`":{}}}`)
		writeFile(t, filepath.Join(dir, "devcontainer-lock.json"), good) // entry under the lower-case key
		m, err := IngestFile(filepath.Join(dir, "devcontainer.json"), Options{})
		if err != nil || strings.Contains(string(m.Canonical), dgB) {
			t.Errorf("%v %s", err, m.Canonical)
		}
	})
}

func TestIngestFileMissing(t *testing.T) {
	_, err := IngestFile(filepath.Join(t.TempDir(), "nope.json"), Options{})
	var re *RefusedError
	if !errors.Is(err, fs.ErrNotExist) || errors.As(err, &re) {
		t.Errorf("err = %v, want fs.ErrNotExist and not a RefusedError", err)
	}
}

// TestPropertyTable: the table covers exactly the properties listed in
// notes/devcontainer.md §a, with the classes of docs/design.md "Property classes".
func TestPropertyTable(t *testing.T) {
	want := map[string]PropertyClass{
		"image": PropIdentity, "features": PropIdentity, "containerEnv": PropIdentity, "mounts": PropIdentity, "remoteUser": PropIdentity,
		"$schema": PropCosmetic, "name": PropCosmetic, "customizations": PropCosmetic, "waitFor": PropCosmetic, "shutdownAction": PropCosmetic,
		"secrets": PropCosmetic, "hostRequirements": PropCosmetic, "extensions": PropCosmetic, "settings": PropCosmetic, "devPort": PropCosmetic, "codespaces": PropCosmetic,
		"forwardPorts": PropNetworking, "appPort": PropNetworking, "portsAttributes": PropNetworking, "otherPortsAttributes": PropNetworking,
		"build": PropExecutesOrWidens, "dockerFile": PropExecutesOrWidens, "context": PropExecutesOrWidens, "dockerComposeFile": PropExecutesOrWidens,
		"service": PropExecutesOrWidens, "runServices": PropExecutesOrWidens, "initializeCommand": PropExecutesOrWidens, "onCreateCommand": PropExecutesOrWidens,
		"updateContentCommand": PropExecutesOrWidens, "postCreateCommand": PropExecutesOrWidens, "postStartCommand": PropExecutesOrWidens,
		"postAttachCommand": PropExecutesOrWidens, "runArgs": PropExecutesOrWidens, "privileged": PropExecutesOrWidens, "capAdd": PropExecutesOrWidens,
		"securityOpt": PropExecutesOrWidens, "init": PropExecutesOrWidens, "workspaceMount": PropExecutesOrWidens,
		"containerUser": PropChangesWhatRuns, "remoteEnv": PropChangesWhatRuns, "overrideCommand": PropChangesWhatRuns, "userEnvProbe": PropChangesWhatRuns,
		"updateRemoteUserUID": PropChangesWhatRuns, "overrideFeatureInstallOrder": PropChangesWhatRuns, "workspaceFolder": PropChangesWhatRuns,
	}
	props := Properties()
	if len(props) != len(want) {
		t.Errorf("table has %d properties, want %d", len(props), len(want))
	}
	for i, p := range props {
		if i > 0 && props[i-1].Name >= p.Name {
			t.Errorf("not sorted at %q", p.Name)
		}
		if c, ok := want[p.Name]; !ok || c != p.Class {
			t.Errorf("%s: class %q, want %q (known %v)", p.Name, p.Class, c, ok)
		}
		if p.Note == "" {
			t.Errorf("%s has no note", p.Name)
		}
	}
	props[0].Name = "mutated"
	if Properties()[0].Name == "mutated" {
		t.Error("Properties returns the table itself, not a copy")
	}
}
