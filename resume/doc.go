// Package resume decides whether a suspended durable run may resume into the
// same toolchain (docs/design.md "Resume decision"), and reports why not.
//
// # The decision
//
// Decide takes the SnapshotRef file's bytes, the offered devcontainer.json
// (bytes and path, an optional lockfile path), the trusted keys, and two
// seams: Facts (host identity, image resolution through the containerd
// content store, blob presence, platform match) and Claims (the run's claim
// lease). It runs ten checks in a fixed order and returns a Verdict:
//
//	#  name            fails with             exit
//	1  ref-parse       bad-input              2
//	2  signature       untrusted              6
//	3  ref-schema      bad-input              2
//	4  ref-integrity   tampered               6
//	5  offered-ingest  bad-input              2
//	6  manifest        manifest-mismatch      3
//	7  host            unpinned-cross-host    4
//	8  image           image-unresolved /     5
//	                   image-drifted
//	9  snapshot        snapshot-missing       7
//	10 claim           claim-conflict         8
//
// Every check is reported as pass, fail or skipped; the first failure
// decides the class and the exit code. A fact that cannot be established (a
// daemon error) fails its check with class "internal" and exit 1.
//
// # Drift
//
// When the offered config ingests, DiffCores compares the recorded and the
// offered manifest cores member by member: containerEnv by key, features by
// identifier without tag or digest, mounts by target, image, remoteUser.
// Each entry points into the recorded core when the member exists there,
// else into the offered core, so an operator sees exactly which declaration
// changed.
//
// # Seams
//
// Facts and Claims are implemented by runtime/containerd against a daemon
// and by resume/fake in memory. Decide never creates, changes or deletes
// anything: it is `sandbox-resume resume --check`.
package resume
