package resume

import "github.com/sandbox-resume/sandbox-resume/runspec"

// The spec policy lives in package runspec (docs/design.md "Layout"). These
// names forward to it for the callers the host seam (issue 25) rewrites —
// runtime/containerd, resume/fake and resume/facttest — and go with them.

// BundleRootfs is runspec.BundleRootfs: the root.path of every incarnation.
const BundleRootfs = runspec.BundleRootfs

// SpecOptions is runspec.Options: what check 10 needs beyond the two specs.
type SpecOptions = runspec.Options

// CompareSpec is runspec.Compare (check 10).
func CompareSpec(recorded, offered []byte, opts SpecOptions) ([]runspec.SpecDrift, error) {
	return runspec.Compare(recorded, offered, opts)
}

// HostPID1Namespace is runspec.HostPID1Namespace: whether path names the
// namespace of type nsType of this host's pid 1 (fails closed).
func HostPID1Namespace(nsType, path string) bool { return runspec.HostPID1Namespace(nsType, path) }
