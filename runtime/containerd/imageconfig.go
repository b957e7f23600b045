package containerd

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ImageLabels returns the labels of the image config blob config
// (image-spec config.md: config.Labels; host.Images.ImageLabels, as
// used by suspend step 3 and resume's check 8 for the devcontainer.metadata
// label, docs/design.md "Image metadata"), or nil when the config has
// none. The blob is read through the same bounded, digest-verified cache
// as ResolveImage (at most 4 MiB), so a config ResolveImage just read
// costs one Info call. It holds no policy: values are returned as stored.
//
// Errors: errdefs.ErrInvalidArgument for an invalid digest, a blob over
// the size limit or one that is not a JSON image config;
// errdefs.ErrNotFound when the blob is absent from this namespace;
// errdefs.ErrDataLoss when its bytes do not match the digest; each names
// the digest.
func (r *Runtime) ImageLabels(ctx context.Context, config digest.Digest) (map[string]string, error) {
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("image config digest %q: %w: %w", config, errdefs.ErrInvalidArgument, err)
	}
	b, err := r.readBlob(ctx, r.client.ContentStore(), ocispec.Descriptor{Digest: config})
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("image config %s: not a JSON image config: %w: %w", config, errdefs.ErrInvalidArgument, err)
	}
	return cfg.Config.Labels, nil
}
