package memhost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Container is a container AddContainer puts on the host (a runtime's
// container): its files (path → content, above the image, which has none:
// what the container sees), image, labels, task state, creation time, OCI
// runtime spec bytes and runtime. AddContainer fills what is left empty:
// Created a fixed time (2026-11-30T16:00:00Z), Spec DefaultSpec(ID),
// Runtime io.containerd.runc.v2 without options.
//
// A container created from the image alone has no Layers: its snapshot's
// parent is the image's chain, and its diff holds every file. An
// incarnation's snapshot was built from the image plus the layers of the
// generation it resumed: Layers are their diffIDs (its parent is
// identity.ChainID of the image's diffIDs followed by them) and Lower the
// files they give (Tree); its diff holds what differs from Lower,
// deletions as whiteouts. CreateContainer makes such incarnations itself.
type Container struct {
	ID      string
	Image   string
	Files   map[string][]byte
	Labels  map[string]string
	Task    snapshot.TaskState
	Created time.Time
	Spec    []byte
	Runtime snapshot.Runtime
	Layers  []digest.Digest
	Lower   map[string][]byte
	// ImageFiles are files of the root file system beneath Files that the
	// image gives (such as etc/passwd): ContainerFile reads them where
	// Files has no such path; they are no part of the container's diff.
	ImageFiles map[string][]byte
}

// Incarnation is what Incarnation reports about a container: for one
// CreateContainer made, what it was created with (Spec: the runtime spec
// bytes, the runtime and its options, the layers), the chain id of its
// snapshot's parent (identity.ChainID of the base diffIDs plus the
// layers'), the process environment of its runtime spec (process.env);
// and for every container its labels, its task pid once started (0
// before) and whether that task stopped.
type Incarnation struct {
	Spec    host.ContainerSpec
	ChainID digest.Digest
	Env     []string
	Labels  map[string]string
	Pid     uint32
	Stopped bool
}

// container is a container of the host: a Container, and for an
// incarnation what CreateContainer made it with.
type container struct {
	Container
	spec    host.ContainerSpec
	chain   []digest.Digest // the parent chain's diffIDs, when known
	env     []string
	pid     uint32
	created bool   // by CreateContainer
	parent  string // CommitChain: the chain snapshot its snapshot is now on
}

// running reports whether the container has a task that is not stopped.
func (c *container) running() bool {
	return c.Task != snapshot.TaskNone && c.Task != snapshot.TaskStopped
}

// DefaultSpec returns the runtime spec AddContainer gives a container that
// has none: a small OCI runtime spec whose hostname is id.
func DefaultSpec(id string) []byte {
	return fmt.Appendf(nil, `{"ociVersion":"1.2.0","process":{"args":["/bin/sh"],"cwd":"/","env":["PATH=/usr/bin:/bin"],"user":{"uid":0,"gid":0}},"root":{"path":"rootfs"},"hostname":%q,"mounts":[{"destination":"/proc","type":"proc","source":"proc"}],"linux":{"namespaces":[{"type":"pid"},{"type":"mount"}]}}`, id)
}

// AddContainer stores a container; its snapshot's parent is the chain of
// its image plus its Layers.
func (h *Machine) AddContainer(c Container) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cc := c
	cc.Files = maps.Clone(c.Files)
	cc.Labels = maps.Clone(c.Labels)
	cc.Layers = slices.Clone(c.Layers)
	cc.Lower = maps.Clone(c.Lower)
	cc.ImageFiles = maps.Clone(c.ImageFiles)
	if cc.Created.IsZero() {
		cc.Created = fixedCreated
	}
	if cc.Spec == nil {
		cc.Spec = DefaultSpec(c.ID)
	}
	cc.Spec = slices.Clone(cc.Spec)
	if cc.Runtime.Name == "" {
		cc.Runtime.Name = host.DefaultRuntime
	}
	h.containers[c.ID] = &container{Container: cc, spec: host.ContainerSpec{ID: c.ID}}
}

// PutContainer adds (or replaces) a container as a test plays another
// process or the runtime: id, labels, and a running task's pid (0: no
// task).
func (h *Machine) PutContainer(id string, labels map[string]string, pid uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := &container{Container: Container{ID: id, Labels: maps.Clone(labels), Created: fixedCreated,
		Spec: DefaultSpec(id), Runtime: snapshot.Runtime{Name: host.DefaultRuntime}}, spec: host.ContainerSpec{ID: id}, pid: pid}
	if pid != 0 {
		c.Task = snapshot.TaskRunning
	}
	h.containers[id] = c
}

// Incarnation returns what the host knows of container id, or false.
func (h *Machine) Incarnation(id string) (Incarnation, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.containers[id]
	if !ok {
		return Incarnation{}, false
	}
	out := Incarnation{Spec: c.spec, Env: slices.Clone(c.env), Labels: maps.Clone(c.Labels), Pid: c.pid,
		Stopped: c.Task == snapshot.TaskStopped}
	if c.created {
		out.ChainID = identity.ChainID(c.chain)
	}
	return out, true
}

// Containers returns the ids of the containers of the host, sorted.
func (h *Machine) Containers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.containers))
}

// Deleted returns the ids DeleteContainer removed, in order.
func (h *Machine) Deleted() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.deleted)
}

// Files returns a copy of the files of container id; an absent container
// is an error wrapping errdefs.ErrNotFound.
func (h *Machine) Files(id string) (map[string][]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, err := h.container(id)
	if err != nil {
		return nil, err
	}
	return maps.Clone(c.Files), nil
}

// EditFiles lets edit change the files of container id (the workload
// writing, changing and deleting files between suspends).
func (h *Machine) EditFiles(id string, edit func(files map[string][]byte)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, err := h.container(id)
	if err != nil {
		return err
	}
	if c.Files == nil {
		c.Files = map[string][]byte{}
	}
	edit(c.Files)
	return nil
}

// SnapshotKind returns "active" (the host never commits a container's
// snapshot), or an error wrapping errdefs.ErrNotFound once the container
// was deleted.
func (h *Machine) SnapshotKind(_ context.Context, c snapshot.Container) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.container(c.ID); err != nil {
		return "", fmt.Errorf("snapshot %s: %w", c.SnapshotKey, err)
	}
	return c.SnapshotKind, nil
}

func (h *Machine) container(id string) (*container, error) {
	c, ok := h.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %q: %w", id, errdefs.ErrNotFound)
	}
	return c, nil
}

// Container implements host.Containers.
func (h *Machine) Container(ctx context.Context, id string) (snapshot.Container, error) {
	if err := h.enter(ctx, OpContainer); err != nil {
		return snapshot.Container{}, err
	}
	defer h.mu.Unlock()
	c, err := h.container(id)
	if err != nil {
		return snapshot.Container{}, err
	}
	chain := c.chain
	if !c.created {
		chain = append(h.imageDiffIDs(c.Image), c.Layers...)
	}
	parent := ""
	if len(chain) > 0 {
		parent = identity.ChainID(chain).String()
	}
	if c.parent != "" {
		parent = c.parent
	}
	rt := c.Runtime
	if rt.Options != nil {
		o := *rt.Options
		o.Value = slices.Clone(o.Value)
		rt.Options = &o
	}
	return snapshot.Container{
		ID: c.ID, Namespace: h.namespace, Created: c.Created, Image: c.Image, Snapshotter: h.host.Snapshotter, SnapshotKey: c.ID,
		SnapshotKind: "active", ParentChainID: parent, Labels: maps.Clone(c.Labels), Task: c.Task,
		Spec: slices.Clone(c.Spec), Runtime: rt,
	}, nil
}

// ContainerState implements host.Containers.
func (h *Machine) ContainerState(ctx context.Context, id string) (*host.ContainerState, error) {
	if err := h.enter(ctx, OpContainerState); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	c, ok := h.containers[id]
	if !ok {
		return nil, nil
	}
	return &host.ContainerState{ID: id, Labels: maps.Clone(c.Labels), Running: c.running()}, nil
}

// RunContainers implements host.Containers.
func (h *Machine) RunContainers(ctx context.Context, run string) ([]host.ContainerState, error) {
	if err := h.enter(ctx, OpRunContainers); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	var out []host.ContainerState
	for _, id := range slices.Sorted(maps.Keys(h.containers)) {
		c := h.containers[id]
		if c.Labels[snapshot.LabelRun] == run {
			out = append(out, host.ContainerState{ID: id, Labels: maps.Clone(c.Labels), Running: c.running()})
		}
	}
	return out, nil
}

// SetContainerLabels implements host.Containers.
func (h *Machine) SetContainerLabels(ctx context.Context, id string, labels map[string]string) error {
	if err := h.enter(ctx, OpSetLabels); err != nil {
		return err
	}
	defer h.mu.Unlock()
	c, err := h.container(id)
	if err != nil {
		return err
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	for k, v := range labels {
		if v == "" {
			delete(c.Labels, k)
		} else {
			c.Labels[k] = v
		}
	}
	return nil
}

// CreateContainer implements host.Containers after checking what the
// daemon would need: the base manifest, config and layers and every layer
// blob of spec.Layers are stored (errdefs.ErrNotFound), the manifest's
// layer count equals the recorded diffIDs, spec.Spec is a JSON object
// whose process.env, if any, is an array of strings and spec.Runtime has a
// name (errdefs.ErrInvalidArgument). A nil spec.Spec is built with
// BuildSpec from spec.Env. It does not extract layers the daemon's way, so
// a wrong diffID is only caught by CheckDiff; the incarnation's files are
// those the layers give (Tree) when they are layers as CreateDiff writes
// them, else none.
func (h *Machine) CreateContainer(ctx context.Context, spec host.ContainerSpec) error {
	if err := h.enter(ctx, OpCreateContainer); err != nil {
		return err
	}
	defer h.mu.Unlock()
	missing, err := h.missing(spec.Base.ManifestDigest)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("base %s: blob %s: %w", spec.Base.ManifestDigest, missing[0], errdefs.ErrNotFound)
	}
	chain := slices.Clone(spec.Base.DiffIDs)
	var layers []digest.Digest
	for i, l := range spec.Layers {
		if _, err := h.blob(l.Digest); err != nil {
			return fmt.Errorf("layers/%d: %w", i, err)
		}
		chain = append(chain, l.DiffID)
		layers = append(layers, l.DiffID)
	}
	mf, _, err := h.manifestAndConfig(spec.Base.ManifestDigest)
	if err != nil {
		return err
	}
	if len(mf.Layers) != len(spec.Base.DiffIDs) {
		return fmt.Errorf("base manifest %s has %d layers, the ref records %d diffIDs: %w", spec.Base.ManifestDigest, len(mf.Layers), len(spec.Base.DiffIDs), errdefs.ErrInvalidArgument)
	}
	if spec.Spec == nil {
		if spec.Spec, err = h.buildSpec(spec.ID, spec.Base, spec.Env); err != nil {
			return err
		}
	}
	var rs struct {
		Process *struct {
			Env []string `json:"env"`
		} `json:"process"`
	}
	if err := json.Unmarshal(spec.Spec, &rs); err != nil {
		return fmt.Errorf("container %s: runtime spec: %w: %w", spec.ID, errdefs.ErrInvalidArgument, err)
	}
	if spec.Runtime.Name == "" {
		return fmt.Errorf("container %s: no runtime name: %w", spec.ID, errdefs.ErrInvalidArgument)
	}
	if _, ok := h.containers[spec.ID]; ok {
		return fmt.Errorf("container %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	}
	spec.Spec = bytes.Clone(spec.Spec)
	files, err := h.tree(spec.Layers)
	if err != nil {
		files = nil
	}
	c := &container{
		Container: Container{ID: spec.ID, Image: spec.Base.Name, Files: maps.Clone(files), Labels: spec.Labels(),
			Created: fixedCreated, Spec: spec.Spec, Runtime: spec.Runtime, Layers: layers, Lower: files},
		spec: spec, chain: chain, created: true,
	}
	if rs.Process != nil {
		c.env = rs.Process.Env
	}
	h.containers[spec.ID] = c
	return nil
}

// DeleteContainer implements host.Containers: the container, its task
// and its files are gone; Deleted lists what it removed.
func (h *Machine) DeleteContainer(ctx context.Context, id string) error {
	if err := h.enter(ctx, OpDeleteContainer); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if _, ok := h.containers[id]; ok {
		delete(h.containers, id)
		h.deleted = append(h.deleted, id)
	}
	return nil
}

// memSpec is the runtime spec BuildSpec writes: the members of
// containerd's default spec that the image config decides, and the ones
// resume's PatchSpec edits.
type memSpec struct {
	OCIVersion string     `json:"ociVersion"`
	Process    memProcess `json:"process"`
	Root       struct {
		Path string `json:"path"`
	} `json:"root"`
	Hostname string `json:"hostname"`
	Linux    struct {
		CgroupsPath string              `json:"cgroupsPath"`
		Namespaces  []map[string]string `json:"namespaces"`
	} `json:"linux"`
}

type memProcess struct {
	Terminal bool `json:"terminal"`
	User     struct {
		UID uint32 `json:"uid"`
		GID uint32 `json:"gid"`
	} `json:"user"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Cwd  string   `json:"cwd"`
}

// BuildSpec implements host.Containers in memory: ociVersion 1.2.1, the
// image config's Entrypoint + Cmd as process.args, its Env then env
// (replacing by key, oci.WithEnv's rule) as process.env, its WorkingDir as
// process.cwd ("/" when empty), uid and gid 0 (no users are looked up:
// layers are not read), root.path host.BundleRootfs, linux.cgroupsPath
// "/<namespace>/<id>" and private pid, ipc, uts, mount and network
// namespaces. Missing content wraps errdefs.ErrNotFound.
func (h *Machine) BuildSpec(ctx context.Context, id string, base snapshot.Base, _ []snapshot.Layer, env []string) ([]byte, error) {
	if err := h.enter(ctx, OpBuildSpec); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	return h.buildSpec(id, base, env)
}

func (h *Machine) buildSpec(id string, base snapshot.Base, env []string) ([]byte, error) {
	_, cfg, err := h.manifestAndConfig(base.ManifestDigest)
	if err != nil {
		return nil, fmt.Errorf("build the spec of container %s: %w", id, err)
	}
	var s memSpec
	s.OCIVersion = "1.2.1"
	s.Process.Args = append(append([]string{}, cfg.Config.Entrypoint...), cfg.Config.Cmd...)
	s.Process.Env = mergeEnv(cfg.Config.Env, env)
	s.Process.Cwd = cfg.Config.WorkingDir
	if s.Process.Cwd == "" {
		s.Process.Cwd = "/"
	}
	s.Root.Path = host.BundleRootfs
	s.Linux.CgroupsPath = "/" + h.namespace + "/" + id
	for _, t := range []string{"pid", "ipc", "uts", "mount", "network"} {
		s.Linux.Namespaces = append(s.Linux.Namespaces, map[string]string{"type": t})
	}
	return json.Marshal(s)
}

// mergeEnv is oci.WithEnv's rule: entries of add replace those of base
// with the same key, others are appended.
func mergeEnv(base, add []string) []string {
	out := append([]string{}, base...)
	for _, kv := range add {
		k, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, have := range out {
			if hk, _, _ := strings.Cut(have, "="); hk == k {
				out[i], replaced = kv, true
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}

// ContainerFile implements host.Containers: the file name of container
// c.ID's Files, else of its ImageFiles (keys with or without a leading
// "/"), at most limit bytes.
func (h *Machine) ContainerFile(ctx context.Context, c snapshot.Container, name string, limit int64) ([]byte, error) {
	if err := h.enter(ctx, OpContainerFile); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	ctr, err := h.container(c.ID)
	if err != nil {
		return nil, err
	}
	rel := strings.TrimPrefix(path.Clean("/"+name), "/")
	for _, files := range []map[string][]byte{ctr.Files, ctr.ImageFiles} {
		for _, k := range []string{rel, "/" + rel} {
			if b, ok := files[k]; ok {
				if int64(len(b)) > limit {
					return nil, fmt.Errorf("container %s: file %s is larger than %d bytes", c.ID, name, limit)
				}
				return bytes.Clone(b), nil
			}
		}
	}
	return nil, fmt.Errorf("container %s: file %s: %w", c.ID, name, errdefs.ErrNotFound)
}
