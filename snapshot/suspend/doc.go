// Package suspend suspends a durable run (docs/design.md "Suspend"): Run
// ingests the run's devcontainer.json, checks that it describes the
// container, captures the container's file system changes as a zstd
// layer in the content store under the run lease, stops (or resumes) its
// task, and writes the signed SnapshotRef, as a blob and as a file.
//
// Run talks to containerd only through the snapshot.Capturer seam:
// runtime/containerd implements it against a daemon and snapshot/fake in
// memory. Every step is safe to interrupt: a rerun with the same run id
// completes what an interrupted one began.
package suspend
