// Package suspend suspends a durable run (docs/design.md "Suspend"): Run
// writes the run's next generation. For the runtime's own container that
// is generation 1; for a container that holds the run (an incarnation
// created by resume, or a container kept running by an earlier suspend) it
// is the generation after the ledger's latest, whose layers are those of
// the generation the container was resumed from plus the diff of its
// snapshot since then (or, flattened, one diff against the base image).
// Run ingests the run's devcontainer.json, checks that it describes the
// container, captures the container's file system changes as a zstd layer
// and its runtime spec in the content store under the run lease, records
// the generation in the run ledger while the task is paused, and only then
// writes the signed SnapshotRef file and stops (or resumes) the task; an
// incarnation it stopped is deleted, and the layers no generation among
// the latest few names are released from the run lease.
//
// Run talks to containerd only through the host roles Host composes
// (runtime/containerd implements them against a daemon, host/memhost in
// memory) and to the ledger through ledger.Ledger (ledger/bolt, ledger/etcd,
// ledger/fake). Every step is safe to interrupt: the container carries the
// io.sandbox-resume.suspending label until the suspend finished, and a
// rerun completes what an interrupted one began — from the ledger's
// record when the generation was recorded, without a new diff.
package suspend
