package fake

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Container is a container the fake Materializer created: its spec, the
// chain id of its snapshot's parent (identity.ChainID of the base diffIDs
// plus the diff's), its environment (image config Env, then spec.Env
// overriding by key), its labels, and its task pid once started (0 before).
type Container struct {
	Spec    resume.ContainerSpec
	ChainID digest.Digest
	Env     []string
	Labels  map[string]string
	Pid     uint32
}

// Materializer is an in-memory resume.Materializer over a Facts content
// store and a Claims store: claims are created atomically under the
// Claims lock, containers live in memory, and a created container marks
// the claim naming it as ContainerExists (so Claims.ClaimHolder reports it
// live, as the daemon would). A claim it creates records ProcessAlive from
// resume.ProcessAlive of its holder at creation (the real /proc rule);
// tests may overwrite a claim with Claims.SetClaim. It is safe for
// concurrent use.
type Materializer struct {
	facts  *Facts
	claims *Claims

	mu         sync.Mutex
	containers map[string]*Container
	nextPID    uint32
}

// NewMaterializer returns a Materializer reading blobs from facts and
// keeping claims in claims.
func NewMaterializer(facts *Facts, claims *Claims) *Materializer {
	return &Materializer{facts: facts, claims: claims, containers: map[string]*Container{}, nextPID: 4000}
}

// CreateClaim records run's claim with holder's labels, or fails with
// errdefs.ErrAlreadyExists when one exists.
func (m *Materializer) CreateClaim(ctx context.Context, run string, holder resume.Claim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.claims.mu.Lock()
	defer m.claims.mu.Unlock()
	return m.createLocked(run, holder)
}

func (m *Materializer) createLocked(run string, holder resume.Claim) error {
	if m.claims.claims == nil {
		m.claims.claims = map[string]resume.Claim{}
	}
	id := snapshot.ClaimLease(run)
	if _, ok := m.claims.claims[run]; ok {
		return fmt.Errorf("claim lease %s: %w", id, errdefs.ErrAlreadyExists)
	}
	c := *resume.ClaimFromLabels(id, resume.ClaimLabels(holder))
	c.ProcessAlive = resume.ProcessAlive(c.PID, c.StartTime, c.BootID)
	m.mu.Lock()
	_, c.ContainerExists = m.containers[c.Container]
	m.mu.Unlock()
	m.claims.claims[run] = c
	return nil
}

// TakeOverClaim replaces run's claim when it still names stale's holder;
// otherwise errdefs.ErrAlreadyExists. An absent claim is created.
func (m *Materializer) TakeOverClaim(ctx context.Context, run string, stale *resume.Claim, holder resume.Claim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.claims.mu.Lock()
	defer m.claims.mu.Unlock()
	if cur, ok := m.claims.claims[run]; ok {
		if !resume.SameHolder(&cur, stale) {
			return fmt.Errorf("claim lease %s now names another holder (%s): %w", cur.Lease, &cur, errdefs.ErrAlreadyExists)
		}
		delete(m.claims.claims, run)
	}
	return m.createLocked(run, holder)
}

// ReleaseClaim deletes run's claim when it names holder's container, pid
// and start time.
func (m *Materializer) ReleaseClaim(ctx context.Context, run string, holder resume.Claim) error {
	m.claims.mu.Lock()
	defer m.claims.mu.Unlock()
	if cur, ok := m.claims.claims[run]; ok && cur.Container == holder.Container && cur.PID == holder.PID && cur.StartTime == holder.StartTime {
		delete(m.claims.claims, run)
	}
	return nil
}

// CheckDiff checks a layer blob in the Facts content store with
// snapshot.VerifyDiff, the layer verifier runtime/containerd calls too:
// size, digest, and the decompression (by magic number: zstd, gzip or
// none) bounded by d.UncompressedSize with sha256 d.DiffID. A mismatch
// wraps snapshot.ErrDiffCorrupt; an absent blob errdefs.ErrNotFound.
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

// ContainerExists reports whether the fake created container id.
func (m *Materializer) ContainerExists(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.containers[id]
	return ok, nil
}

// CreateContainer records the container after checking what the daemon
// would need: the claim lease of spec.Run exists (errdefs.ErrNotFound
// otherwise, as a missing lease is), the base manifest, config and layers
// and every layer blob of spec.Layers are stored (errdefs.ErrNotFound), the manifest's layer
// count equals the recorded diffIDs. It does not extract layers, so a
// wrong diffID is only caught by CheckDiff.
func (m *Materializer) CreateContainer(ctx context.Context, spec resume.ContainerSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c, _ := m.claims.ClaimHolder(ctx, spec.Run); c == nil {
		return fmt.Errorf("lease %s: %w", snapshot.ClaimLease(spec.Run), errdefs.ErrNotFound)
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
	mf, cfg, err := m.facts.manifestAndConfig(spec.Base.ManifestDigest)
	if err != nil {
		return err
	}
	if len(mf.Layers) != len(spec.Base.DiffIDs) {
		return fmt.Errorf("base manifest %s has %d layers, the ref records %d diffIDs: %w", spec.Base.ManifestDigest, len(mf.Layers), len(spec.Base.DiffIDs), errdefs.ErrInvalidArgument)
	}
	c := &Container{
		Spec: spec, ChainID: identity.ChainID(chain), Env: mergeEnv(cfg.Config.Env, spec.Env),
		Labels: map[string]string{snapshot.LabelRun: spec.Run, snapshot.LabelManifest: spec.Manifest},
	}
	m.mu.Lock()
	if _, ok := m.containers[spec.ID]; ok {
		m.mu.Unlock()
		return fmt.Errorf("container %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	}
	m.containers[spec.ID] = c
	m.mu.Unlock()
	m.claims.mu.Lock()
	for run, cl := range m.claims.claims {
		if cl.Container == spec.ID {
			cl.ContainerExists = true
			m.claims.claims[run] = cl
		}
	}
	m.claims.mu.Unlock()
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
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.containers[id]
	if !ok {
		return 0, fmt.Errorf("container %s: %w", id, errdefs.ErrNotFound)
	}
	if c.Pid != 0 {
		return 0, fmt.Errorf("container %s: task: %w", id, errdefs.ErrAlreadyExists)
	}
	m.nextPID++
	c.Pid = m.nextPID
	return c.Pid, nil
}

// Container returns a copy of container id, or false.
func (m *Materializer) Container(id string) (Container, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.containers[id]
	if !ok {
		return Container{}, false
	}
	out := *c
	out.Env = append([]string{}, c.Env...)
	return out, true
}

// Containers returns the ids of the containers created, sorted.
func (m *Materializer) Containers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.containers))
	for id := range m.containers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// DeleteContainer removes container id (a test playing the operator);
// claims naming it no longer report ContainerExists.
func (m *Materializer) DeleteContainer(id string) {
	m.mu.Lock()
	delete(m.containers, id)
	m.mu.Unlock()
	m.claims.mu.Lock()
	for run, cl := range m.claims.claims {
		if cl.Container == id {
			cl.ContainerExists = false
			m.claims.claims[run] = cl
		}
	}
	m.claims.mu.Unlock()
}

var _ resume.Materializer = (*Materializer)(nil)
