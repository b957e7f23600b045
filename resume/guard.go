package resume

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// guardReplaced is the holder-deletion guard of check 11 (docs/design.md
// "Hardening", "Replacing a gone holder"): a claim that replaces holder r
// — a gone resuming holder, or a live holder taken over — deletes the
// container under r's id on this host and namespace only when its labels
// name this run (snapshot.LabelRun) and the replaced fence
// (snapshot.LabelFence); any other container there is left alone and the
// claim is claim-conflict naming it. A live holder taken over whose
// container has a running task here is claim-conflict unless
// Request.Force (an operator's decision). It returns what the claim will
// delete ("" when nothing here), reading only.
func (s *state) guardReplaced(ctx context.Context, r *ledger.Holder, fence uint64, live bool) (string, error) {
	if r == nil || !s.local(r.Container) {
		return "", nil
	}
	cf, err := s.facts.ContainerState(ctx, r.ID)
	if err != nil {
		return "", internal(CheckClaim, fmt.Errorf("container %s of the replaced holder: %w", r.ID, err))
	}
	if cf == nil {
		return "", nil
	}
	run, f := cf.Labels[snapshot.LabelRun], cf.Labels[snapshot.LabelFence]
	if run != s.ref.Run || f != strconv.FormatUint(fence, 10) {
		return "", refusef(CheckClaim, ClassClaimConflict,
			"container %s in namespace %q on host %q, under the replaced holder's id, carries run label %q and fence label %q, not run %q and fence %d: it is not the holder's container and is left alone (delete or rename it, then resume again)",
			r.ID, r.Namespace, r.Host, run, f, s.ref.Run, fence)
	}
	if live && cf.Running && !s.req.Force {
		return "", refusef(CheckClaim, ClassClaimConflict,
			"the live holder %s has a running task on this host and namespace: taking it over would delete container %s with its task; that needs force as well (an operator's decision)",
			r, r.ID)
	}
	what := fmt.Sprintf("container %s (run %q, fence %d)", r.ID, run, fence)
	if cf.Running {
		what += " and its running task"
	}
	return what, nil
}
