// Package testimage builds small OCI images in memory for tests: an image
// config, one uncompressed layer, a platform manifest, a placeholder manifest
// for a second platform, and two indexes (both platforms; the second platform
// only). It imports no containerd package, so the in-memory fake and the
// conformance suite use it as well as the integration harness, which writes
// the blobs into a daemon's content store.
//
// Everything is built with the image-spec types (ocispec.Image,
// ocispec.Manifest, ocispec.Index) and go-digest (OCI image-spec v1.1
// "Image Manifest", "Image Index", "Image Configuration"). Builds are
// deterministic: the same files give the same digests.
package testimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
	"time"

	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// BusyboxPath is where Debian's busybox-static package installs the static
// busybox binary that Busybox puts at /bin/busybox.
const BusyboxPath = "/bin/busybox"

// BusyboxApplets are the names Busybox links to /bin/busybox under /bin.
var BusyboxApplets = []string{
	"cat", "chmod", "cp", "echo", "env", "false", "grep", "head", "id", "ln",
	"ls", "mkdir", "mv", "rm", "sh", "sha256sum", "sleep", "stat", "tail",
	"test", "touch", "true", "wc",
}

// MarkerPath is the file every built image carries with its marker string,
// so two builds with different markers have different layers and digests.
const MarkerPath = "etc/sandbox-resume-marker"

// File is one entry of a layer tar: a regular file (Data, Mode) or, when Link
// is set, a symbolic link to Link. Name is relative ("bin/sh"); parent
// directories are added automatically.
type File struct {
	Name string
	Mode int64
	Data []byte
	Link string
}

// Blob is one blob of an image: its descriptor, its bytes, and the
// descriptors it references (a manifest's config and layers, an index's
// manifests) so that a writer can set the content store's GC reference
// labels.
type Blob struct {
	Desc     ocispec.Descriptor
	Data     []byte
	Children []ocispec.Descriptor
}

// Image is what Build returns. Index lists Manifest (for Platform) and Other
// (the placeholder for OtherPlatform); Foreign is an index that lists only
// Other, for the "platform missing" case. Blobs holds every blob, children
// before the blobs that reference them.
type Image struct {
	Index         ocispec.Descriptor
	Foreign       ocispec.Descriptor
	Manifest      ocispec.Descriptor
	Config        ocispec.Descriptor
	Layers        []ocispec.Descriptor
	DiffIDs       []digest.Digest
	Platform      ocispec.Platform
	Other         ocispec.Descriptor
	OtherPlatform ocispec.Platform
	Blobs         []Blob
}

// PlatformString returns im.Platform as "os/arch[/variant]"
// (platforms.Format of the normalized platform).
func (im *Image) PlatformString() string {
	return platforms.Format(platforms.Normalize(im.Platform))
}

// Blob returns the bytes of the blob with digest d, or nil.
func (im *Image) Blob(d digest.Digest) []byte {
	for _, b := range im.Blobs {
		if b.Desc.Digest == d {
			return b.Data
		}
	}
	return nil
}

// HostPlatform returns the normalized platform of this process
// (platforms.DefaultSpec), without an OS version.
func HostPlatform() ocispec.Platform {
	p := platforms.Normalize(platforms.DefaultSpec())
	return ocispec.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}
}

// OtherPlatform returns a platform that differs from p: linux/arm64, or
// linux/amd64 when p is arm64.
func OtherPlatform(p ocispec.Platform) ocispec.Platform {
	if p.Architecture == "arm64" {
		return ocispec.Platform{OS: "linux", Architecture: "amd64"}
	}
	return ocispec.Platform{OS: "linux", Architecture: "arm64"}
}

// Busybox builds an image for the host platform whose root filesystem is
// BusyboxPath at /bin/busybox, a symlink per BusyboxApplets and the file
// MarkerPath holding marker. It fails when BusyboxPath cannot be read (install
// Debian's busybox-static) or when this process is not built for the host's
// architecture.
func Busybox(marker string, opts ...Option) (*Image, error) {
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, fmt.Errorf("testimage: busybox (install busybox-static): %w", err)
	}
	files := []File{{Name: "bin/busybox", Mode: 0o755, Data: bb}}
	for _, a := range BusyboxApplets {
		files = append(files, File{Name: "bin/" + a, Link: "busybox"})
	}
	files = append(files, File{Name: MarkerPath, Mode: 0o644, Data: []byte(marker + "\n")})
	return Build(HostPlatform(), files, opts...)
}

// Synthetic builds an image for platform p whose only file is MarkerPath
// holding marker: no executable, for tests that never run it.
func Synthetic(p ocispec.Platform, marker string, opts ...Option) (*Image, error) {
	return Build(p, []File{{Name: MarkerPath, Mode: 0o644, Data: []byte(marker + "\n")}}, opts...)
}

// Option changes what Build writes.
type Option func(*options)

type options struct {
	labels map[string]string
	cmd    []string
}

// WithLabels sets the config's Labels (image-spec config.md:
// config.Labels) of the platform image; the placeholder's config has
// none. Images with the same files and different labels share their layer
// (and diffIDs), but not their config, manifest and index digests.
func WithLabels(labels map[string]string) Option {
	return func(o *options) { o.labels = labels }
}

// WithCmd sets the config's Cmd of the platform image (default
// ["/bin/sh"], which exits at once on a null stdin). Like WithLabels, it
// changes the config, manifest and index digests, not the layer.
func WithCmd(cmd ...string) Option {
	return func(o *options) { o.cmd = cmd }
}

var epoch = time.Unix(0, 0).UTC()

// Build builds the image described in the package comment for platform p
// from files. The layer is an uncompressed tar
// (ocispec.MediaTypeImageLayer), so its digest is also its diffID.
func Build(p ocispec.Platform, files []File, opts ...Option) (*Image, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if p.OS == "" || p.Architecture == "" {
		return nil, fmt.Errorf("testimage: platform needs os and architecture, got %q", platforms.Format(p))
	}
	im := &Image{Platform: p, OtherPlatform: OtherPlatform(p)}

	layer, err := layerTar(files)
	if err != nil {
		return nil, err
	}
	layerDesc := im.add(ocispec.MediaTypeImageLayer, layer, nil)
	im.Layers = []ocispec.Descriptor{layerDesc}
	im.DiffIDs = []digest.Digest{layerDesc.Digest}
	cfg := config(p, im.DiffIDs)
	if len(o.labels) > 0 {
		cfg.Config.Labels = o.labels
	}
	if len(o.cmd) > 0 {
		cfg.Config.Cmd = o.cmd
	}
	im.Config, err = im.addJSON(ocispec.MediaTypeImageConfig, cfg, nil)
	if err != nil {
		return nil, err
	}
	im.Manifest, err = im.addManifest(im.Config, im.Layers)
	if err != nil {
		return nil, err
	}

	// The placeholder platform: a layer holding a text file, its config and
	// manifest. Never run.
	ph, err := layerTar([]File{{Name: "PLACEHOLDER", Mode: 0o644, Data: []byte("placeholder for " + platforms.Format(im.OtherPlatform) + "\n")}})
	if err != nil {
		return nil, err
	}
	phLayer := im.add(ocispec.MediaTypeImageLayer, ph, nil)
	phConfig, err := im.addJSON(ocispec.MediaTypeImageConfig, config(im.OtherPlatform, []digest.Digest{phLayer.Digest}), nil)
	if err != nil {
		return nil, err
	}
	im.Other, err = im.addManifest(phConfig, []ocispec.Descriptor{phLayer})
	if err != nil {
		return nil, err
	}

	withPlatform := func(d ocispec.Descriptor, p ocispec.Platform) ocispec.Descriptor {
		d.Platform = &p
		return d
	}
	im.Index, err = im.addIndex(withPlatform(im.Manifest, p), withPlatform(im.Other, im.OtherPlatform))
	if err != nil {
		return nil, err
	}
	im.Foreign, err = im.addIndex(withPlatform(im.Other, im.OtherPlatform))
	if err != nil {
		return nil, err
	}
	return im, nil
}

func config(p ocispec.Platform, diffIDs []digest.Digest) ocispec.Image {
	created := epoch
	return ocispec.Image{
		Created:  &created,
		Platform: p,
		Config: ocispec.ImageConfig{
			Env: []string{"PATH=/bin"},
			Cmd: []string{"/bin/sh"},
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: diffIDs},
	}
}

func (im *Image) addManifest(cfg ocispec.Descriptor, layers []ocispec.Descriptor) (ocispec.Descriptor, error) {
	m := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfg,
		Layers:    layers,
	}
	return im.addJSON(ocispec.MediaTypeImageManifest, m, append([]ocispec.Descriptor{cfg}, layers...))
}

func (im *Image) addIndex(manifests ...ocispec.Descriptor) (ocispec.Descriptor, error) {
	idx := ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: manifests,
	}
	return im.addJSON(ocispec.MediaTypeImageIndex, idx, manifests)
}

func (im *Image) addJSON(mediaType string, v any, children []ocispec.Descriptor) (ocispec.Descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("testimage: %s: %w", mediaType, err)
	}
	return im.add(mediaType, b, children), nil
}

func (im *Image) add(mediaType string, b []byte, children []ocispec.Descriptor) ocispec.Descriptor {
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	for _, have := range im.Blobs {
		if have.Desc.Digest == d.Digest {
			return d
		}
	}
	im.Blobs = append(im.Blobs, Blob{Desc: d, Data: b, Children: children})
	return d
}

// layerTar writes files as a tar with fixed ownership and times, parents
// first, in name order.
func layerTar(files []File) ([]byte, error) {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.Name); d != "." && d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("testimage: tar %s: %w", d, err)
		}
	}
	for _, f := range sorted {
		h := &tar.Header{Name: f.Name, Mode: f.Mode, ModTime: epoch, Format: tar.FormatPAX}
		if f.Link != "" {
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("testimage: tar %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("testimage: tar %s: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("testimage: tar: %w", err)
	}
	return buf.Bytes(), nil
}
