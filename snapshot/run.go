package snapshot

import (
	"regexp"
	"strings"
	"sync"

	"github.com/sandbox-resume/sandbox-resume/errdef"
)

// ErrInvalidRun is wrapped when a run id is not valid (ValidRunID) or,
// with no run id given, the container id does not make one
// (DefaultRunID). Class "usage" (internal/exitcode).
var ErrInvalidRun = errdef.New(errdef.ErrUsage, "invalid run id")

// MaxRunIDLen is the longest run id in bytes (docs/design.md "SnapshotRef": it ends
// up in lease ids, labels, container ids and OCI tags).
const MaxRunIDLen = 63

// runIDRE is compiled on first use, not at process start.
var runIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*$`) })

// ValidRunID reports whether s is a run id: it matches
// [a-z0-9]+([._-][a-z0-9]+)* and is at most MaxRunIDLen (63) bytes long
// (docs/design.md "SnapshotRef", member "run").
func ValidRunID(s string) bool {
	return len(s) <= MaxRunIDLen && runIDRE().MatchString(s)
}

// DefaultRunID derives the default run id from a container id: the id
// lower-cased (ASCII only), when that is a valid run id (docs/design.md
// "SnapshotRef"). ok is false when it is not; the caller must then ask for
// an explicit --run.
func DefaultRunID(containerID string) (run string, ok bool) {
	run = strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, containerID)
	if !ValidRunID(run) {
		return "", false
	}
	return run, true
}

// RunLease returns the id of the run lease of run,
// "sandbox-resume.run/<run>": it holds the rootfs diff, the ref blob and the
// base image content from suspension until discard (docs/design.md "SnapshotRef").
func RunLease(run string) string { return RunLeasePrefix + run }

// ClaimLease returns the id of the claim lease the previous release (`/1`)
// created for run, "sandbox-resume.claim/<run>". This release creates none:
// the ledger holds claims (docs/design.md "The run ledger"); a lease still
// present is refused by the upgrade rule and deleted by discard.
func ClaimLease(run string) string { return ClaimLeasePrefix + run }
