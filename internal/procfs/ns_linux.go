package procfs

import (
	"os"
	"syscall"
)

// nsProcNames maps OCI namespace types (config-linux.md "Namespaces") to
// their names under /proc/<pid>/ns.
var nsProcNames = map[string]string{
	"pid":     "pid",
	"network": "net",
	"mount":   "mnt",
	"ipc":     "ipc",
	"uts":     "uts",
	"user":    "user",
	"cgroup":  "cgroup",
	"time":    "time",
}

// HostPID1Namespace reports whether path names the namespace of type
// nsType (an OCI namespace type) that this host's pid 1 is in: whether it
// has the device and inode of /proc/1/ns/<name> (docs/design.md "Spec
// validation", check 10). It is host.Info.HostNamespace on a real
// host. It fails closed: an unknown type, or a path or /proc/1/ns entry it
// cannot stat, is reported as the host's.
func HostPID1Namespace(nsType, path string) bool {
	name, ok := nsProcNames[nsType]
	if !ok {
		return true
	}
	host, err := os.Stat("/proc/1/ns/" + name)
	if err != nil {
		return true
	}
	offered, err := os.Stat(path)
	if err != nil {
		return true
	}
	hs, ok1 := host.Sys().(*syscall.Stat_t)
	st, ok2 := offered.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 {
		return true
	}
	return hs.Dev == st.Dev && hs.Ino == st.Ino
}
