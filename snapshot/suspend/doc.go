// Package suspend suspends a durable run (docs/design.md "Suspend"): Run
// ingests the run's devcontainer.json, checks that it describes the
// container, captures the container's file system changes as a zstd
// layer and its runtime spec in the content store under the run lease,
// records the generation in the run ledger while the task is paused, and
// only then writes the signed SnapshotRef file and stops (or resumes) the
// task.
//
// Run talks to containerd only through the snapshot.Capturer seam
// (runtime/containerd implements it against a daemon, snapshot/fake in
// memory) and to the ledger through ledger.Ledger (ledger/bolt, ledger/etcd,
// ledger/fake). Every step is safe to interrupt: the container carries the
// io.sandbox-resume.suspending label until the suspend finished, and a
// rerun completes what an interrupted one began — from the ledger's
// record when the generation was recorded, without a new diff.
package suspend
