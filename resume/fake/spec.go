package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ReadSpec reads the blob d from the content store with snapshot.ReadBlob
// (size and digest checked as it reads): another size or digest wraps
// snapshot.ErrBlobCorrupt, an absent blob errdefs.ErrNotFound.
func (f *Facts) ReadSpec(ctx context.Context, d snapshot.Descriptor) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := f.blob(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return snapshot.ReadBlob(bytes.NewReader(b), d)
}

// fakeSpec is the runtime spec BuildSpec writes: the members of
// containerd's default spec that the image config decides, and the ones
// PatchSpec edits.
type fakeSpec struct {
	OCIVersion string      `json:"ociVersion"`
	Process    fakeProcess `json:"process"`
	Root       struct {
		Path string `json:"path"`
	} `json:"root"`
	Hostname string `json:"hostname"`
	Linux    struct {
		CgroupsPath string              `json:"cgroupsPath"`
		Namespaces  []map[string]string `json:"namespaces"`
	} `json:"linux"`
}

type fakeProcess struct {
	Terminal bool `json:"terminal"`
	User     struct {
		UID uint32 `json:"uid"`
		GID uint32 `json:"gid"`
	} `json:"user"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Cwd  string   `json:"cwd"`
}

// BuildSpec builds the spec of a `/1` ref's incarnation as
// runtime/containerd does, in memory: ociVersion 1.2.1, the image
// config's Entrypoint + Cmd as process.args, its Env then env (replacing
// by key, oci.WithEnv's rule) as process.env, its WorkingDir as
// process.cwd ("/" when empty), uid and gid 0 (the fake looks up no users:
// layers are not read), root.path resume.BundleRootfs, linux.cgroupsPath
// "/<namespace>/<id>" and private pid, ipc, uts, mount and network
// namespaces. Missing content wraps errdefs.ErrNotFound.
func (f *Facts) BuildSpec(ctx context.Context, id string, base snapshot.Base, layers []snapshot.Layer, env []string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, cfg, err := f.manifestAndConfig(base.ManifestDigest)
	if err != nil {
		return nil, fmt.Errorf("build the spec of container %s: %w", id, err)
	}
	var s fakeSpec
	s.OCIVersion = "1.2.1"
	s.Process.Args = append(append([]string{}, cfg.Config.Entrypoint...), cfg.Config.Cmd...)
	s.Process.Env = mergeEnv(cfg.Config.Env, env)
	s.Process.Cwd = cfg.Config.WorkingDir
	if s.Process.Cwd == "" {
		s.Process.Cwd = "/"
	}
	s.Root.Path = resume.BundleRootfs
	s.Linux.CgroupsPath = "/" + f.Namespace() + "/" + id
	for _, t := range []string{"pid", "ipc", "uts", "mount", "network"} {
		s.Linux.Namespaces = append(s.Linux.Namespaces, map[string]string{"type": t})
	}
	return json.Marshal(s)
}

// HostNamespace answers with the rule SetHostNamespace set; by default
// true exactly for the paths under /proc/1/ns/ (the fake host's pid 1).
func (f *Facts) HostNamespace(nsType, path string) bool {
	f.state.mu.Lock()
	rule := f.state.hostNamespace
	f.state.mu.Unlock()
	if rule != nil {
		return rule(nsType, path)
	}
	return strings.HasPrefix(path, "/proc/1/ns/")
}

// SetHostNamespace replaces the rule HostNamespace applies; nil restores
// the default.
func (f *Facts) SetHostNamespace(rule func(nsType, path string) bool) {
	f.state.mu.Lock()
	defer f.state.mu.Unlock()
	f.state.hostNamespace = rule
}
