package suspend

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// checkImageMetadata is docs/design.md "Suspend" step 3's label check: the
// devcontainer.metadata label of the resolved image's config ("Image
// metadata"), read through c. No label passes. A label
// envmanifest.CheckImageMetadata refuses is an
// *envmanifest.ImageMetadataError (class "image-metadata"); a config
// that is absent is errdef.ErrImageUnresolved.
func checkImageMetadata(ctx context.Context, c host.Images, image string, base snapshot.Base) error {
	labels, err := c.ImageLabels(ctx, base.ConfigDigest)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("suspend: image %s: config %s: %v: %w", image, base.ConfigDigest, err, errdef.ErrImageUnresolved)
		}
		return fmt.Errorf("suspend: image %s: read config %s: %w", image, base.ConfigDigest, err)
	}
	if rs, _ := envmanifest.CheckImageLabels(labels); len(rs) > 0 {
		return fmt.Errorf("suspend: %w", &envmanifest.ImageMetadataError{Image: image, Config: base.ConfigDigest, Refusals: rs})
	}
	return nil
}
