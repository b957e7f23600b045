package host

import "github.com/sandbox-resume/sandbox-resume/snapshot"

// LabelChainDiffIDs labels a chain snapshot that a suspend committed from
// a container's active snapshot (Containers.CommitChain) with the diffIDs
// of the generation's layers, in order, joined by ",". Beside it the
// snapshot carries snapshot.LabelRun and snapshot.LabelRunUID
// (docs/design.md "Resume on the same host without extracting").
const LabelChainDiffIDs = snapshot.LabelPrefix + "diffids"
