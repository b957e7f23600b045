// Command importbusybox imports the bundled busybox test image into a
// containerd content store, without the network: the image is built in
// memory by internal/testimage from Debian's busybox-static
// (/bin/busybox), as the integration tests build it, and the image name is
// created or re-pointed at its index. examples/demo.sh uses it.
//
//	go run ./examples/importbusybox --address SOCK --namespace NS [--marker M] [--sleep] NAME
//
// --sleep sets the image config's Cmd to ["sleep", "86400"] instead of
// busybox's /bin/sh, so a container started detached keeps running and
// `ctr task exec` can run processes inside it.
// --marker changes the content of /etc/sandbox-resume-marker, so a
// different marker gives different digests under the same name (the demo's
// "image name re-pointed" refusal). It prints the index digest.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
)

func main() {
	address := flag.String("address", os.Getenv("CONTAINERD_ADDRESS"), "containerd socket")
	ns := flag.String("namespace", "sandbox-resume", "containerd namespace")
	marker := flag.String("marker", "busybox", "content of "+testimage.MarkerPath)
	sleep := flag.Bool("sleep", false, `image config Cmd ["sleep", "86400"]`)
	flag.Parse()
	if flag.NArg() != 1 || *address == "" {
		fmt.Fprintln(os.Stderr, "usage: importbusybox --address SOCK [--namespace NS] [--marker M] NAME")
		os.Exit(64)
	}
	if err := run(*address, *ns, *marker, *sleep, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "importbusybox:", err)
		os.Exit(1)
	}
}

func run(address, ns, marker string, sleep bool, name string) error {
	named, err := reference.ParseDockerRef(name)
	if err != nil {
		return fmt.Errorf("image name %q: %w", name, err)
	}
	im, err := testimage.Busybox(marker)
	if err != nil {
		return err
	}
	if sleep {
		if im, err = withCmd(im, []string{"sleep", "86400"}); err != nil {
			return err
		}
	}
	c, err := client.New(address, client.WithDefaultNamespace(ns))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), time.Minute)
	defer cancel()
	// Hold the blobs while writing them; the image record (and the GC
	// labels that link each blob to its children) keeps them afterwards.
	ctx, done, err := c.WithLease(ctx)
	if err != nil {
		return err
	}
	defer done(context.WithoutCancel(ctx))
	cs := c.ContentStore()
	for _, b := range im.Blobs {
		labels := map[string]string{}
		keys := map[string]int{}
		for _, ch := range b.Children {
			for _, key := range images.ChildGCLabels(ch) {
				i := keys[key]
				keys[key]++
				if i > 0 || key[len(key)-1] == '.' {
					key = fmt.Sprintf("%s%d", key, i)
				}
				labels[key] = ch.Digest.String()
			}
		}
		if err := content.WriteBlob(ctx, cs, "importbusybox-"+b.Desc.Digest.Encoded(), bytes.NewReader(b.Data), b.Desc, content.WithLabels(labels)); err != nil {
			return fmt.Errorf("write blob %s: %w", b.Desc.Digest, err)
		}
		if len(labels) > 0 {
			var fields []string
			for k := range labels {
				fields = append(fields, "labels."+k)
			}
			if _, err := cs.Update(ctx, content.Info{Digest: b.Desc.Digest, Labels: labels}, fields...); err != nil {
				return fmt.Errorf("label blob %s: %w", b.Desc.Digest, err)
			}
		}
	}
	img := images.Image{Name: named.String(), Target: ocispec.Descriptor{MediaType: im.Index.MediaType, Digest: im.Index.Digest, Size: im.Index.Size}}
	is := c.ImageService()
	if _, err := is.Create(ctx, img); errdefs.IsAlreadyExists(err) {
		_, err = is.Update(ctx, img, "target")
		if err != nil {
			return fmt.Errorf("re-point image %s: %w", img.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("create image %s: %w", img.Name, err)
	}
	fmt.Println(im.Index.Digest)
	return nil
}

// withCmd returns im with a config whose Cmd is cmd: a new config, host
// platform manifest and index (the other platform's manifest is kept).
func withCmd(im *testimage.Image, cmd []string) (*testimage.Image, error) {
	var cfg ocispec.Image
	if err := json.Unmarshal(im.Blob(im.Config.Digest), &cfg); err != nil {
		return nil, err
	}
	cfg.Config.Cmd = cmd
	out := *im
	out.Blobs = append([]testimage.Blob{}, im.Blobs...)
	add := func(mediaType string, v any, children []ocispec.Descriptor) (ocispec.Descriptor, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
		out.Blobs = append(out.Blobs, testimage.Blob{Desc: d, Data: b, Children: children})
		return d, nil
	}
	var err error
	if out.Config, err = add(ocispec.MediaTypeImageConfig, cfg, nil); err != nil {
		return nil, err
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: out.Config, Layers: im.Layers}
	if out.Manifest, err = add(ocispec.MediaTypeImageManifest, m, append([]ocispec.Descriptor{out.Config}, im.Layers...)); err != nil {
		return nil, err
	}
	host, other := out.Manifest, im.Other
	p, op := im.Platform, im.OtherPlatform
	host.Platform, other.Platform = &p, &op
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{host, other}}
	if out.Index, err = add(ocispec.MediaTypeImageIndex, idx, idx.Manifests); err != nil {
		return nil, err
	}
	return &out, nil
}
