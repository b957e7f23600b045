package suspend

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// chainOf is the chain a generation's file system is: the base's diffIDs
// followed by those of its layers, in order.
func chainOf(ref *snapshot.Ref) []digest.Digest {
	chain := slices.Clone(ref.Base.DiffIDs)
	for _, l := range ref.Layers {
		chain = append(chain, l.DiffID)
	}
	return chain
}

// ChainLabels are the labels of the chain snapshot a suspend commits for
// ref (docs/design.md "Resume on the same host without extracting"):
// snapshot.LabelRun, snapshot.LabelRunUID (when the ref has one) and
// host.LabelChainDiffIDs, the diffIDs of ref's layers joined by ",".
func ChainLabels(ref *snapshot.Ref) map[string]string {
	ids := make([]string, len(ref.Layers))
	for i, l := range ref.Layers {
		ids[i] = l.DiffID.String()
	}
	labels := map[string]string{snapshot.LabelRun: ref.Run, host.LabelChainDiffIDs: strings.Join(ids, ",")}
	if ref.RunUID != "" {
		labels[snapshot.LabelRunUID] = ref.RunUID
	}
	return labels
}

// commitChain is the step of finish between the stop and the release
// (docs/design.md "Resume on the same host without extracting"): the
// stopped container's active snapshot becomes the chain snapshot of the
// generation it wrote, held by the run lease, and the container keeps an
// identical rootfs on top of it (host.Containers.CommitChain). Only when
// the container's snapshot's parent is the chain of the ref's layers but
// the last (the generation is its parent's layers plus one: not
// flattened) and it was not kept running; a chain snapshot that exists
// is left as it is. It reports whether it committed one.
func (s *suspension) commitChain(ctx context.Context) (bool, error) {
	ref := s.res.Ref
	if ref.KeptRunning || len(ref.Layers) == 0 {
		return false, nil
	}
	chain := chainOf(ref)
	if s.ctr.ParentChainID != identity.ChainID(chain[:len(chain)-1]).String() {
		return false, nil // flattened, or the snapshot is not the layer's
	}
	committed, err := s.c.CommitChain(ctx, s.res.Lease, s.ctr, chain, ChainLabels(ref))
	if errdefs.IsFailedPrecondition(err) {
		return false, nil // not on the default snapshotter: the next resume extracts
	}
	if err != nil {
		return committed, fmt.Errorf("commit the snapshot of container %q as the chain snapshot %s: %w", s.ctr.ID, identity.ChainID(chain), err)
	}
	return committed, nil
}
