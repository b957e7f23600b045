package runspec

import (
	"sort"
	"strings"
)

// The comparison rules of Rule.Rule.
const (
	// RuleEqual: the member must be equal, deeply; lists compare in
	// order; an absent list or object equals an empty one (and null equals
	// absent). Differences are reported at the deepest differing member.
	RuleEqual = "equal"
	// RuleMayDiffer: differences are allowed and not listed.
	RuleMayDiffer = "may-differ"
	// RuleMembers: an object compared member by member by the rows
	// below it; a member without a row must be equal (fail closed).
	RuleMembers = "members"
	// RuleSet: a list compared as a set of whole values; an element on
	// one side only is reported at its index on that side.
	RuleSet = "set"
	// RuleKeyedSet: a list of objects paired by the member Key (the
	// n-th element with a key on one side with the n-th on the other), each
	// pair compared by the "*" row; unpaired elements are reported whole.
	RuleKeyedSet = "keyed-set"
	// RuleOrdered: a list compared index by index by the "*" row; extra
	// elements on either side are reported whole.
	RuleOrdered = "ordered"
	// RuleBindSource: a mount's source. When the mount is a bind mount
	// on both sides (type "bind", or options holding "bind" or "rbind") it
	// may differ and the difference is listed with Allowed, unless the
	// offered source is not absolute, is "/", lies under /proc, /sys,
	// /dev, /run, /var/run or /boot, or fails Options.BindSource (a socket,
	// a device, a symlink on the way): then it is drift. Otherwise it must
	// be equal.
	RuleBindSource = "bind-source"
	// RuleNamespacePath: a namespace's path may be dropped (a new private
	// namespace), and only a network namespace's path may differ when both
	// sides have one; an offered path the recorded entry lacks, one that
	// names a namespace of the host's pid 1 (Options.HostNamespace), or
	// another path for any other type (joining another container's
	// namespace) is drift.
	RuleNamespacePath = "namespace-path"
	// RuleListed: differences are allowed and listed with Allowed (the
	// cosmetic annotations).
	RuleListed = "listed"
	// RuleEnv: process.env may differ, but every containerEnv entry of
	// the recorded core without "${" must be there with its value
	// (Options.ContainerEnv), reported at the recorded spec's entry, and
	// the entries of reserved names (Options.Reserved) compare as a set.
	RuleEnv = "env"
)

// Rule is one row of check 10's rule table (docs/design.md "Spec
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
// and means absent). Rule is one of the Rule* constants; rows below an
// "equal" or "may-differ" row repeat its rule and only add types. Key names
// the pairing member of a "keyed-set". Required marks a member that must
// be present. A member without a row, at any level below a "members" row,
// must be equal: unknown and future members fail closed.
type Rule struct {
	Pointer  string `json:"pointer"`
	Type     string `json:"type"`
	Rule     string `json:"rule"`
	Key      string `json:"key,omitempty"`
	Required bool   `json:"required,omitempty"`
	Note     string `json:"note,omitempty"`
}

// Rules returns a copy of check 10's rule table, in table order. It is
// the one place the rules live; runspec/testdata/speccheck/rules.json
// publishes it for other implementations.
func Rules() []Rule { return append([]Rule(nil), specRules...) }

// specRules is the table. Keep each row's parent before it.
var specRules = concatRules(
	[]Rule{
		{Pointer: "", Type: "object", Rule: RuleMembers, Note: "a top-level member without a row (unknown or future) must be equal"},
		{Pointer: "/ociVersion", Type: "string", Rule: RuleMayDiffer, Required: true},
		{Pointer: "/root", Type: "object", Rule: RuleMembers},
		{Pointer: "/root/path", Type: "string", Rule: RuleMayDiffer, Note: "set by resume for the new container"},
		{Pointer: "/root/readonly", Type: "boolean", Rule: RuleEqual},
		{Pointer: "/mounts", Type: "array", Rule: RuleOrdered, Note: "the same length and, at each index, the same destination, type and options"},
		{Pointer: "/mounts/*", Type: "object", Rule: RuleMembers},
		{Pointer: "/mounts/*/destination", Type: "string", Rule: RuleEqual},
		{Pointer: "/mounts/*/type", Type: "string", Rule: RuleEqual},
		{Pointer: "/mounts/*/source", Type: "string", Rule: RuleBindSource, Note: "a bind mount's source is the runtime's data grant: listed, allowed"},
		{Pointer: "/mounts/*/options", Type: "array", Rule: RuleEqual, Note: "in order"},
		{Pointer: "/mounts/*/options/*", Type: "string", Rule: RuleEqual},
	},
	idMappingRows("/mounts/*/uidMappings", RuleEqual),
	idMappingRows("/mounts/*/gidMappings", RuleEqual),
	[]Rule{
		{Pointer: "/process", Type: "object", Rule: RuleMembers},
		{Pointer: "/process/terminal", Type: "boolean", Rule: RuleMayDiffer},
		{Pointer: "/process/consoleSize", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/process/consoleSize/height", Type: "uint64", Rule: RuleMayDiffer},
		{Pointer: "/process/consoleSize/width", Type: "uint64", Rule: RuleMayDiffer},
		{Pointer: "/process/user", Type: "object", Rule: RuleMembers},
		{Pointer: "/process/user/uid", Type: "uint32", Rule: RuleEqual},
		{Pointer: "/process/user/gid", Type: "uint32", Rule: RuleEqual},
		{Pointer: "/process/user/umask", Type: "uint32", Rule: RuleEqual},
		{Pointer: "/process/user/additionalGids", Type: "array", Rule: RuleSet},
		{Pointer: "/process/user/additionalGids/*", Type: "uint32", Rule: RuleEqual},
		{Pointer: "/process/user/username", Type: "string", Rule: RuleEqual},
		{Pointer: "/process/args", Type: "array", Rule: RuleMayDiffer},
		{Pointer: "/process/args/*", Type: "string", Rule: RuleMayDiffer},
		{Pointer: "/process/commandLine", Type: "string", Rule: RuleEqual, Note: "Windows; not among the members that may differ"},
		{Pointer: "/process/env", Type: "array", Rule: RuleEnv},
		{Pointer: "/process/env/*", Type: "string", Rule: RuleMayDiffer},
		{Pointer: "/process/cwd", Type: "string", Rule: RuleMayDiffer},
		{Pointer: "/process/capabilities", Type: "object", Rule: RuleMembers},
	},
	capabilityRows("bounding", "effective", "inheritable", "permitted", "ambient"),
	[]Rule{
		{Pointer: "/process/rlimits", Type: "array", Rule: RuleKeyedSet, Key: "type"},
		{Pointer: "/process/rlimits/*", Type: "object", Rule: RuleEqual},
		{Pointer: "/process/rlimits/*/type", Type: "string", Rule: RuleEqual},
		{Pointer: "/process/rlimits/*/hard", Type: "uint64", Rule: RuleEqual},
		{Pointer: "/process/rlimits/*/soft", Type: "uint64", Rule: RuleEqual},
		{Pointer: "/process/noNewPrivileges", Type: "boolean", Rule: RuleEqual},
		{Pointer: "/process/apparmorProfile", Type: "string", Rule: RuleEqual},
		{Pointer: "/process/oomScoreAdj", Type: "int64", Rule: RuleEqual},
		{Pointer: "/process/scheduler", Type: "object", Rule: RuleEqual},
		{Pointer: "/process/scheduler/policy", Type: "string", Rule: RuleEqual},
		{Pointer: "/process/scheduler/nice", Type: "int32", Rule: RuleEqual},
		{Pointer: "/process/scheduler/priority", Type: "int32", Rule: RuleEqual},
		{Pointer: "/process/scheduler/flags", Type: "array", Rule: RuleEqual},
		{Pointer: "/process/scheduler/flags/*", Type: "string", Rule: RuleEqual},
		{Pointer: "/process/scheduler/runtime", Type: "uint64", Rule: RuleEqual},
		{Pointer: "/process/scheduler/deadline", Type: "uint64", Rule: RuleEqual},
		{Pointer: "/process/scheduler/period", Type: "uint64", Rule: RuleEqual},
		{Pointer: "/process/selinuxLabel", Type: "string", Rule: RuleEqual},
		{Pointer: "/process/ioPriority", Type: "object", Rule: RuleEqual},
		{Pointer: "/process/ioPriority/class", Type: "string", Rule: RuleEqual},
		{Pointer: "/process/ioPriority/priority", Type: "int64", Rule: RuleEqual},
		{Pointer: "/process/execCPUAffinity", Type: "object", Rule: RuleEqual},
		{Pointer: "/process/execCPUAffinity/initial", Type: "string", Rule: RuleEqual},
		{Pointer: "/process/execCPUAffinity/final", Type: "string", Rule: RuleEqual},
		{Pointer: "/hostname", Type: "string", Rule: RuleMayDiffer},
		{Pointer: "/domainname", Type: "string", Rule: RuleMayDiffer},
		{Pointer: "/hooks", Type: "object", Rule: RuleEqual, Note: "hooks run as root on the host; lists in order"},
	},
	hookRows("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"),
	[]Rule{
		{Pointer: "/annotations", Type: "object", Rule: RuleMembers},
		{Pointer: "/annotations/*", Type: "string", Rule: RuleEqual, Note: "every annotation outside the cosmetic prefixes must be equal (dev.gvisor., io.katacontainers., cdi.k8s.io/, nvidia.com/ and unknown ones included)"},
		{Pointer: "/annotations/org.opencontainers.image.*", Type: "string", Rule: RuleListed, Note: "cosmetic: listed, allowed"},
		{Pointer: "/annotations/io.sandbox-resume.note.*", Type: "string", Rule: RuleListed, Note: "cosmetic: listed, allowed"},
		{Pointer: "/annotations/org.systemd.*", Type: "string", Rule: RuleEqual},
		{Pointer: "/annotations/run.oci.*", Type: "string", Rule: RuleEqual},
		{Pointer: "/annotations/io.containerd.*", Type: "string", Rule: RuleEqual},
		{Pointer: "/annotations/io.kubernetes.*", Type: "string", Rule: RuleEqual},
		{Pointer: "/annotations/io.sandbox-resume.*", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux", Type: "object", Rule: RuleMembers},
	},
	idMappingRows("/linux/uidMappings", RuleSet),
	idMappingRows("/linux/gidMappings", RuleSet),
	[]Rule{
		{Pointer: "/linux/timeOffsets", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/timeOffsets/*", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/timeOffsets/*/secs", Type: "int64", Rule: RuleEqual},
		{Pointer: "/linux/timeOffsets/*/nanosecs", Type: "uint32", Rule: RuleEqual},
		{Pointer: "/linux/devices", Type: "array", Rule: RuleKeyedSet, Key: "path"},
		{Pointer: "/linux/devices/*", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/devices/*/path", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/devices/*/type", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/devices/*/major", Type: "int64", Rule: RuleEqual},
		{Pointer: "/linux/devices/*/minor", Type: "int64", Rule: RuleEqual},
		{Pointer: "/linux/devices/*/fileMode", Type: "uint32", Rule: RuleEqual},
		{Pointer: "/linux/devices/*/uid", Type: "uint32", Rule: RuleEqual},
		{Pointer: "/linux/devices/*/gid", Type: "uint32", Rule: RuleEqual},
		{Pointer: "/linux/netDevices", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/netDevices/*", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/netDevices/*/name", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/cgroupsPath", Type: "string", Rule: RuleMayDiffer, Note: "set by resume for the new container"},
		{Pointer: "/linux/resources", Type: "object", Rule: RuleMembers, Note: "a member without a row must be equal"},
		{Pointer: "/linux/resources/devices", Type: "array", Rule: RuleEqual, Note: "the device cgroup allowlist, in order"},
		{Pointer: "/linux/resources/devices/*", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/resources/devices/*/allow", Type: "boolean", Rule: RuleEqual},
		{Pointer: "/linux/resources/devices/*/type", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/resources/devices/*/major", Type: "int64", Rule: RuleEqual},
		{Pointer: "/linux/resources/devices/*/minor", Type: "int64", Rule: RuleEqual},
		{Pointer: "/linux/resources/devices/*/access", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/resources/memory", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/memory/limit", Type: "int64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/memory/reservation", Type: "int64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/memory/swap", Type: "int64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/memory/kernel", Type: "int64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/memory/kernelTCP", Type: "int64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/memory/swappiness", Type: "uint64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/memory/disableOOMKiller", Type: "boolean", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/memory/useHierarchy", Type: "boolean", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/memory/checkBeforeUpdate", Type: "boolean", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/cpu", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/cpu/shares", Type: "uint64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/cpu/quota", Type: "int64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/cpu/burst", Type: "uint64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/cpu/period", Type: "uint64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/cpu/realtimeRuntime", Type: "int64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/cpu/realtimePeriod", Type: "uint64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/cpu/cpus", Type: "string", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/cpu/mems", Type: "string", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/cpu/idle", Type: "int64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/pids", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/pids/limit", Type: "int64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/blockIO", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/blockIO/weight", Type: "uint16", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/blockIO/leafWeight", Type: "uint16", Rule: RuleMayDiffer},
	},
	blockIODeviceRows("weightDevice", "weight", "leafWeight"),
	blockIODeviceRows("throttleReadBpsDevice", "rate"),
	blockIODeviceRows("throttleWriteBpsDevice", "rate"),
	blockIODeviceRows("throttleReadIOPSDevice", "rate"),
	blockIODeviceRows("throttleWriteIOPSDevice", "rate"),
	[]Rule{
		{Pointer: "/linux/resources/hugepageLimits", Type: "array", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/hugepageLimits/*", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/hugepageLimits/*/pageSize", Type: "string", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/hugepageLimits/*/limit", Type: "uint64", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/network", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/network/classID", Type: "uint32", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/network/priorities", Type: "array", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/network/priorities/*", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/network/priorities/*/name", Type: "string", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/network/priorities/*/priority", Type: "uint32", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/rdma", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/rdma/*", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/rdma/*/hcaHandles", Type: "uint32", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/rdma/*/hcaObjects", Type: "uint32", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/unified", Type: "object", Rule: RuleMayDiffer},
		{Pointer: "/linux/resources/unified/*", Type: "string", Rule: RuleMayDiffer},
		{Pointer: "/linux/intelRdt", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/intelRdt/closID", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/intelRdt/schemata", Type: "array", Rule: RuleEqual},
		{Pointer: "/linux/intelRdt/schemata/*", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/intelRdt/l3CacheSchema", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/intelRdt/memBwSchema", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/intelRdt/enableMonitoring", Type: "boolean", Rule: RuleEqual},
		{Pointer: "/linux/memoryPolicy", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/memoryPolicy/mode", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/memoryPolicy/nodes", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/memoryPolicy/flags", Type: "array", Rule: RuleEqual},
		{Pointer: "/linux/memoryPolicy/flags/*", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/sysctl", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/sysctl/*", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/seccomp", Type: "object", Rule: RuleEqual, Note: "removing it, or any change, is drift; lists in order"},
		{Pointer: "/linux/seccomp/defaultAction", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/defaultErrnoRet", Type: "uint64", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/architectures", Type: "array", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/architectures/*", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/flags", Type: "array", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/flags/*", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/listenerPath", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/listenerMetadata", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls", Type: "array", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/names", Type: "array", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/names/*", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/action", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/errnoRet", Type: "uint64", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args", Type: "array", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args/*", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args/*/index", Type: "uint64", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args/*/value", Type: "uint64", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args/*/valueTwo", Type: "uint64", Rule: RuleEqual},
		{Pointer: "/linux/seccomp/syscalls/*/args/*/op", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/rootfsPropagation", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/maskedPaths", Type: "array", Rule: RuleSet},
		{Pointer: "/linux/maskedPaths/*", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/readonlyPaths", Type: "array", Rule: RuleSet},
		{Pointer: "/linux/readonlyPaths/*", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/mountLabel", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/namespaces", Type: "array", Rule: RuleKeyedSet, Key: "type", Note: "the same set of types"},
		{Pointer: "/linux/namespaces/*", Type: "object", Rule: RuleMembers},
		{Pointer: "/linux/namespaces/*/type", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/namespaces/*/path", Type: "string", Rule: RuleNamespacePath},
		{Pointer: "/linux/personality", Type: "object", Rule: RuleEqual},
		{Pointer: "/linux/personality/domain", Type: "string", Rule: RuleEqual},
		{Pointer: "/linux/personality/flags", Type: "array", Rule: RuleEqual},
		{Pointer: "/linux/personality/flags/*", Type: "string", Rule: RuleEqual},
		{Pointer: "/solaris", Type: "object", Rule: RuleEqual},
		{Pointer: "/windows", Type: "object", Rule: RuleEqual},
		{Pointer: "/vm", Type: "object", Rule: RuleEqual},
		{Pointer: "/zos", Type: "object", Rule: RuleEqual},
		{Pointer: "/freebsd", Type: "object", Rule: RuleEqual},
	},
)

func concatRules(parts ...[]Rule) []Rule {
	var out []Rule
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// idMappingRows are the rows of a list of LinuxIDMapping triples.
func idMappingRows(ptr, rule string) []Rule {
	return []Rule{
		{Pointer: ptr, Type: "array", Rule: rule},
		{Pointer: ptr + "/*", Type: "object", Rule: RuleEqual},
		{Pointer: ptr + "/*/containerID", Type: "uint32", Rule: RuleEqual},
		{Pointer: ptr + "/*/hostID", Type: "uint32", Rule: RuleEqual},
		{Pointer: ptr + "/*/size", Type: "uint32", Rule: RuleEqual},
	}
}

// capabilityRows are the rows of the capability sets, each compared as a set.
func capabilityRows(sets ...string) []Rule {
	var out []Rule
	for _, s := range sets {
		out = append(out,
			Rule{Pointer: "/process/capabilities/" + s, Type: "array", Rule: RuleSet},
			Rule{Pointer: "/process/capabilities/" + s + "/*", Type: "string", Rule: RuleEqual})
	}
	return out
}

// hookRows are the rows of the hook lists (under "/hooks", which must be
// equal).
func hookRows(kinds ...string) []Rule {
	var out []Rule
	for _, k := range kinds {
		p := "/hooks/" + k
		out = append(out,
			Rule{Pointer: p, Type: "array", Rule: RuleEqual},
			Rule{Pointer: p + "/*", Type: "object", Rule: RuleEqual},
			Rule{Pointer: p + "/*/path", Type: "string", Rule: RuleEqual},
			Rule{Pointer: p + "/*/args", Type: "array", Rule: RuleEqual},
			Rule{Pointer: p + "/*/args/*", Type: "string", Rule: RuleEqual},
			Rule{Pointer: p + "/*/env", Type: "array", Rule: RuleEqual},
			Rule{Pointer: p + "/*/env/*", Type: "string", Rule: RuleEqual},
			Rule{Pointer: p + "/*/timeout", Type: "int64", Rule: RuleEqual})
	}
	return out
}

// blockIODeviceRows are the rows of one blockIO device list (may differ).
func blockIODeviceRows(list string, valueMembers ...string) []Rule {
	p := "/linux/resources/blockIO/" + list
	out := []Rule{
		{Pointer: p, Type: "array", Rule: RuleMayDiffer},
		{Pointer: p + "/*", Type: "object", Rule: RuleMayDiffer},
		{Pointer: p + "/*/major", Type: "int64", Rule: RuleMayDiffer},
		{Pointer: p + "/*/minor", Type: "int64", Rule: RuleMayDiffer},
	}
	for _, m := range valueMembers {
		typ := "uint64"
		if m != "rate" {
			typ = "uint16"
		}
		out = append(out, Rule{Pointer: p + "/*/" + m, Type: typ, Rule: RuleMayDiffer})
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
	equalAny     = &ruleNode{rule: RuleEqual, typ: "any"}
	mayDifferAny = &ruleNode{rule: RuleMayDiffer, typ: "any"}
)

var specRuleTree = buildRuleTree(specRules)

// buildRuleTree turns the table into a tree; a row whose parent has no row,
// or a repeated row, panics (the table is data in the code, checked by the
// tests).
func buildRuleTree(rows []Rule) *ruleNode {
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
			panic("runspec: rule " + r.Pointer + " has no parent row")
		}
		tok := r.Pointer[i+1:]
		switch {
		case tok == "*":
			if parent.any != nil {
				panic("runspec: repeated rule " + r.Pointer)
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
				panic("runspec: repeated rule " + r.Pointer)
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
	if n.rule == RuleMayDiffer {
		return mayDifferAny
	}
	return equalAny
}
