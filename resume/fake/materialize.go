package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Container is a container of the fake host: for one the fake
// Materializer created, what it was created with (Spec: the runtime spec
// bytes, the runtime and its options, the layers), the chain id of its
// snapshot's parent (identity.ChainID of the base diffIDs plus the
// layers'), the process environment of its runtime spec
// (process.env); and for every container its labels, its task pid once
// started (0 before) and whether that task stopped.
type Container struct {
	Spec    resume.ContainerSpec
	ChainID digest.Digest
	Env     []string
	Labels  map[string]string
	Pid     uint32
	Stopped bool
}

// Materializer is an in-memory resume.Materializer over a Facts: it reads
// blobs from the Facts content store and keeps its containers in the
// Facts, so the claim check sees them. It is safe for concurrent use.
type Materializer struct {
	facts *Facts

	mu      sync.Mutex
	nextPID uint32
	deleted []string
}

// NewMaterializer returns a Materializer over facts.
func NewMaterializer(facts *Facts) *Materializer {
	return &Materializer{facts: facts, nextPID: 4000}
}

// StoreRef records ref's bytes under run's run lease (Facts.Refs).
func (m *Materializer) StoreRef(ctx context.Context, run string, ref []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st := m.facts.state
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.refs[run] == nil {
		st.refs[run] = map[string][]byte{}
	}
	st.refs[run][digest.FromBytes(ref).String()] = append([]byte(nil), ref...)
	return nil
}

// CheckDiff checks a layer blob in the Facts content store with
// snapshot.VerifyDiff, the full layer verifier: size, digest, and the
// decompression (by magic number: zstd, gzip or none) bounded by
// d.UncompressedSize with sha256 d.DiffID. It checks the diffID here
// because CreateContainer extracts nothing (runtime/containerd leaves it
// to the daemon's apply: resume.Materializer). A mismatch wraps
// snapshot.ErrDiffCorrupt; an absent blob errdefs.ErrNotFound.
func (m *Materializer) CheckDiff(ctx context.Context, d snapshot.Layer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := m.facts.blob(d.Digest)
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	return snapshot.VerifyDiff(bytes.NewReader(b), d)
}

// CreateContainer records the container after checking what the daemon
// would need: the base manifest, config and layers and every layer blob of
// spec.Layers are stored (errdefs.ErrNotFound), the manifest's layer count
// equals the recorded diffIDs, spec.Spec is a JSON object whose
// process.env, if any, is an array of strings and spec.Runtime has a name
// (errdefs.ErrInvalidArgument). A nil spec.Spec is built with
// Facts.BuildSpec from spec.Env and recorded in the Container's
// Spec.Spec. It does not extract layers, so a wrong diffID is only caught
// by CheckDiff.
func (m *Materializer) CreateContainer(ctx context.Context, spec resume.ContainerSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	missing, err := m.facts.MissingContent(ctx, spec.Base.ManifestDigest)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("base %s: blob %s: %w", spec.Base.ManifestDigest, missing[0], errdefs.ErrNotFound)
	}
	chain := append([]digest.Digest{}, spec.Base.DiffIDs...)
	for i, l := range spec.Layers {
		if _, err := m.facts.blob(l.Digest); err != nil {
			return fmt.Errorf("layers/%d: %w", i, err)
		}
		chain = append(chain, l.DiffID)
	}
	mf, _, err := m.facts.manifestAndConfig(spec.Base.ManifestDigest)
	if err != nil {
		return err
	}
	if len(mf.Layers) != len(spec.Base.DiffIDs) {
		return fmt.Errorf("base manifest %s has %d layers, the ref records %d diffIDs: %w", spec.Base.ManifestDigest, len(mf.Layers), len(spec.Base.DiffIDs), errdefs.ErrInvalidArgument)
	}
	if spec.Spec == nil {
		if spec.Spec, err = m.facts.BuildSpec(ctx, spec.ID, spec.Base, spec.Layers, spec.Env); err != nil {
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
	spec.Spec = bytes.Clone(spec.Spec)
	c := &Container{Spec: spec, ChainID: identity.ChainID(chain), Labels: spec.Labels()}
	if rs.Process != nil {
		c.Env = rs.Process.Env
	}
	st := m.facts.state
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.containers[spec.ID]; ok {
		return fmt.Errorf("container %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	}
	st.containers[spec.ID] = c
	return nil
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

// StartTask gives the container a pid (4001, 4002, …); errdefs.ErrNotFound
// for an unknown container, errdefs.ErrAlreadyExists when it has a task.
func (m *Materializer) StartTask(ctx context.Context, id string) (uint32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	st := m.facts.state
	st.mu.Lock()
	defer st.mu.Unlock()
	c, ok := st.containers[id]
	if !ok {
		return 0, fmt.Errorf("container %s: %w", id, errdefs.ErrNotFound)
	}
	if c.Pid != 0 && !c.Stopped {
		return 0, fmt.Errorf("container %s: task: %w", id, errdefs.ErrAlreadyExists)
	}
	m.mu.Lock()
	m.nextPID++
	c.Pid, c.Stopped = m.nextPID, false
	m.mu.Unlock()
	return c.Pid, nil
}

// DeleteContainer removes container id (and its task); an absent one is no
// error. Deleted lists what it removed.
func (m *Materializer) DeleteContainer(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st := m.facts.state
	st.mu.Lock()
	_, ok := st.containers[id]
	delete(st.containers, id)
	st.mu.Unlock()
	if ok {
		m.mu.Lock()
		m.deleted = append(m.deleted, id)
		m.mu.Unlock()
	}
	return nil
}

// Deleted returns the ids DeleteContainer removed, in order.
func (m *Materializer) Deleted() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.deleted...)
}

// Container returns a copy of container id, or false.
func (m *Materializer) Container(id string) (Container, bool) {
	st := m.facts.state
	st.mu.Lock()
	defer st.mu.Unlock()
	c, ok := st.containers[id]
	if !ok {
		return Container{}, false
	}
	out := *c
	out.Env = append([]string{}, c.Env...)
	out.Labels = maps.Clone(c.Labels)
	return out, true
}

// Containers returns the ids of the containers of the fake host, sorted.
func (m *Materializer) Containers() []string {
	st := m.facts.state
	st.mu.Lock()
	defer st.mu.Unlock()
	ids := make([]string, 0, len(st.containers))
	for id := range st.containers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

var _ resume.Materializer = (*Materializer)(nil)
