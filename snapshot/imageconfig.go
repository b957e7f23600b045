package snapshot

import (
	"context"

	"github.com/opencontainers/go-digest"
)

// ImageConfigReader reads an image's config blob from the content store:
// the seam through which suspend (docs/design.md "Suspend", step 3) and
// resume's check 8 (resume.Facts) read the image's devcontainer.metadata
// label ("Image metadata").
type ImageConfigReader interface {
	// ImageLabels returns the labels of the image config blob config
	// (image-spec config.md: config.Labels) as the content store holds
	// it, its bytes verified against the digest; nil when the config has
	// no labels. The label values are returned as stored: checking them is
	// the caller's business. Errors: errdefs.ErrInvalidArgument for an
	// invalid digest or a blob that is not a JSON image config;
	// errdefs.ErrNotFound when the blob is absent; each names the digest.
	ImageLabels(ctx context.Context, config digest.Digest) (map[string]string, error)
}
