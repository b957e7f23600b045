// Package resume decides whether a suspended durable run may resume into the
// same toolchain (docs/design.md "Resume decision"), reports why not, and
// materializes it (docs/design.md "Materialize").
//
// # The decision
//
// Decide takes the SnapshotRef file's bytes, the offered devcontainer.json
// (bytes and path, an optional lockfile path), the trusted keys, an optional
// offered OCI runtime spec, and two seams: Facts (host identity, image
// resolution through the containerd content store, blob presence and the
// spec blob, platform match, containers of this namespace) and the run
// ledger (ledger.Ledger). It runs eleven checks in a fixed order and
// returns a Verdict:
//
//	#  name            fails with                     exit
//	1  ref-parse       bad-input                      2
//	2  signature       untrusted                      6
//	3  ref-schema      bad-input                      2
//	4  ref-integrity   tampered                       6
//	5  offered-ingest  bad-input                      2
//	6  manifest        manifest-mismatch              3
//	7  host            unpinned-cross-host            4
//	8  image           image-unresolved /             5
//	                   image-drifted
//	9  snapshot        snapshot-missing               7
//	10 spec            spec-drift / bad-input /       3 / 2 / 7
//	                   snapshot-missing
//	11 claim           superseded / forked /          9 / 6 / 8
//	                   claim-conflict
//
// Every check is reported as pass, fail or skipped; the first failure
// decides the class and the exit code. A fact that cannot be established (a
// daemon or ledger error) fails its check with class "internal" and exit 1.
//
// # Drift
//
// When the offered config ingests, DiffCores compares the recorded and the
// offered manifest cores member by member: containerEnv by key, features by
// identifier without tag or digest, mounts by target, image, remoteUser.
// Each entry points into the recorded core when the member exists there,
// else into the offered core, so an operator sees exactly which declaration
// changed. Package runspec compares an offered runtime spec with the
// recorded one in the same shape (runspec.SpecDrift), driven by one rule
// table (runspec.Rules).
//
// # Materialization
//
// Resume runs the same checks, claims the run in the ledger, and creates
// the incarnation through the Materializer seam: every layer verified, the
// recorded (or offered) spec edited as JSON by runspec.Patch, the recorded
// runtime and options, the ledger's Live.
//
// # Seams
//
// Facts, Materializer and RunHost compose roles of the one host seam
// (package host), implemented by runtime/containerd against a daemon and
// by host/memhost in memory; host/hosttest is their conformance suite. Decide never
// creates, changes or deletes anything: it is `sandbox-resume resume
// --check`.
package resume
