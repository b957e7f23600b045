package migrate

import (
	"encoding/json"
	"fmt"

	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Docker's media types of an image index and manifest (Docker Image
// Manifest V2, Schema 2), which containerd stores and serves beside OCI's.
const (
	mediaTypeDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaTypeDockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
)

// isIndexType reports whether mt is an image index media type (OCI, or
// Docker's manifest list).
func isIndexType(mt string) bool {
	return mt == ocispec.MediaTypeImageIndex || mt == mediaTypeDockerManifestList
}

// isManifestType reports whether mt is an image manifest media type (OCI,
// or Docker's schema 2).
func isManifestType(mt string) bool {
	return mt == ocispec.MediaTypeImageManifest || mt == mediaTypeDockerManifest
}

// imageMediaType tells an index from a manifest by the blob's mediaType
// member, else by its members (manifests → index; config → manifest).
// Anything else wraps errdefs.ErrInvalidArgument.
func imageMediaType(data []byte) (string, error) {
	var probe struct {
		MediaType string               `json:"mediaType"`
		Manifests []ocispec.Descriptor `json:"manifests"`
		Config    *ocispec.Descriptor  `json:"config"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return "", fmt.Errorf("not JSON: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	switch {
	case isIndexType(probe.MediaType), isManifestType(probe.MediaType):
		return probe.MediaType, nil
	case probe.MediaType == "" && len(probe.Manifests) > 0:
		return ocispec.MediaTypeImageIndex, nil
	case probe.MediaType == "" && probe.Config != nil && probe.Config.Digest != "":
		return ocispec.MediaTypeImageManifest, nil
	}
	return "", fmt.Errorf("media type %q is not an image index or manifest: %w", probe.MediaType, errdefs.ErrInvalidArgument)
}
