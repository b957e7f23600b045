package runspec_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/runspec"
)

func TestCgroupsPath(t *testing.T) {
	for _, tc := range []struct{ recorded, want string }{
		{"/default/old", "/ns/new"},
		{"", "/ns/new"},
		{"/a/b/c", "/ns/new"},
		{"system.slice:sr:old", "system.slice:sr:new"},
		{"machine.slice:cri-containerd:0123abcd", "machine.slice:cri-containerd:new"},
		{"/x:y:z", "/ns/new"},
		{"a:b", "/ns/new"},
	} {
		if got := runspec.CgroupsPath(tc.recorded, "ns", "new"); got != tc.want {
			t.Errorf("CgroupsPath(%q) = %q, want %q", tc.recorded, got, tc.want)
		}
	}
}

func TestPatchSpec(t *testing.T) {
	e := runspec.Edit{RootPath: runspec.BundleRootfs, Namespace: "ns", ID: "run-g2", DropNamespacePaths: true}
	for _, tc := range []struct {
		name, in, want string
		notApplied     []string
	}{
		{"minimal", `{"ociVersion":"1.2.1"}`, `{"ociVersion":"1.2.1","root":{"path":"rootfs"},"linux":{"cgroupsPath":"/ns/run-g2"}}`, nil},
		{"order and bytes kept", `{ "z": 1e0, "root": {"readonly": true, "path": "/x"}, "a": "\u0041", "ociVersion": "1.2.1" }`,
			`{"z":1e0,"root":{"readonly":true,"path":"rootfs"},"a":"\u0041","ociVersion":"1.2.1","linux":{"cgroupsPath":"/ns/run-g2"}}`, nil},
		{"terminal false stays", `{"ociVersion":"1","process":{"terminal":false,"args":["sh"]}}`,
			`{"ociVersion":"1","process":{"terminal":false,"args":["sh"]},"root":{"path":"rootfs"},"linux":{"cgroupsPath":"/ns/run-g2"}}`, nil},
		{"terminal true", `{"ociVersion":"1","process":{"args":["sh"],"terminal":true}}`,
			`{"ociVersion":"1","process":{"args":["sh"],"terminal":false},"root":{"path":"rootfs"},"linux":{"cgroupsPath":"/ns/run-g2"}}`, []string{"/process/terminal"}},
		{"null members", `{"ociVersion":"1","process":null,"root":null,"linux":null}`,
			`{"ociVersion":"1","process":null,"root":{"path":"rootfs"},"linux":{"cgroupsPath":"/ns/run-g2"}}`, nil},
		{"namespace paths", `{"ociVersion":"1","linux":{"namespaces":[{"path":"/proc/9/ns/net","type":"network"},{"type":"pid"},{"type":"ipc","path":""}],"cgroupsPath":"s.slice:p:old"}}`,
			`{"ociVersion":"1","linux":{"namespaces":[{"type":"network"},{"type":"pid"},{"type":"ipc"}],"cgroupsPath":"s.slice:p:run-g2"},"root":{"path":"rootfs"}}`,
			[]string{"/linux/namespaces/0/path", "/linux/namespaces/2/path"}},
	} {
		out, na, err := runspec.Patch([]byte(tc.in), e)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if string(out) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, out, tc.want)
		}
		if !slices.Equal(na, tc.notApplied) {
			t.Errorf("%s: notApplied %v, want %v", tc.name, na, tc.notApplied)
		}
	}
	// An offered spec keeps its namespace paths.
	keep := e
	keep.DropNamespacePaths = false
	out, na, err := runspec.Patch([]byte(`{"ociVersion":"1","linux":{"namespaces":[{"type":"network","path":"/run/netns/a"}]}}`), keep)
	if err != nil || !strings.Contains(string(out), `"path":"/run/netns/a"`) || len(na) != 0 {
		t.Errorf("offered spec: %s %v %v", out, na, err)
	}
	for _, bad := range []string{`[]`, `{"ociVersion":"1","root":"x"}`, `{"ociVersion":"1","linux":{"cgroupsPath":1}}`, `{"ociVersion":"1","linux":{"namespaces":{}}}`, `{"a":1} {}`, `{"a":`} {
		if _, _, err := runspec.Patch([]byte(bad), e); err == nil {
			t.Errorf("Patch(%s) accepted", bad)
		}
	}
}
