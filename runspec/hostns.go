package runspec

import "github.com/sandbox-resume/sandbox-resume/internal/procfs"

// HostPID1Namespace reports whether path names the namespace of type
// nsType (an OCI namespace type) that this host's pid 1 is in
// (procfs.HostPID1Namespace: the device and inode of /proc/1/ns/<name>;
// docs/design.md "Spec validation", check 10). It is Options.HostNamespace
// for a real host. It fails closed: an unknown type, or a path or
// /proc/1/ns entry it cannot stat, is reported as the host's; off Linux
// every path is.
func HostPID1Namespace(nsType, path string) bool { return procfs.HostPID1Namespace(nsType, path) }
