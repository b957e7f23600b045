// Package migrate moves suspended runs between hosts (docs/design.md
// "Moving runs"): the migration artifact, and the policy of export,
// import, push and pull.
//
// # The artifact
//
// A run travels as an OCI image manifest with artifactType ArtifactType:
// its config is the signed SnapshotRef file (media type
// snapshot.MediaTypeRef), its one layer the rootfs diff, its subject the
// base image's platform manifest. ArtifactManifest builds it; the same ref
// always gives the same manifest bytes. A handed-over run's artifact has
// one more layer, last: the handoff statement.
//
// # Verification before use
//
// Nothing that arrives is used before it is verified: ScanArchive
// pre-scans an OCI layout archive (names, types, links, duplicates, every
// blob's sha256 against its name) before anything is stored;
// CheckArchive and CheckArtifactManifest check the artifact's shape and
// open its ref with snapshot.OpenRef (signature first) before any of its
// fields is read; after storing, every blob's size and digest is checked
// in the store and the diff is checked with snapshot.VerifyDiff. Refusals
// wrap ErrArtifactRefused.
//
// # Orchestration over small seams
//
// Export, Import, Push and Pull run over Store (the host roles Content,
// Leases, Archiver and Images) and Registry (host.Registry), which
// runtime/containerd implements against a daemon; so the same
// verification runs against any host, including the in-memory one of
// host/memhost.
//
// # Handoff
//
// With per-host ledgers a move hands the run over, signed, to one named
// host (docs/design.md "Exactly once across hosts"): WithHandoff makes
// Export and Push run the ledger's HandedOff and add the handoff statement
// (Statement, SignStatement, OpenStatement; media type MediaTypeHandoff)
// as the artifact's last layer; WithReceiver makes Import and Pull verify
// it and run Received, in the order verify → temporary lease → out →
// Received → run lease. Recall undoes a handoff never taken up.
//
// # Runs by generation
//
// Push to a bare REG/REPO tags the artifact GenerationTag(run,
// generation), "<run>.g<n>"; Pull of a bare REG/REPO WithRun lists the
// repository's tags (Registry.Tags) and pulls the one LatestGenerationTag
// picks. Resume and the run ledger then decide whether that generation may
// run.
package migrate
