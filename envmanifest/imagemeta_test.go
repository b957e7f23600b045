package envmanifest

import (
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// TestCheckImageMetadata asserts the exact refusals (pointer and class, in
// order) of docs/design.md "Image metadata" for each kind of label, and
// that each message names what it refuses.
func TestCheckImageMetadata(t *testing.T) {
	const lp = ImageMetadataPointer
	type want struct {
		ptr   string
		class Class
		says  string // a substring of the message
	}
	for _, tc := range []struct {
		name  string
		label string
		want  []want
	}{
		{"postCreateCommand", `[{"id":"ghcr.io/devcontainers/features/node:1"},{"postCreateCommand":"npm ci"}]`,
			[]want{{lp + "/1/postCreateCommand", ClassExecutesOrWidens, "postCreateCommand"}}},
		{"privileged true", `[{"privileged":true}]`,
			[]want{{lp + "/0/privileged", ClassExecutesOrWidens, "privileged"}}},
		{"privileged false is refused too", `[{"privileged":false}]`,
			[]want{{lp + "/0/privileged", ClassExecutesOrWidens, "privileged"}}},
		{"capAdd", `[{"id":"ghcr.io/devcontainers/features/go:1","capAdd":["SYS_PTRACE"],"securityOpt":["seccomp=unconfined"]}]`,
			[]want{{lp + "/0/capAdd", ClassExecutesOrWidens, "capAdd"}, {lp + "/0/securityOpt", ClassExecutesOrWidens, "securityOpt"}}},
		{"feature entrypoint", `[{"id":"ghcr.io/devcontainers/features/docker-in-docker:2","entrypoint":"/usr/local/share/docker-init.sh"}]`,
			[]want{{lp + "/0/entrypoint", ClassExecutesOrWidens, "entrypoint"}}},
		{"benign array", `[{"id":"ghcr.io/devcontainers/features/common-utils:2"},{"customizations":{"vscode":{"extensions":["golang.go"]}}},{"containerEnv":{"GOPATH":"/go"}}]`,
			nil},
		{"benign bare object", `{"remoteUser":"vscode","containerEnv":{"LANG":"C.UTF-8"},"forwardPorts":[8080]}`,
			nil},
		{"bare object with a lifecycle hook", `{"remoteUser":"vscode","onCreateCommand":"make setup"}`,
			[]want{{lp + "/onCreateCommand", ClassExecutesOrWidens, "onCreateCommand"}}},
		{"empty array", `[]`, nil},
		{"reserved name in a fragment's containerEnv", `[{"id":"ghcr.io/x/y:1"},{"containerEnv":{"GOPATH":"/go","LD_PRELOAD":"/usr/lib/x.so"}}]`,
			[]want{{lp + "/1/containerEnv/LD_PRELOAD", ClassReservedEnv, "LD_PRELOAD"}}},
		{"reserved name in another letter case, bare object", `{"containerEnv":{"ld_library_path":"/tmp"}}`,
			[]want{{lp + "/containerEnv/ld_library_path", ClassReservedEnv, "ld_library_path"}}},
		{"not JSON", `not json`,
			[]want{{lp, ClassSyntax, "does not decode: 1:2:"}}},
		{"empty label", ``,
			[]want{{lp, ClassSyntax, "does not decode: 1:1:"}}},
		{"syntax error placed in the label", `[{"id": }]`,
			[]want{{lp, ClassSyntax, "does not decode: 1:9:"}}},
		{"syntax error on a later line", "[\n {\"id\": \"a\",\n  ]",
			[]want{{lp, ClassSyntax, "does not decode: 2:12:"}}},
		{"duplicate key", `[{"id":"ghcr.io/devcontainers/features/node:1","postCreateCommand":"a","postCreateCommand":"b"}]`,
			[]want{{lp, ClassDuplicateKey, `/0/postCreateCommand: member "postCreateCommand" appears 2 times`}}},
		{"duplicate keys counted", `[{"id":"a","id":"b"},{"name":"x","name":"y"}]`,
			[]want{{lp, ClassDuplicateKey, "/0/id: member \"id\" appears 2 times (and 1 more)"}}},
		{"two values, not one", `[{"id":"a"}], "n": [{"privileged": true}]`,
			[]want{{lp, ClassSyntax, "not one JSON value"}}},
		{"two values posing as a duplicate", `[{}], "m": [{}]`,
			[]want{{lp, ClassSyntax, "not one JSON value"}}},
		{"trailing data", `[{}] []`,
			[]want{{lp, ClassSyntax, "does not decode"}}},
		{"number beyond I-JSON", `[{"customizations":{"n":9007199254740993}}]`,
			[]want{{lp, ClassNumber, "/0/customizations/n:"}}},
		{"lone surrogate", `[{"name":"\ud800"}]`,
			[]want{{lp, ClassEncoding, "/0/name:"}}},
		{"comments are not JSON", `[/* hook */ {"id":"a"}]`,
			[]want{{lp, ClassSyntax, "does not decode"}}},
		{"JSON but not an array or object", `"postCreateCommand"`,
			[]want{{lp, ClassInvalidValue, "not string"}}},
		{"fragment not an object", `[{"id":"a"}, "privileged", null]`,
			[]want{{lp + "/1", ClassInvalidValue, "not string"}, {lp + "/2", ClassInvalidValue, "not null"}}},
		{"unknown member", `[{"Image":"busybox"}]`,
			[]want{{lp + "/0/Image", ClassUnknownProperty, `"Image"`}}},
		{"changes what runs", `[{"containerUser":"root","remoteEnv":{"A":"1"}}]`,
			[]want{{lp + "/0/containerUser", ClassChangesWhatRuns, "containerUser"}, {lp + "/0/remoteEnv", ClassChangesWhatRuns, "remoteEnv"}}},
		{"hostRequirements.gpu", `[{"hostRequirements":{"cpus":2,"gpu":"optional"}}]`,
			[]want{{lp + "/0/hostRequirements/gpu", ClassExecutesOrWidens, "gpu"}}},
		{"identity members are accepted", `[{"image":"busybox","features":{"ghcr.io/devcontainers/features/node:1":{}},"mounts":[{"source":"cache","target":"/cache","type":"volume"}],"remoteUser":"dev"}]`,
			nil},
		{"every refusal, sorted by pointer", `[{"postStartCommand":"a","capAdd":[],"init":true},{"initializeCommand":"b"},{"build":{"dockerfile":"Dockerfile"}}]`,
			[]want{{lp + "/0/capAdd", ClassExecutesOrWidens, "capAdd"}, {lp + "/0/init", ClassExecutesOrWidens, "init"},
				{lp + "/0/postStartCommand", ClassExecutesOrWidens, "postStartCommand"}, {lp + "/1/initializeCommand", ClassExecutesOrWidens, "initializeCommand"},
				{lp + "/2/build", ClassExecutesOrWidens, "build"}}},
		{"member names escaped in pointers", `[{"a/b~c":1}]`,
			[]want{{lp + "/0/a~1b~0c", ClassUnknownProperty, `"a/b~c"`}}},
		{"docker-in-docker as the tooling writes it", `[{"id":"ghcr.io/devcontainers/features/common-utils:2"},{"id":"ghcr.io/devcontainers/features/docker-in-docker:2","privileged":true,"containerEnv":{"DOCKER_BUILDKIT":"1"},"entrypoint":"/usr/local/share/docker-init.sh","mounts":[{"source":"dind-var-lib-docker-${devcontainerId}","target":"/var/lib/docker","type":"volume"}],"customizations":{"vscode":{"extensions":["ms-azuretools.vscode-docker"]}}},{"remoteUser":"vscode"}]`,
			[]want{{lp + "/1/entrypoint", ClassExecutesOrWidens, "entrypoint"}, {lp + "/1/privileged", ClassExecutesOrWidens, "privileged"}}},
		{"too large", `["` + strings.Repeat("a", strictjson.MaxInputBytes) + `"]`,
			[]want{{lp, ClassLimit, "limit"}}},
		{"too deep", strings.Repeat("[", strictjson.MaxDepth) + strings.Repeat("]", strictjson.MaxDepth),
			[]want{{lp, ClassLimit, "nesting deeper"}}},
		{"deep enough", `[{"customizations":` + strings.Repeat("[", strictjson.MaxDepth-3) + strings.Repeat("]", strictjson.MaxDepth-3) + `}]`,
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckImageMetadata(tc.label)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("got %v, want nil", got)
				}
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d refusals %v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				if got[i].Pointer != w.ptr || got[i].Class != w.class || !strings.Contains(got[i].Message, w.says) {
					t.Errorf("refusal %d = %v, want %s: %s: …%s…", i, got[i], w.ptr, w.class, w.says)
				}
			}
		})
	}
}

// FuzzCheckImageMetadata: no panic on any label; every refusal points at
// or below the label, and refusals are sorted by pointer.
func FuzzCheckImageMetadata(f *testing.F) {
	for _, s := range []string{`[]`, `{}`, `[{"id":"a","entrypoint":"x"}]`, `[{"a":1,"a":2}]`, `[1], "m": [2]`, `"x"`, ``, `[{"hostRequirements":{"gpu":true}}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, label string) {
		rs := CheckImageMetadata(label)
		for i, r := range rs {
			if r.Pointer != ImageMetadataPointer && !strings.HasPrefix(r.Pointer, ImageMetadataPointer+"/") {
				t.Fatalf("refusal outside the label: %v", r)
			}
			if r.Message == "" || r.Class == "" {
				t.Fatalf("refusal without class or message: %v", r)
			}
			if i > 0 && rs[i-1].Pointer > r.Pointer {
				t.Fatalf("refusals not sorted: %v", rs)
			}
		}
	})
}

// TestCheckImageMetadataPolicy: the label's containerEnv goes through the
// policy given (the recorded one at resume), not only the default.
func TestCheckImageMetadataPolicy(t *testing.T) {
	label := `[{"containerEnv":{"LD_PRELOAD":"/x.so","SECRET_TOKEN":"t"}}]`
	if rs := CheckImageMetadataPolicy(label, []string{}); len(rs) != 0 {
		t.Errorf("policy none: %v", rs)
	}
	rs := CheckImageMetadataPolicy(label, []string{"SECRET_TOKEN"})
	if len(rs) != 1 || rs[0].Pointer != ImageMetadataPointer+"/0/containerEnv/SECRET_TOKEN" || rs[0].Class != ClassReservedEnv {
		t.Errorf("policy SECRET_TOKEN: %v", rs)
	}
	if rs := CheckImageMetadata(label); len(rs) != 1 || rs[0].Pointer != ImageMetadataPointer+"/0/containerEnv/LD_PRELOAD" {
		t.Errorf("default policy: %v", rs)
	}
}

// TestCheckImageLabels: labels without the metadata label pass unfound;
// with it, the label's refusals are CheckImageMetadata's.
func TestCheckImageLabels(t *testing.T) {
	if rs, found := CheckImageLabels(map[string]string{"other": "x"}); found || rs != nil {
		t.Errorf("no label: %v, found %v", rs, found)
	}
	if rs, found := CheckImageLabels(map[string]string{ImageMetadataLabel: `[{"id": "f"}]`}); !found || len(rs) != 0 {
		t.Errorf("passing label: %v, found %v", rs, found)
	}
	rs, found := CheckImageLabels(map[string]string{ImageMetadataLabel: `[{"postCreateCommand": "x"}]`})
	if !found || len(rs) != 1 || len(CheckImageMetadata(`[{"postCreateCommand": "x"}]`)) != 1 || rs[0] != CheckImageMetadata(`[{"postCreateCommand": "x"}]`)[0] {
		t.Errorf("refused label: %v, found %v", rs, found)
	}
	if rs, found := CheckImageLabelsPolicy(map[string]string{ImageMetadataLabel: `{"containerEnv": {"HOME": "/x"}}`}, []string{"HOME"}); !found || len(rs) != 1 {
		t.Errorf("reserved name: %v, found %v", rs, found)
	}
}
