package runspec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sandbox-resume/sandbox-resume/runspec"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

func runtimeWith(t *testing.T, typ string, m proto.Message) *snapshot.Runtime {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return &snapshot.Runtime{Name: "io.containerd.runc.v2", Options: &snapshot.RuntimeOptions{TypeURL: typ, Value: b}}
}

// TestJudgeRecorded: containerd's default spec and runc options that only
// pick cgroup and I/O settings pass; hooks, privileged settings, a runtime
// path and options that point the shim elsewhere are each a hazard at
// their pointer (docs/design.md "Hardening", recorded specs).
func TestJudgeRecorded(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "speccheck", "base.json"))
	if err != nil {
		t.Fatal(err)
	}
	patch := func(old, new string) []byte {
		t.Helper()
		if !strings.Contains(string(base), old) {
			t.Fatalf("base.json lacks %s", old)
		}
		return []byte(strings.Replace(string(base), old, new, 1))
	}
	safe := runtimeWith(t, runspec.RuncOptionsType, &runcoptions.Options{SystemdCgroup: true, NoPivotRoot: true, IoUid: 1000, IoGid: 1000})
	if h, err := runspec.JudgeRecorded(base, safe); err != nil || len(h) != 0 {
		t.Fatalf("default spec and safe options: %v, %v", h, err)
	}
	if h, err := runspec.JudgeRecorded(nil, &snapshot.Runtime{Name: "io.containerd.runsc.v1", Options: &snapshot.RuntimeOptions{TypeURL: "x.y.Unknown"}}); err != nil || len(h) != 0 {
		t.Fatalf("no spec, empty options: %v, %v", h, err)
	}
	for _, tc := range []struct {
		name string
		spec []byte
		rt   *snapshot.Runtime
		want string // pointer of the one hazard
	}{
		{"prestart hook", patch(`"process": {`, `"hooks": {"prestart": [{"path": "/usr/bin/x"}]}, "process": {`), nil, "/hooks/prestart"},
		{"createRuntime hook", patch(`"process": {`, `"hooks": {"createRuntime": [{"path": "/usr/bin/x"}]}, "process": {`), nil, "/hooks/createRuntime"},
		{"host network", patch(`{"type": "network"}`, `{"type": "cgroup"}`), nil, "/linux/namespaces"},
		{"runtime path", base, &snapshot.Runtime{Name: "/var/lib/run/rootfs/shim"}, "/ref/runtime/name"},
		{"BinaryName", base, runtimeWith(t, runspec.RuncOptionsType, &runcoptions.Options{BinaryName: "/run/rootfs/runc"}), "/ref/runtime/options/binary_name"},
		{"Root", base, runtimeWith(t, "type.googleapis.com/"+runspec.RuncOptionsType, &runcoptions.Options{Root: "/tmp/x"}), "/ref/runtime/options/root"},
		{"CriuImagePath", base, runtimeWith(t, runspec.RuncOptionsType, &runcoptions.Options{CriuImagePath: "/x"}), "/ref/runtime/options/criu_image_path"},
		{"CriuWorkPath", base, runtimeWith(t, runspec.RuncOptionsType, &runcoptions.Options{CriuWorkPath: "/x"}), "/ref/runtime/options/criu_work_path"},
		{"ShimCgroup", base, runtimeWith(t, runspec.RuncOptionsType, &runcoptions.Options{ShimCgroup: "/x"}), "/ref/runtime/options/shim_cgroup"},
		{"runsc ConfigPath", base, runtimeWith(t, runspec.RuntimeOptionsType, &runtimeoptions.Options{TypeUrl: "runsc", ConfigPath: "/run/rootfs/runsc.toml"}), "/ref/runtime/options/config_path"},
		{"unknown options type", base, &snapshot.Runtime{Name: "io.containerd.kata.v2", Options: &snapshot.RuntimeOptions{TypeURL: "kata.Options", Value: []byte{8, 1}}}, "/ref/runtime/options"},
		{"unknown runc field", base, &snapshot.Runtime{Name: "io.containerd.runc.v2", Options: &snapshot.RuntimeOptions{TypeURL: runspec.RuncOptionsType, Value: []byte{0xf8, 0x06, 0x01}}}, "/ref/runtime/options"},
	} {
		h, err := runspec.JudgeRecorded(tc.spec, tc.rt)
		if err != nil || len(h) != 1 || h[0].Pointer != tc.want || h[0].What == "" {
			t.Errorf("%s: %v, %v; want one hazard at %s", tc.name, h, err, tc.want)
		}
	}
	caps := `"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON"`
	priv := strings.Replace(string(base), `"bounding": [`, `"bounding": [`+caps+`, `, 1)
	if h, _ := runspec.JudgeRecorded([]byte(priv), nil); len(h) != 1 || h[0].Pointer != "/process/capabilities/bounding" {
		t.Errorf("every capability: %v", h)
	}
	root := strings.Replace(string(base), `"source": "/home/dev/project"`, `"source": "/"`, 1)
	if h, _ := runspec.JudgeRecorded([]byte(root), nil); len(h) != 1 || !strings.HasPrefix(h[0].Pointer, "/mounts/") {
		t.Errorf("/ bound rw: %v", h)
	}
	if _, err := runspec.JudgeRecorded([]byte(`{"ociVersion": 1}`), nil); err == nil {
		t.Error("a spec that does not decode: no error")
	}
}
