package resume

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// sameHostChain reports whether this resume uses the chain snapshot that
// this host's suspend committed for the ref (docs/design.md "Resume on the
// same host without extracting"): the ref was written on this host
// (ref.Host.ID is this host's id) and the chain snapshot
// identity.ChainID(base diffIDs + layers' diffIDs) exists, labelled with
// the run, its run UID and the layers' diffIDs. Then materialize does not
// hash the layer blobs (check 9 found each one with its recorded size;
// this host hashed them when its suspend wrote them) and the apply
// extracts nothing. detail names the snapshot; "" when not used. A lookup
// that fails is not an error: the layers are verified and extracted, as
// for any other resume.
func sameHostChain(ctx context.Context, m Materializer, ref *snapshot.Ref, hostID string) (detail string) {
	if hostID == "" || ref.Host.ID != hostID || len(ref.Layers) == 0 {
		return ""
	}
	chain := slices.Clone(ref.Base.DiffIDs)
	ids := make([]string, len(ref.Layers))
	for i, l := range ref.Layers {
		chain, ids[i] = append(chain, l.DiffID), l.DiffID.String()
	}
	labels, err := m.ChainSnapshot(ctx, chain)
	if err != nil {
		return ""
	}
	if labels[snapshot.LabelRun] != ref.Run || labels[snapshot.LabelRunUID] != ref.RunUID || labels[host.LabelChainDiffIDs] != strings.Join(ids, ",") {
		return ""
	}
	return fmt.Sprintf("chain snapshot %s of this host's suspend used as it is (layer blobs present with their sizes, not hashed again)", identity.ChainID(chain))
}
