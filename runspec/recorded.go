package runspec

import (
	"fmt"
	"path"
	"sort"
	"strings"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Hazard is one thing a recorded spec or runtime would do on this host that
// the local policy refuses for a spec recorded elsewhere (docs/design.md
// "Hardening", recorded specs from another host). Pointer is an RFC 6901
// JSON Pointer into the recorded spec ("/hooks/prestart"), or into the
// SnapshotRef for the runtime ("/ref/runtime/name",
// "/ref/runtime/options/binary_name"); What says what it is ("hooks",
// "a runtime given as a path", …).
type Hazard struct {
	Pointer string
	What    string
}

// String renders "<pointer>: <what>".
func (h Hazard) String() string { return h.Pointer + ": " + h.What }

// The runtime options types JudgeRecorded reads (type URLs, with or
// without a "type.googleapis.com/" prefix).
const (
	RuncOptionsType    = "containerd.runc.v1.Options"
	RuntimeOptionsType = "runtimeoptions.v1.Options"
)

// safeRuncOptions are the runc shim options this build knows to be safe
// whoever recorded them (protobuf field names of containerd.runc.v1.Options).
var safeRuncOptions = map[protoreflect.Name]bool{
	"systemd_cgroup": true, "no_pivot_root": true, "no_new_keyring": true, "io_uid": true, "io_gid": true,
}

// hostNamespaces are the namespace types whose absence from
// linux.namespaces shares the host's (config-linux.md "Namespaces").
var hostNamespaces = []string{"pid", "network", "ipc", "uts", "mount"}

// classicCapabilities are capabilities 0–37 of capabilities(7), the set
// every kernel since 3.16 has: a bounding set holding all of them is the
// privileged one.
var classicCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
	"CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
	"CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN",
	"CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
}

// JudgeRecorded judges a recorded runtime spec (nil: none recorded, as for
// a `/1` ref) and runtime (nil: none) against the local policy for specs
// recorded on another host (docs/design.md "Hardening"): the signer is
// trusted, the host that recorded them may not be, and they run here as
// root. It returns every Hazard, sorted by pointer, none when both pass:
//
//   - OCI hooks: any non-empty list under /hooks;
//   - privileged settings: a bounding capability set holding every
//     capability 0–37, no namespace of type pid, network, ipc, uts or
//     mount (the host's), a bind mount of "/" without "ro";
//   - a runtime name that is a path (holds "/");
//   - runtime options: only what this build knows to be safe is accepted.
//     containerd.runc.v1.Options may set systemd_cgroup, no_pivot_root,
//     no_new_keyring, io_uid and io_gid; any other field (binary_name,
//     root, criu_image_path, criu_work_path, shim_cgroup, …) or unknown
//     protobuf data is a Hazard. runtimeoptions.v1.Options (runsc) may
//     carry no config_path and no config_body. Options of any other type
//     with a non-empty value are a Hazard.
//
// A spec that does not decode is a *Error (side SideRecorded).
func JudgeRecorded(spec []byte, rt *snapshot.Runtime) ([]Hazard, error) {
	var out []Hazard
	if spec != nil {
		v, serr := decodeSpec(SideRecorded, spec)
		if serr != nil {
			return nil, serr
		}
		out = judgeSpec(out, v)
	}
	if rt != nil {
		out = judgeRuntime(out, rt)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pointer < out[j].Pointer })
	return out, nil
}

func judgeSpec(out []Hazard, v *specValue) []Hazard {
	hooks := v.get("hooks")
	if hooks != nil && hooks.kind == specObject {
		for _, name := range hooks.names {
			if h := hooks.members[name]; !h.empty() {
				out = append(out, Hazard{h.ptr, "OCI hooks, which run on this host as root"})
			}
		}
	}
	if b := v.get("process").get("capabilities").get("bounding"); b != nil {
		have := map[string]bool{}
		for _, e := range b.list() {
			have[e.text()] = true
		}
		all := true
		for _, c := range classicCapabilities {
			all = all && have[c]
		}
		if all {
			out = append(out, Hazard{b.ptr, "every capability (a privileged container)"})
		}
	}
	linux := v.get("linux")
	present := map[string]bool{}
	for _, ns := range linux.get("namespaces").list() {
		present[ns.get("type").text()] = true
	}
	for _, t := range hostNamespaces {
		if !present[t] {
			p := "/linux/namespaces"
			if linux == nil {
				p = "/linux"
			}
			out = append(out, Hazard{p, fmt.Sprintf("no %s namespace: the host's", t)})
		}
	}
	for _, m := range v.get("mounts").list() {
		if !isBindMount(m) || path.Clean(m.get("source").text()) != "/" {
			continue
		}
		ro := false
		for _, o := range m.get("options").list() {
			ro = ro || o.text() == "ro"
		}
		if !ro {
			out = append(out, Hazard{m.ptr, "a writable bind mount of the host's /"})
		}
	}
	return out
}

func judgeRuntime(out []Hazard, rt *snapshot.Runtime) []Hazard {
	if strings.Contains(rt.Name, "/") {
		out = append(out, Hazard{"/ref/runtime/name", fmt.Sprintf("runtime %q is a path to a binary", rt.Name)})
	}
	o := rt.Options
	if o == nil || len(o.Value) == 0 {
		return out
	}
	const at = "/ref/runtime/options"
	typ := o.TypeURL[strings.LastIndexByte(o.TypeURL, '/')+1:]
	var msg proto.Message
	switch typ {
	case RuncOptionsType:
		msg = &runcoptions.Options{}
	case RuntimeOptionsType:
		msg = &runtimeoptions.Options{}
	default:
		return append(out, Hazard{at, fmt.Sprintf("runtime options of type %q, which this build cannot judge", o.TypeURL)})
	}
	if err := proto.Unmarshal(o.Value, msg); err != nil {
		return append(out, Hazard{at, fmt.Sprintf("runtime options %s do not decode: %v", typ, err)})
	}
	m := msg.ProtoReflect()
	if len(m.GetUnknown()) > 0 {
		out = append(out, Hazard{at, fmt.Sprintf("runtime options %s carry fields this build does not know", typ)})
	}
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		name := fd.Name()
		switch {
		case typ == RuncOptionsType && safeRuncOptions[name]:
		case typ == RuntimeOptionsType && name == "type_url":
		default:
			out = append(out, Hazard{at + "/" + string(name), fmt.Sprintf("runtime option %s is set, which points the shim at what the recorder chose", name)})
		}
		return true
	})
	return out
}
