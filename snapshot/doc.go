// Package snapshot is the SnapshotRef: the signed record of a suspended
// durable run (docs/design.md "SnapshotRef"), and the rules every holder
// of one applies.
//
// # The ref
//
// Ref is the record of one generation of a run: the run id and generation
// (with its parent's digest and the suspended container's fence from
// generation 2 on), the manifest address and core of the environment it
// was suspended in, whether that manifest was pinned, the host, the base
// image the reference resolved to, the rootfs diff layers, the recorded
// runtime spec blob and the runtime; and, in sandbox.snapshot-ref/3, the
// run's UID (NewRunUID), the digests of its earlier refs (NextAncestors)
// and, when a generation has them, its memory image and what it was
// repinned or forked from. Suspend writes sandbox.snapshot-ref/3;
// sandbox.snapshot-ref/2 refs are still read, and sandbox.snapshot-ref/1
// refs as generation 1 with one layer and no spec. SignRef writes a ref file (envelope.Sign over the ref's RFC 8785
// JCS bytes); OpenRef is the one way to read one back: parse, signature,
// schema and integrity, in that order, before any field is used.
// OpenRefUnsafe skips the signature, for code that only forwards a ref to
// a host that will open it with OpenRef.
//
// # Layers
//
// VerifyDiff is the one full layer verifier: every reader of a stored
// rootfs diff that applies nothing — import, pull, and every fake — checks
// the blob's size and digest and its decompression, bounded by the
// recorded uncompressed size, against the diffID with it. Materialize on
// containerd checks only size and digest (VerifyLayerBlob) before the
// daemon's apply, which computes the diffID as it extracts and commits
// nothing under another (docs/design.md "Materialize").
//
// # The host seam
//
// What suspend, resume and migrate need of containerd is the host
// package's: small role interfaces over this package's types (Container,
// Lease, Base, Layer, Host), which runtime/containerd implements against a
// daemon and host/memhost in memory; host/hosttest is the conformance
// suite both pass.
package snapshot
