//go:build tools

package main

import (
	_ "github.com/containerd/containerd/v2/client"
	_ "github.com/containerd/containerd/v2/core/content"
	_ "github.com/containerd/containerd/v2/core/images/archive"
	_ "github.com/containerd/containerd/v2/core/remotes/docker"
	_ "github.com/containerd/containerd/v2/pkg/rootfs"
	_ "github.com/containerd/errdefs"
	_ "github.com/containerd/platforms"
	_ "github.com/distribution/reference"
	_ "github.com/go-json-experiment/json/jsontext"
	_ "github.com/gowebpki/jcs"
	_ "github.com/opencontainers/go-digest"
	_ "github.com/opencontainers/image-spec/specs-go/v1"
	_ "github.com/spf13/cobra"
	_ "github.com/tailscale/hujson"
	_ "github.com/zeebo/blake3"
)

func main() {}
