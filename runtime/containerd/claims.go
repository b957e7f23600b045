package containerd

import (
	"context"
	"fmt"
	"strconv"

	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ClaimHolder returns the holder of run's claim lease
// "sandbox-resume.claim/<run>" in this namespace (DESIGN "Materialize,
// claim, run lifecycle"), or (nil, nil) when the lease does not exist. It
// implements resume.Claims and only reads: the holder comes from the
// lease's labels (resume.LabelClaim*), ContainerExists from the container
// store of this daemon and namespace, ProcessAlive from resume.ProcessAlive
// on this machine. Errors are daemon errors with their errdefs class,
// naming the lease or container.
func (r *Runtime) ClaimHolder(ctx context.Context, run string) (*resume.Claim, error) {
	id := snapshot.ClaimLeasePrefix + run
	ls, err := r.client.LeasesService().List(ctx, "id=="+strconv.Quote(id))
	if err != nil {
		return nil, fmt.Errorf("list claim lease %s: %w", id, native(err))
	}
	for _, l := range ls {
		if l.ID != id {
			continue
		}
		c := resume.ClaimFromLabels(id, l.Labels)
		if c.Container != "" {
			_, err := r.client.ContainerService().Get(ctx, c.Container)
			switch err = native(err); {
			case err == nil:
				c.ContainerExists = true
			case !errdefs.IsNotFound(err):
				return nil, fmt.Errorf("claim lease %s: container %s: %w", id, c.Container, err)
			}
		}
		c.ProcessAlive = resume.ProcessAlive(c.PID, c.StartTime, c.BootID)
		return c, nil
	}
	return nil, nil
}

var _ resume.Claims = (*Runtime)(nil)
