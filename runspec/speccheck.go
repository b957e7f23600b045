package resume

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// SpecDrift is one member of an offered OCI runtime spec that differs from
// the recorded one (docs/design.md "Spec validation"): the
// verdict's "specDrift" entries, in the shape of DriftEntry.
//
// Pointer is an RFC 6901 JSON Pointer into the recorded spec when the
// member exists there (a null member exists), else into the offered spec.
// OfferedPointer is set only when the member exists on both sides at
// different places (an rlimit, device or namespace paired by its key at
// another index, or a set element). Recorded and Offered are the member's
// JSON values, compact, numbers exactly as written; an absent side is
// omitted. Allowed is true for a difference the rules allow and list (a
// bind mount's source); every other entry widens or may widen the
// recorded spec, and one such entry refuses the resume (SpecDriftRefused).
type SpecDrift struct {
	Pointer        string          `json:"pointer"`
	OfferedPointer string          `json:"offeredPointer,omitempty"`
	Recorded       json.RawMessage `json:"recorded,omitempty"`
	Offered        json.RawMessage `json:"offered,omitempty"`
	Allowed        bool            `json:"allowed,omitempty"`
}

// SpecDriftRefused reports whether any entry of d is not Allowed: whether
// check 10 fails with class "spec-drift" (docs/design.md "Resume
// decision").
func SpecDriftRefused(d []SpecDrift) bool {
	for _, e := range d {
		if !e.Allowed {
			return true
		}
	}
	return false
}

// The sides of a spec comparison, as SpecError.Side names them.
const (
	SpecRecorded = "recorded"
	SpecOffered  = "offered"
)

// ErrSpecInvalid is wrapped by every *SpecError: a runtime spec that does
// not decode under docs/design.md "Spec validation". An offered
// spec that does not decode is refused input (class "bad-input", exit 2);
// a recorded one is "snapshot-missing" (exit 7).
var ErrSpecInvalid = errors.New("runtime spec does not decode")

// SpecError is a runtime spec that is not JSON under the strict decoder's
// structure rules, or not an OCI runtime spec (config.md): a member of the
// wrong JSON type, a number that is not an integer of its member's range,
// a missing "ociVersion".
//
// Side is SpecRecorded or SpecOffered. Pointer is the RFC 6901 JSON
// Pointer of the offending value ("" for the whole document: syntax,
// encoding and size problems, whose Message carries line:column). Kind is
// one of "syntax", "encoding", "limit", "duplicate-key" (the strict
// decoder's), "number", "type" or "missing".
type SpecError struct {
	Side    string
	Pointer string
	Kind    string
	Message string
}

var _ error = (*SpecError)(nil)

// Error renders `<side> spec: <pointer>: <kind>: <message>`, the root
// pointer shown as `""`.
func (e *SpecError) Error() string {
	p := e.Pointer
	if p == "" {
		p = `""`
	}
	return fmt.Sprintf("%s spec: %s: %s: %s", e.Side, p, e.Kind, e.Message)
}

// Unwrap returns ErrSpecInvalid.
func (e *SpecError) Unwrap() error { return ErrSpecInvalid }

// SpecOptions carries what check 10 needs beyond the two specs.
type SpecOptions struct {
	// ContainerEnv is the recorded manifest core's containerEnv. Every
	// entry whose value holds no "${" must be in the offered
	// process.env as NAME=value, and no other NAME= entry may be there
	// (docs/design.md: process.env may differ, but …). nil: no
	// requirement.
	ContainerEnv map[string]string
	// HostNamespace reports whether path may name the namespace of type
	// nsType (an OCI type: "pid", "network", "mount", …) of this host's
	// pid 1, that is whether it has the device and inode of
	// /proc/1/ns/<name>; it should answer true when it cannot tell (fail
	// closed). HostPID1Namespace is the real one. nil treats every offered
	// namespace path as the host's: any offered path is then drift.
	HostNamespace func(nsType, path string) bool
}

// CompareSpec is check 10 (docs/design.md "Spec validation"):
// it decodes the recorded and the offered OCI runtime spec and compares
// them member by member as parsed values (never through JCS), driven by
// the rule table SpecRules returns.
//
// Both specs are read with the strict decoder's structure rules
// (duplicate names, UTF-8, noncharacters, 1 MiB, depth 64) but with exact
// numbers: every number must be an integer in plain JSON integer syntax
// that fits int64 or uint64 (and its member's Go type in
// opencontainers/runtime-spec specs-go), and numbers compare as integers
// (18446744073709551615 equals itself; 9007199254740993 differs from
// 9007199254740992). A spec that does not decode, is not a JSON object, has
// a known member of the wrong type or lacks "ociVersion" returns a
// *SpecError (wrapping ErrSpecInvalid) naming its side and pointer, and no
// drift.
//
// Otherwise the result lists every member that must be equal and is not,
// and the allowed differences (bind mount sources, Allowed true), sorted
// by Pointer in UTF-8 byte order (entries pointing into the recorded spec
// first at equal pointers, then by OfferedPointer); it is empty (non-nil)
// when nothing differs that the rules report. The resume is refused when
// SpecDriftRefused(result).
func CompareSpec(recorded, offered []byte, opts SpecOptions) ([]SpecDrift, error) {
	r, serr := decodeSpec(SpecRecorded, recorded)
	if serr != nil {
		return nil, serr
	}
	o, serr := decodeSpec(SpecOffered, offered)
	if serr != nil {
		return nil, serr
	}
	c := &specComparer{opts: opts}
	c.compare(specRuleTree, r, o, nil, nil)
	c.requiredEnv(r.get("process").get("env"), o.get("process").get("env"))

	sort.SliceStable(c.out, func(a, b int) bool {
		ea, eb := c.out[a], c.out[b]
		if ea.e.Pointer != eb.e.Pointer {
			return ea.e.Pointer < eb.e.Pointer
		}
		if ea.offeredSide != eb.offeredSide {
			return !ea.offeredSide
		}
		return ea.e.OfferedPointer < eb.e.OfferedPointer
	})
	out := make([]SpecDrift, len(c.out))
	for i, s := range c.out {
		out[i] = s.e
	}
	return out, nil
}

// The comparison rules of SpecRule.Rule.
const (
	// SpecRuleEqual: the member must be equal, deeply; lists compare in
	// order; an absent list or object equals an empty one (and null equals
	// absent). Differences are reported at the deepest differing member.
	SpecRuleEqual = "equal"
	// SpecRuleMayDiffer: differences are allowed and not listed.
	SpecRuleMayDiffer = "may-differ"
	// SpecRuleMembers: an object compared member by member by the rows
	// below it; a member without a row must be equal (fail closed).
	SpecRuleMembers = "members"
	// SpecRuleSet: a list compared as a set of whole values; an element on
	// one side only is reported at its index on that side.
	SpecRuleSet = "set"
	// SpecRuleKeyedSet: a list of objects paired by the member Key (the
	// n-th element with a key on one side with the n-th on the other), each
	// pair compared by the "*" row; unpaired elements are reported whole.
	SpecRuleKeyedSet = "keyed-set"
	// SpecRuleOrdered: a list compared index by index by the "*" row; extra
	// elements on either side are reported whole.
	SpecRuleOrdered = "ordered"
	// SpecRuleBindSource: a mount's source. When the mount is a bind mount
	// on both sides (type "bind", or options holding "bind" or "rbind") it
	// may differ and the difference is listed with Allowed; otherwise it
	// must be equal.
	SpecRuleBindSource = "bind-source"
	// SpecRuleNamespacePath: a namespace's path may be dropped, or may
	// differ when both sides have one; an offered path the recorded entry
	// lacks, or one that names a namespace of the host's pid 1
	// (SpecOptions.HostNamespace), is drift.
	SpecRuleNamespacePath = "namespace-path"
	// SpecRuleEnv: process.env may differ, but every containerEnv entry of
	// the recorded core without "${" must be there with its value
	// (SpecOptions.ContainerEnv), reported at the recorded spec's entry.
	SpecRuleEnv = "env"
)

// SpecRule is one row of check 10's rule table (docs/design.md "Spec
// validation", check 10; the members and Go types of
// opencontainers/runtime-spec v1.3.0, config.md and config-linux.md).
//
// Pointer is a JSON Pointer pattern: "*" stands for any array index or any
// member name, and a reference token ending in "*" (as in
// "/annotations/org.systemd.*") for any member name with that prefix; the
// most specific row applies (an exact name, then the longest prefix, then
// "*"). Type is the JSON type a value must have: "object", "array",
// "string", "boolean", "int32", "int64", "uint16", "uint32", "uint64" (an
// integer in that Go type's range) or "any" (null is accepted everywhere,
// and means absent). Rule is one of the SpecRule* constants; rows below an
// "equal" or "may-differ" row repeat its rule and only add types. Key names
// the pairing member of a "keyed-set". Required marks a member that must
// be present. A member without a row, at any level below a "members" row,
// must be equal: unknown and future members fail closed.
type SpecRule struct {
	Pointer  string `json:"pointer"`
	Type     string `json:"type"`
	Rule     string `json:"rule"`
	Key      string `json:"key,omitempty"`
	Required bool   `json:"required,omitempty"`
	Note     string `json:"note,omitempty"`
}

// SpecRules returns a copy of check 10's rule table, in table order. It is
// the one place the rules live; resume/testdata/speccheck/rules.json
// publishes it for other implementations.
func SpecRules() []SpecRule { return append([]SpecRule(nil), specRules...) }

// specRules is the table. Keep each row's parent before it.
var specRules = concatRules(
	[]SpecRule{
		{Pointer: "", Type: "object", Rule: SpecRuleMembers, Note: "a top-level member without a row (unknown or future) must be equal"},
		{Pointer: "/ociVersion", Type: "string", Rule: SpecRuleMayDiffer, Required: true},
		{Pointer: "/root", Type: "object", Rule: SpecRuleMembers},
		{Pointer: "/root/path", Type: "string", Rule: SpecRuleMayDiffer, Note: "set by resume for the new container"},
		{Pointer: "/root/readonly", Type: "boolean", Rule: SpecRuleEqual},
		{Pointer: "/mounts", Type: "array", Rule: SpecRuleOrdered, Note: "the same length and, at each index, the same destination, type and options"},
		{Pointer: "/mounts/*", Type: "object", Rule: SpecRuleMembers},
		{Pointer: "/mounts/*/destination", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/mounts/*/type", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/mounts/*/source", Type: "string", Rule: SpecRuleBindSource, Note: "a bind mount's source is the runtime's data grant: listed, allowed"},
		{Pointer: "/mounts/*/options", Type: "array", Rule: SpecRuleEqual, Note: "in order"},
		{Pointer: "/mounts/*/options/*", Type: "string", Rule: SpecRuleEqual},
	},
	idMappingRows("/mounts/*/uidMappings", SpecRuleEqual),
	idMappingRows("/mounts/*/gidMappings", SpecRuleEqual),
	[]SpecRule{
		{Pointer: "/process", Type: "object", Rule: SpecRuleMembers},
		{Pointer: "/process/terminal", Type: "boolean", Rule: SpecRuleMayDiffer},
		{Pointer: "/process/consoleSize", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/process/consoleSize/height", Type: "uint64", Rule: SpecRuleMayDiffer},
		{Pointer: "/process/consoleSize/width", Type: "uint64", Rule: SpecRuleMayDiffer},
		{Pointer: "/process/user", Type: "object", Rule: SpecRuleMembers},
		{Pointer: "/process/user/uid", Type: "uint32", Rule: SpecRuleEqual},
		{Pointer: "/process/user/gid", Type: "uint32", Rule: SpecRuleEqual},
		{Pointer: "/process/user/umask", Type: "uint32", Rule: SpecRuleEqual},
		{Pointer: "/process/user/additionalGids", Type: "array", Rule: SpecRuleSet},
		{Pointer: "/process/user/additionalGids/*", Type: "uint32", Rule: SpecRuleEqual},
		{Pointer: "/process/user/username", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/process/args", Type: "array", Rule: SpecRuleMayDiffer},
		{Pointer: "/process/args/*", Type: "string", Rule: SpecRuleMayDiffer},
		{Pointer: "/process/commandLine", Type: "string", Rule: SpecRuleEqual, Note: "Windows; not among the members that may differ"},
		{Pointer: "/process/env", Type: "array", Rule: SpecRuleEnv},
		{Pointer: "/process/env/*", Type: "string", Rule: SpecRuleMayDiffer},
		{Pointer: "/process/cwd", Type: "string", Rule: SpecRuleMayDiffer},
		{Pointer: "/process/capabilities", Type: "object", Rule: SpecRuleMembers},
	},
	capabilityRows("bounding", "effective", "inheritable", "permitted", "ambient"),
	[]SpecRule{
		{Pointer: "/process/rlimits", Type: "array", Rule: SpecRuleKeyedSet, Key: "type"},
		{Pointer: "/process/rlimits/*", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/process/rlimits/*/type", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/process/rlimits/*/hard", Type: "uint64", Rule: SpecRuleEqual},
		{Pointer: "/process/rlimits/*/soft", Type: "uint64", Rule: SpecRuleEqual},
		{Pointer: "/process/noNewPrivileges", Type: "boolean", Rule: SpecRuleEqual},
		{Pointer: "/process/apparmorProfile", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/process/oomScoreAdj", Type: "int64", Rule: SpecRuleEqual},
		{Pointer: "/process/scheduler", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/process/scheduler/policy", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/process/scheduler/nice", Type: "int32", Rule: SpecRuleEqual},
		{Pointer: "/process/scheduler/priority", Type: "int32", Rule: SpecRuleEqual},
		{Pointer: "/process/scheduler/flags", Type: "array", Rule: SpecRuleEqual},
		{Pointer: "/process/scheduler/flags/*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/process/scheduler/runtime", Type: "uint64", Rule: SpecRuleEqual},
		{Pointer: "/process/scheduler/deadline", Type: "uint64", Rule: SpecRuleEqual},
		{Pointer: "/process/scheduler/period", Type: "uint64", Rule: SpecRuleEqual},
		{Pointer: "/process/selinuxLabel", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/process/ioPriority", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/process/ioPriority/class", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/process/ioPriority/priority", Type: "int64", Rule: SpecRuleEqual},
		{Pointer: "/process/execCPUAffinity", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/process/execCPUAffinity/initial", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/process/execCPUAffinity/final", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/hostname", Type: "string", Rule: SpecRuleMayDiffer},
		{Pointer: "/domainname", Type: "string", Rule: SpecRuleMayDiffer},
		{Pointer: "/hooks", Type: "object", Rule: SpecRuleEqual, Note: "hooks run as root on the host; lists in order"},
	},
	hookRows("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"),
	[]SpecRule{
		{Pointer: "/annotations", Type: "object", Rule: SpecRuleMembers},
		{Pointer: "/annotations/*", Type: "string", Rule: SpecRuleMayDiffer, Note: "annotations outside the guarded prefixes"},
		{Pointer: "/annotations/org.systemd.*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/annotations/run.oci.*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/annotations/io.containerd.*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/annotations/io.kubernetes.*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/annotations/io.sandbox-resume.*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux", Type: "object", Rule: SpecRuleMembers},
	},
	idMappingRows("/linux/uidMappings", SpecRuleSet),
	idMappingRows("/linux/gidMappings", SpecRuleSet),
	[]SpecRule{
		{Pointer: "/linux/timeOffsets", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/timeOffsets/*", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/timeOffsets/*/secs", Type: "int64", Rule: SpecRuleEqual},
		{Pointer: "/linux/timeOffsets/*/nanosecs", Type: "uint32", Rule: SpecRuleEqual},
		{Pointer: "/linux/devices", Type: "array", Rule: SpecRuleKeyedSet, Key: "path"},
		{Pointer: "/linux/devices/*", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/devices/*/path", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/devices/*/type", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/devices/*/major", Type: "int64", Rule: SpecRuleEqual},
		{Pointer: "/linux/devices/*/minor", Type: "int64", Rule: SpecRuleEqual},
		{Pointer: "/linux/devices/*/fileMode", Type: "uint32", Rule: SpecRuleEqual},
		{Pointer: "/linux/devices/*/uid", Type: "uint32", Rule: SpecRuleEqual},
		{Pointer: "/linux/devices/*/gid", Type: "uint32", Rule: SpecRuleEqual},
		{Pointer: "/linux/netDevices", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/netDevices/*", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/netDevices/*/name", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/cgroupsPath", Type: "string", Rule: SpecRuleMayDiffer, Note: "set by resume for the new container"},
		{Pointer: "/linux/resources", Type: "object", Rule: SpecRuleMembers, Note: "a member without a row must be equal"},
		{Pointer: "/linux/resources/devices", Type: "array", Rule: SpecRuleEqual, Note: "the device cgroup allowlist, in order"},
		{Pointer: "/linux/resources/devices/*", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/resources/devices/*/allow", Type: "boolean", Rule: SpecRuleEqual},
		{Pointer: "/linux/resources/devices/*/type", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/resources/devices/*/major", Type: "int64", Rule: SpecRuleEqual},
		{Pointer: "/linux/resources/devices/*/minor", Type: "int64", Rule: SpecRuleEqual},
		{Pointer: "/linux/resources/devices/*/access", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/resources/memory", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/memory/limit", Type: "int64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/memory/reservation", Type: "int64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/memory/swap", Type: "int64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/memory/kernel", Type: "int64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/memory/kernelTCP", Type: "int64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/memory/swappiness", Type: "uint64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/memory/disableOOMKiller", Type: "boolean", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/memory/useHierarchy", Type: "boolean", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/memory/checkBeforeUpdate", Type: "boolean", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/cpu", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/cpu/shares", Type: "uint64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/cpu/quota", Type: "int64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/cpu/burst", Type: "uint64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/cpu/period", Type: "uint64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/cpu/realtimeRuntime", Type: "int64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/cpu/realtimePeriod", Type: "uint64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/cpu/cpus", Type: "string", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/cpu/mems", Type: "string", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/cpu/idle", Type: "int64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/pids", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/pids/limit", Type: "int64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/blockIO", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/blockIO/weight", Type: "uint16", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/blockIO/leafWeight", Type: "uint16", Rule: SpecRuleMayDiffer},
	},
	blockIODeviceRows("weightDevice", "weight", "leafWeight"),
	blockIODeviceRows("throttleReadBpsDevice", "rate"),
	blockIODeviceRows("throttleWriteBpsDevice", "rate"),
	blockIODeviceRows("throttleReadIOPSDevice", "rate"),
	blockIODeviceRows("throttleWriteIOPSDevice", "rate"),
	[]SpecRule{
		{Pointer: "/linux/resources/hugepageLimits", Type: "array", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/hugepageLimits/*", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/hugepageLimits/*/pageSize", Type: "string", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/hugepageLimits/*/limit", Type: "uint64", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/network", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/network/classID", Type: "uint32", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/network/priorities", Type: "array", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/network/priorities/*", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/network/priorities/*/name", Type: "string", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/network/priorities/*/priority", Type: "uint32", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/rdma", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/rdma/*", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/rdma/*/hcaHandles", Type: "uint32", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/rdma/*/hcaObjects", Type: "uint32", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/unified", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/resources/unified/*", Type: "string", Rule: SpecRuleMayDiffer},
		{Pointer: "/linux/intelRdt", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/intelRdt/closID", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/intelRdt/schemata", Type: "array", Rule: SpecRuleEqual},
		{Pointer: "/linux/intelRdt/schemata/*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/intelRdt/l3CacheSchema", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/intelRdt/memBwSchema", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/intelRdt/enableMonitoring", Type: "boolean", Rule: SpecRuleEqual},
		{Pointer: "/linux/memoryPolicy", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/memoryPolicy/mode", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/memoryPolicy/nodes", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/memoryPolicy/flags", Type: "array", Rule: SpecRuleEqual},
		{Pointer: "/linux/memoryPolicy/flags/*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/sysctl", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/sysctl/*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp", Type: "object", Rule: SpecRuleEqual, Note: "removing it, or any change, is drift; lists in order"},
		{Pointer: "/linux/seccomp/defaultAction", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/defaultErrnoRet", Type: "uint64", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/architectures", Type: "array", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/architectures/*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/flags", Type: "array", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/flags/*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/listenerPath", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/listenerMetadata", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls", Type: "array", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/names", Type: "array", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/names/*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/action", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/errnoRet", Type: "uint64", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args", Type: "array", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args/*", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args/*/index", Type: "uint64", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args/*/value", Type: "uint64", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args/*/valueTwo", Type: "uint64", Rule: SpecRuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args/*/op", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/rootfsPropagation", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/maskedPaths", Type: "array", Rule: SpecRuleSet},
		{Pointer: "/linux/maskedPaths/*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/readonlyPaths", Type: "array", Rule: SpecRuleSet},
		{Pointer: "/linux/readonlyPaths/*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/mountLabel", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/namespaces", Type: "array", Rule: SpecRuleKeyedSet, Key: "type", Note: "the same set of types"},
		{Pointer: "/linux/namespaces/*", Type: "object", Rule: SpecRuleMembers},
		{Pointer: "/linux/namespaces/*/type", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/namespaces/*/path", Type: "string", Rule: SpecRuleNamespacePath},
		{Pointer: "/linux/personality", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/linux/personality/domain", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/linux/personality/flags", Type: "array", Rule: SpecRuleEqual},
		{Pointer: "/linux/personality/flags/*", Type: "string", Rule: SpecRuleEqual},
		{Pointer: "/solaris", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/windows", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/vm", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/zos", Type: "object", Rule: SpecRuleEqual},
		{Pointer: "/freebsd", Type: "object", Rule: SpecRuleEqual},
	},
)

func concatRules(parts ...[]SpecRule) []SpecRule {
	var out []SpecRule
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// idMappingRows are the rows of a list of LinuxIDMapping triples.
func idMappingRows(ptr, rule string) []SpecRule {
	return []SpecRule{
		{Pointer: ptr, Type: "array", Rule: rule},
		{Pointer: ptr + "/*", Type: "object", Rule: SpecRuleEqual},
		{Pointer: ptr + "/*/containerID", Type: "uint32", Rule: SpecRuleEqual},
		{Pointer: ptr + "/*/hostID", Type: "uint32", Rule: SpecRuleEqual},
		{Pointer: ptr + "/*/size", Type: "uint32", Rule: SpecRuleEqual},
	}
}

// capabilityRows are the rows of the capability sets, each compared as a set.
func capabilityRows(sets ...string) []SpecRule {
	var out []SpecRule
	for _, s := range sets {
		out = append(out,
			SpecRule{Pointer: "/process/capabilities/" + s, Type: "array", Rule: SpecRuleSet},
			SpecRule{Pointer: "/process/capabilities/" + s + "/*", Type: "string", Rule: SpecRuleEqual})
	}
	return out
}

// hookRows are the rows of the hook lists (under "/hooks", which must be
// equal).
func hookRows(kinds ...string) []SpecRule {
	var out []SpecRule
	for _, k := range kinds {
		p := "/hooks/" + k
		out = append(out,
			SpecRule{Pointer: p, Type: "array", Rule: SpecRuleEqual},
			SpecRule{Pointer: p + "/*", Type: "object", Rule: SpecRuleEqual},
			SpecRule{Pointer: p + "/*/path", Type: "string", Rule: SpecRuleEqual},
			SpecRule{Pointer: p + "/*/args", Type: "array", Rule: SpecRuleEqual},
			SpecRule{Pointer: p + "/*/args/*", Type: "string", Rule: SpecRuleEqual},
			SpecRule{Pointer: p + "/*/env", Type: "array", Rule: SpecRuleEqual},
			SpecRule{Pointer: p + "/*/env/*", Type: "string", Rule: SpecRuleEqual},
			SpecRule{Pointer: p + "/*/timeout", Type: "int64", Rule: SpecRuleEqual})
	}
	return out
}

// blockIODeviceRows are the rows of one blockIO device list (may differ).
func blockIODeviceRows(list string, valueMembers ...string) []SpecRule {
	p := "/linux/resources/blockIO/" + list
	out := []SpecRule{
		{Pointer: p, Type: "array", Rule: SpecRuleMayDiffer},
		{Pointer: p + "/*", Type: "object", Rule: SpecRuleMayDiffer},
		{Pointer: p + "/*/major", Type: "int64", Rule: SpecRuleMayDiffer},
		{Pointer: p + "/*/minor", Type: "int64", Rule: SpecRuleMayDiffer},
	}
	for _, m := range valueMembers {
		typ := "uint64"
		if m != "rate" {
			typ = "uint16"
		}
		out = append(out, SpecRule{Pointer: p + "/*/" + m, Type: typ, Rule: SpecRuleMayDiffer})
	}
	return out
}

// ruleNode is the table as a tree of reference tokens.
type ruleNode struct {
	rule     string
	typ      string
	key      string
	required bool
	children map[string]*ruleNode
	prefixes []prefixRule // longest prefix first
	any      *ruleNode
}

type prefixRule struct {
	prefix string
	node   *ruleNode
}

// Nodes for members without a row: an unknown member must be equal, except
// below a "may-differ" row.
var (
	equalAny     = &ruleNode{rule: SpecRuleEqual, typ: "any"}
	mayDifferAny = &ruleNode{rule: SpecRuleMayDiffer, typ: "any"}
)

var specRuleTree = buildRuleTree(specRules)

// buildRuleTree turns the table into a tree; a row whose parent has no row,
// or a repeated row, panics (the table is data in the code, checked by the
// tests).
func buildRuleTree(rows []SpecRule) *ruleNode {
	var root *ruleNode
	for _, r := range rows {
		n := &ruleNode{rule: r.Rule, typ: r.Type, key: r.Key, required: r.Required}
		if r.Pointer == "" {
			root = n
			continue
		}
		i := strings.LastIndexByte(r.Pointer, '/')
		parent := root.find(r.Pointer[:i])
		if parent == nil {
			panic("speccheck: rule " + r.Pointer + " has no parent row")
		}
		tok := r.Pointer[i+1:]
		switch {
		case tok == "*":
			if parent.any != nil {
				panic("speccheck: repeated rule " + r.Pointer)
			}
			parent.any = n
		case strings.HasSuffix(tok, "*"):
			parent.prefixes = append(parent.prefixes, prefixRule{strings.TrimSuffix(tok, "*"), n})
			sort.SliceStable(parent.prefixes, func(a, b int) bool {
				return len(parent.prefixes[a].prefix) > len(parent.prefixes[b].prefix)
			})
		default:
			if parent.children == nil {
				parent.children = map[string]*ruleNode{}
			}
			if parent.children[tok] != nil {
				panic("speccheck: repeated rule " + r.Pointer)
			}
			parent.children[tok] = n
		}
	}
	return root
}

// find returns the node of a table pattern (as written in the table).
func (n *ruleNode) find(pattern string) *ruleNode {
	if pattern == "" {
		return n
	}
	i := strings.LastIndexByte(pattern, '/')
	p := n.find(pattern[:i])
	if p == nil {
		return nil
	}
	tok := pattern[i+1:]
	switch {
	case tok == "*":
		return p.any
	case strings.HasSuffix(tok, "*"):
		for _, pr := range p.prefixes {
			if pr.prefix == strings.TrimSuffix(tok, "*") {
				return pr.node
			}
		}
		return nil
	}
	return p.children[tok]
}

// child returns the rule of a member name or array element below n.
func (n *ruleNode) child(name string) *ruleNode {
	if c, ok := n.children[name]; ok {
		return c
	}
	for _, p := range n.prefixes {
		if strings.HasPrefix(name, p.prefix) {
			return p.node
		}
	}
	if n.any != nil {
		return n.any
	}
	if n.rule == SpecRuleMayDiffer {
		return mayDifferAny
	}
	return equalAny
}

// specKind is the JSON type of a specValue.
type specKind uint8

const (
	specNull specKind = iota
	specBool
	specNumber
	specString
	specObject
	specArray
)

func (k specKind) String() string {
	return [...]string{"null", "boolean", "number", "string", "object", "array"}[k]
}

// specValue is one decoded value of a runtime spec. str holds a string's
// text, or a number's integer in canonical decimal form; raw is the
// value's JSON text as written.
type specValue struct {
	kind    specKind
	ptr     string
	raw     []byte
	str     string
	b       bool
	names   []string
	members map[string]*specValue
	elems   []*specValue
}

// get returns member name of an object value, or nil.
func (v *specValue) get(name string) *specValue {
	if v == nil || v.kind != specObject {
		return nil
	}
	return v.members[name]
}

// empty reports an absent value, null, {} or []: the values docs/design.md
// (check 10) makes equal to each other.
func (v *specValue) empty() bool {
	if v == nil {
		return true
	}
	switch v.kind {
	case specNull:
		return true
	case specObject:
		return len(v.names) == 0
	case specArray:
		return len(v.elems) == 0
	}
	return false
}

// list returns an array value's elements (none for an absent or empty one).
func (v *specValue) list() []*specValue {
	if v == nil || v.kind != specArray {
		return nil
	}
	return v.elems
}

// text returns a string value's text, "" for anything else.
func (v *specValue) text() string {
	if v == nil || v.kind != specString {
		return ""
	}
	return v.str
}

// decodeSpec reads one runtime spec: the strict decoder's structure rules
// (its I-JSON number rule is replaced by exact integers), then the table's
// types and required members. It is the only use of the strict decoder in
// this file.
func decodeSpec(side string, data []byte) (*specValue, *SpecError) {
	root, errs := strictjson.Decode(data, false)
	for _, e := range errs {
		if e.Kind == strictjson.Number {
			continue // numbers are read exactly below
		}
		return nil, &SpecError{Side: side, Pointer: e.Pointer, Kind: string(e.Kind), Message: e.Text()}
	}
	if root == nil {
		return nil, &SpecError{Side: side, Kind: string(strictjson.Syntax), Message: "does not decode"}
	}
	v, serr := fromNode(side, root)
	if serr != nil {
		return nil, serr
	}
	if serr := typeCheck(side, specRuleTree, v); serr != nil {
		return nil, serr
	}
	return v, nil
}

// Integer bounds of the table's number types.
var (
	minInt64  = big.NewInt(-1 << 63)
	maxUint64 = new(big.Int).SetUint64(1<<64 - 1)
	intRanges = map[string][2]*big.Int{
		"int32":  {big.NewInt(-1 << 31), big.NewInt(1<<31 - 1)},
		"int64":  {minInt64, big.NewInt(1<<63 - 1)},
		"uint16": {big.NewInt(0), big.NewInt(1<<16 - 1)},
		"uint32": {big.NewInt(0), big.NewInt(1<<32 - 1)},
		"uint64": {big.NewInt(0), maxUint64},
	}
)

func fromNode(side string, n *strictjson.Node) (*specValue, *SpecError) {
	v := &specValue{ptr: n.Pointer, raw: n.Raw}
	switch n.Kind {
	case strictjson.KindNull:
		v.kind = specNull
	case strictjson.KindBool:
		v.kind, v.b = specBool, n.Bool
	case strictjson.KindString:
		v.kind, v.str = specString, n.Str
	case strictjson.KindNumber:
		v.kind = specNumber
		i, ok := parseInteger(string(n.Raw))
		if !ok {
			return nil, &SpecError{Side: side, Pointer: n.Pointer, Kind: "number",
				Message: fmt.Sprintf("%s is not an integer in plain JSON integer syntax (runtime spec numbers are Go integers)", n.Raw)}
		}
		if i.Cmp(minInt64) < 0 || i.Cmp(maxUint64) > 0 {
			return nil, &SpecError{Side: side, Pointer: n.Pointer, Kind: "number",
				Message: fmt.Sprintf("%s fits neither int64 nor uint64", n.Raw)}
		}
		v.str = i.String()
	case strictjson.KindObject:
		v.kind = specObject
		v.members = make(map[string]*specValue, len(n.Members))
		for _, m := range n.Members {
			c, serr := fromNode(side, m.Value)
			if serr != nil {
				return nil, serr
			}
			v.names = append(v.names, m.Name)
			v.members[m.Name] = c
		}
	case strictjson.KindArray:
		v.kind = specArray
		for _, e := range n.Elems {
			c, serr := fromNode(side, e)
			if serr != nil {
				return nil, serr
			}
			v.elems = append(v.elems, c)
		}
	}
	return v, nil
}

// parseInteger reads a JSON number token written as -?(0|[1-9][0-9]*).
func parseInteger(tok string) (*big.Int, bool) {
	digits := strings.TrimPrefix(tok, "-")
	if digits == "" {
		return nil, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return nil, false
		}
	}
	return new(big.Int).SetString(tok, 10)
}

// typeCheck checks v against the table's types and required members.
func typeCheck(side string, n *ruleNode, v *specValue) *SpecError {
	if v == nil || v.kind == specNull || n.typ == "any" {
		return nil
	}
	bad := func(want string) *SpecError {
		return &SpecError{Side: side, Pointer: v.ptr, Kind: "type",
			Message: fmt.Sprintf("must be %s, not %s", want, v.kind)}
	}
	switch n.typ {
	case "object":
		if v.kind != specObject {
			return bad("an object")
		}
		for _, name := range v.names {
			if serr := typeCheck(side, n.child(name), v.members[name]); serr != nil {
				return serr
			}
		}
		for name, c := range n.children {
			if m := v.members[name]; c.required && (m == nil || m.kind == specNull) {
				return &SpecError{Side: side, Pointer: strictjson.Pointer(v.ptr, name), Kind: "missing",
					Message: "required member is missing"}
			}
		}
	case "array":
		if v.kind != specArray {
			return bad("an array")
		}
		for _, e := range v.elems {
			if serr := typeCheck(side, n.child("*"), e); serr != nil {
				return serr
			}
		}
	case "string":
		if v.kind != specString {
			return bad("a string")
		}
	case "boolean":
		if v.kind != specBool {
			return bad("a boolean")
		}
	default:
		rng, ok := intRanges[n.typ]
		if !ok {
			panic("speccheck: unknown type " + n.typ)
		}
		if v.kind != specNumber {
			return bad("an integer (" + n.typ + ")")
		}
		i, _ := new(big.Int).SetString(v.str, 10)
		if i.Cmp(rng[0]) < 0 || i.Cmp(rng[1]) > 0 {
			return &SpecError{Side: side, Pointer: v.ptr, Kind: "number",
				Message: fmt.Sprintf("%s is out of range for %s", v.raw, n.typ)}
		}
	}
	return nil
}

// specComparer collects the drift of one comparison.
type specComparer struct {
	opts SpecOptions
	out  []sidedSpecDrift
}

// sidedSpecDrift is an entry with the side its Pointer points into.
type sidedSpecDrift struct {
	e           SpecDrift
	offeredSide bool
}

// emit reports a difference between r and o (either may be nil: absent).
func (c *specComparer) emit(r, o *specValue, allowed bool) {
	var s sidedSpecDrift
	s.e.Allowed = allowed
	if r != nil {
		s.e.Pointer, s.e.Recorded = r.ptr, compactJSON(r.raw)
	}
	if o != nil {
		s.e.Offered = compactJSON(o.raw)
		if r == nil {
			s.e.Pointer, s.offeredSide = o.ptr, true
		} else if o.ptr != r.ptr {
			s.e.OfferedPointer = o.ptr
		}
	}
	c.out = append(c.out, s)
}

// compactJSON copies a value's JSON text without insignificant
// whitespace; numbers and strings stay as written.
func compactJSON(raw []byte) json.RawMessage {
	v := jsontext.Value(append([]byte(nil), raw...))
	if err := v.Compact(); err != nil {
		return json.RawMessage(append([]byte(nil), raw...))
	}
	return json.RawMessage(v)
}

// compare applies rule n to the recorded value r and the offered value o;
// rp and op are the objects holding them (for rules that look at the
// enclosing mount or namespace).
func (c *specComparer) compare(n *ruleNode, r, o, rp, op *specValue) {
	if r.empty() && o.empty() {
		return
	}
	switch n.rule {
	case SpecRuleMayDiffer, SpecRuleEnv:
		// process.env's containerEnv requirement runs once, after the walk.
	case SpecRuleEqual:
		c.deep(r, o)
	case SpecRuleMembers:
		if !isObjectOrEmpty(r) || !isObjectOrEmpty(o) {
			c.deep(r, o)
			return
		}
		for _, name := range unionNames(r, o) {
			c.compare(n.child(name), r.get(name), o.get(name), r, o)
		}
	case SpecRuleSet:
		c.set(r, o)
	case SpecRuleKeyedSet:
		c.keyedSet(n, r, o)
	case SpecRuleOrdered:
		rl, ol := r.list(), o.list()
		for i := 0; i < len(rl) || i < len(ol); i++ {
			switch {
			case i >= len(ol):
				c.emit(rl[i], nil, false)
			case i >= len(rl):
				c.emit(nil, ol[i], false)
			default:
				c.compare(n.child("*"), rl[i], ol[i], r, o)
			}
		}
	case SpecRuleBindSource:
		if isBindMount(rp) && isBindMount(op) {
			if !sameValue(r, o) {
				c.emit(r, o, true)
			}
			return
		}
		c.deep(r, o)
	case SpecRuleNamespacePath:
		path := o.text()
		if path == "" {
			return // dropped: a new private namespace
		}
		if r.text() == "" || c.opts.HostNamespace == nil || c.opts.HostNamespace(op.get("type").text(), path) {
			c.emit(r, o, false)
		}
	default:
		panic("speccheck: unknown rule " + n.rule)
	}
}

func isObjectOrEmpty(v *specValue) bool { return v.empty() || v.kind == specObject }

// unionNames lists r's member names in order, then o's names r lacks.
func unionNames(r, o *specValue) []string {
	var names []string
	if r != nil && r.kind == specObject {
		names = append(names, r.names...)
	}
	if o != nil && o.kind == specObject {
		for _, name := range o.names {
			if r.get(name) == nil {
				names = append(names, name)
			}
		}
	}
	return names
}

// deep reports every difference between r and o at the deepest members
// that differ: objects by member, arrays by index, an absent, null, empty
// list or empty object equal to each other. A value present on one side
// only (or a container against an empty one) is reported whole.
func (c *specComparer) deep(r, o *specValue) {
	if r.empty() && o.empty() {
		return
	}
	rk, rc := containerKind(r)
	ok, oc := containerKind(o)
	if !rc || !oc || rk != ok || r.empty() || o.empty() {
		if !sameValue(r, o) {
			c.emit(r, o, false)
		}
		return
	}
	if rk == specObject {
		for _, name := range unionNames(r, o) {
			c.deep(r.get(name), o.get(name))
		}
		return
	}
	rl, ol := r.list(), o.list()
	for i := 0; i < len(rl) || i < len(ol); i++ {
		switch {
		case i >= len(ol):
			c.emit(rl[i], nil, false)
		case i >= len(rl):
			c.emit(nil, ol[i], false)
		default:
			c.deep(rl[i], ol[i])
		}
	}
}

func containerKind(v *specValue) (specKind, bool) {
	if v == nil || (v.kind != specObject && v.kind != specArray) {
		return 0, false
	}
	return v.kind, true
}

// sameValue compares two values as parsed JSON with exact numbers.
func sameValue(r, o *specValue) bool {
	if r.empty() && o.empty() {
		return true
	}
	if r == nil || o == nil {
		return false
	}
	return canonical(r) == canonical(o)
}

// canonical is a value's identity text for comparison and set keys: a
// kind tag, strings quoted, integers in canonical decimal, object members
// sorted by name with empty members (null, {}, []) left out.
func canonical(v *specValue) string {
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v *specValue) {
	if v.empty() {
		b.WriteString("~")
		return
	}
	switch v.kind {
	case specBool:
		b.WriteString(strconv.FormatBool(v.b))
	case specNumber:
		b.WriteString("#" + v.str)
	case specString:
		b.WriteString(strconv.Quote(v.str))
	case specObject:
		names := make([]string, 0, len(v.names))
		for _, n := range v.names {
			if !v.members[n].empty() {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		b.WriteByte('{')
		for _, n := range names {
			b.WriteString(strconv.Quote(n))
			b.WriteByte(':')
			writeCanonical(b, v.members[n])
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case specArray:
		b.WriteByte('[')
		for _, e := range v.elems {
			writeCanonical(b, e)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	}
}

// set compares two lists as sets of whole values.
func (c *specComparer) set(r, o *specValue) {
	rl, ol := r.list(), o.list()
	inR := make(map[string]bool, len(rl))
	for _, e := range rl {
		inR[canonical(e)] = true
	}
	inO := make(map[string]bool, len(ol))
	for _, e := range ol {
		inO[canonical(e)] = true
	}
	seen := map[string]bool{}
	for _, e := range rl {
		if k := canonical(e); !inO[k] && !seen[k] {
			seen[k] = true
			c.emit(e, nil, false)
		}
	}
	clear(seen)
	for _, e := range ol {
		if k := canonical(e); !inR[k] && !seen[k] {
			seen[k] = true
			c.emit(nil, e, false)
		}
	}
}

// keyedSet pairs the elements of two lists of objects by n.key and
// compares each pair by n's "*" row.
func (c *specComparer) keyedSet(n *ruleNode, r, o *specValue) {
	rl, ol := r.list(), o.list()
	keyOf := func(e *specValue) string {
		k := e.get(n.key)
		if k != nil && k.kind == specString {
			return k.str
		}
		if k.empty() {
			return "" // absent key: pairs with "" and other absent keys
		}
		return "\x00" + canonical(k)
	}
	byKey := make(map[string][]int, len(ol))
	for j, e := range ol {
		k := keyOf(e)
		byKey[k] = append(byKey[k], j)
	}
	paired := make([]bool, len(ol))
	for _, e := range rl {
		k := keyOf(e)
		js := byKey[k]
		if len(js) == 0 {
			c.emit(e, nil, false)
			continue
		}
		byKey[k] = js[1:]
		paired[js[0]] = true
		c.compare(n.child("*"), e, ol[js[0]], r, o)
	}
	for j, e := range ol {
		if !paired[j] {
			c.emit(nil, e, false)
		}
	}
}

// isBindMount reports whether a mount object is a bind mount: type "bind",
// or options holding "bind" or "rbind" (runc's reading).
func isBindMount(m *specValue) bool {
	if m == nil || m.kind != specObject {
		return false
	}
	if m.get("type").text() == "bind" {
		return true
	}
	for _, opt := range m.get("options").list() {
		if s := opt.text(); s == "bind" || s == "rbind" {
			return true
		}
	}
	return false
}

// requiredEnv checks SpecOptions.ContainerEnv against the offered
// process.env: for each NAME whose value holds no "${", NAME=value must be
// there and no other NAME= entry may be. A failure is one entry: Pointer is
// the recorded spec's first NAME= entry ("/process/env" when it has none),
// Recorded the required "NAME=value", Offered the first offered NAME=
// entry with another value (OfferedPointer its place), omitted when
// NAME is simply missing.
func (c *specComparer) requiredEnv(renv, oenv *specValue) {
	names := make([]string, 0, len(c.opts.ContainerEnv))
	for k, v := range c.opts.ContainerEnv {
		if !strings.Contains(v, "${") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		want := name + "=" + c.opts.ContainerEnv[name]
		found := false
		var wrong *specValue
		for _, e := range oenv.list() {
			s := e.text()
			if !strings.HasPrefix(s, name+"=") {
				continue
			}
			if s == want {
				found = true
			} else if wrong == nil {
				wrong = e
			}
		}
		if found && wrong == nil {
			continue
		}
		s := sidedSpecDrift{e: SpecDrift{Pointer: "/process/env", Recorded: mustJSON(want)}}
		for _, e := range renv.list() {
			if strings.HasPrefix(e.text(), name+"=") {
				s.e.Pointer = e.ptr
				break
			}
		}
		if wrong != nil {
			s.e.Offered = compactJSON(wrong.raw)
			if wrong.ptr != s.e.Pointer {
				s.e.OfferedPointer = wrong.ptr
			}
		}
		c.out = append(c.out, s)
	}
}
