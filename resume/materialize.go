package resume

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// DefaultRuntime is the runtime of an incarnation whose ref records none
// (a `/1` ref): host.DefaultRuntime.
const DefaultRuntime = host.DefaultRuntime

// Materializer brings a claimed run's file system back as a new container
// (docs/design.md "Materialize"), as host's roles: StoreRef (Leases),
// CheckDiff (Content), CreateContainer and DeleteContainer (Containers),
// StartTask (Tasks). It holds no claim: exclusivity is the run ledger's.
// runtime/containerd implements it against a daemon and host/memhost in
// memory; host/hosttest is the suite both pass.
//
// Errors carry github.com/containerd/errdefs classes and name the lease,
// digest or container they concern.
type Materializer interface {
	host.Content
	host.Containers
	host.Leases
	host.Tasks
}

// ResumeOptions are the options of `resume` without --check.
//
// Container is the id of the container to create (--container; default
// DefaultContainerID(run, generation)); Start starts its task (--start).
type ResumeOptions struct {
	Container string
	Start     bool
}

// DefaultContainerID is the id of the incarnation that resumes generation
// of run when --container is not given: "<run>-g<generation+1>", the
// generation its next suspend will write (docs/design.md "Materialize").
func DefaultContainerID(run string, generation uint64) string {
	return run + "-g" + strconv.FormatUint(generation+1, 10)
}

// containerIDRE is containerd's identifier grammar (pkg/identifiers).
// It is compiled on first use, not at process start.
var containerIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`) })

// ValidContainerID reports whether id is a containerd identifier:
// [A-Za-z0-9]+([._-][A-Za-z0-9]+)*, at most 76 characters.
func ValidContainerID(id string) bool { return len(id) <= 76 && containerIDRE().MatchString(id) }

// CheckMaterialize names the verdict's "materialize" member (present only
// when Resume materialized or tried to).
const CheckMaterialize = "materialize"

// ContainerEnv splits a core's containerEnv into the entries resume applies
// ("KEY=VALUE", sorted by key) and the JSON Pointers of those it does not
// (values holding "${", which only a devcontainer tool can substitute).
func ContainerEnv(core *envmanifest.Core) (env, notApplied []string) {
	keys := make([]string, 0, len(core.ContainerEnv))
	for k := range core.ContainerEnv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := core.ContainerEnv[k]
		if strings.Contains(v, "${") {
			notApplied = append(notApplied, strictjson.Pointer("/containerEnv", k))
			continue
		}
		env = append(env, k+"="+v)
	}
	return env, notApplied
}

// NotApplied lists, as JSON Pointers into the recorded core, what the
// incarnation of a `/1` ref does not get from its core (docs/design.md
// "Materialize"): every mount, remoteUser, and containerEnv values holding
// "${…}" (a `/2` ref's spec carries what the container had). Nil when
// everything applies.
func NotApplied(core *envmanifest.Core) []string {
	_, out := ContainerEnv(core)
	for i := range core.Mounts {
		out = append(out, "/mounts/"+strconv.Itoa(i))
	}
	if core.RemoteUser != "" {
		out = append(out, "/remoteUser")
	}
	return out
}

// Resume is `resume` without --check (docs/design.md "Resume decision",
// "Materialize"): the checks as Decide runs them, except that the claim
// check runs the ledger's Claim transition for this process and the
// container opt.Container (default DefaultContainerID) — after deleting
// nothing: the claim is made first — then deletes the container of the
// holder the claim replaced (a gone resumer's, or with Request.TakeOver a
// live holder's, when it is on this host and namespace), and stores the
// ref file's bytes under the run lease (m.StoreRef). Then it materializes:
// every layer blob is checked (m.CheckDiff: a mismatch or an absent blob is
// snapshot-missing, 7), the container is created (m.CreateContainer: a
// diffID the apply refuses is 7 too, nothing created) from
// the spec check 10 let through — the offered --spec, else the recorded
// spec (for a `/1` ref, the built one) — edited by PatchSpec (root.path,
// linux.cgroupsPath for the new id in the recorded format,
// process.terminal false, and for the recorded spec its namespace paths
// removed), under the recorded runtime and options (DefaultRuntime for a
// `/1` ref), with the labels run, manifest, generation, ref and fence, and
// the claim goes Live with it. With opt.Start its task is started (m.StartTask; Pid
// in the verdict; a task that fails to start is exit 1 and the incarnation
// stays live).
//
// A failure before the container exists releases the claim (the record
// returns to suspended at this generation). A claim found lost before Live
// (its Lost channel closed), or a Live the ledger refuses (the run was
// taken over or discarded meanwhile), deletes the container: claim-conflict
// (8), and the fenced-out resumer leaves nothing behind. A Live whose
// outcome is unknown (a storage error) reads the record back: live with
// this fence and this container — the incarnation stands; anything else
// deletes the container (8; 1 when the record cannot be read).
//
// The verdict carries Run, Generation, Fence (the claim's token) and, for a
// take-over, TakenOver; its Materialize member reports materialization;
// Container and NotApplied are set once the container exists and stands
// (NotApplied: the spec edits PatchSpec reports, then for a `/1` ref
// NotApplied of its core).
//
// Fault points (internal/faultpoint, test-only: in a binary built with
// -tags faultpoint and SANDBOX_RESUME_TEST_PAUSE_AT=<step> the process
// reports the step on stderr and holds there so that a test can SIGKILL
// it; no effect when unset, and none at all without the tag), in order — runtime/containerd/materialize.go adds the steps
// marked (rt):
//
//	resume-judged      the claim check passed, the Claim transition not yet run
//	resume-claimed     the record is resuming with this process as holder, no container
//	resume-diffchecked every layer blob is checked (m.CheckDiff), nothing applied
//	resume-applied     (rt) base layers and diff applied, no snapshot spec.ID
//	resume-prepared    (rt) snapshot spec.ID prepared, no container
//	resume-created     the container exists, the record still resuming
//	resume-live        the record is live with the container, no task
//	resume-task        (rt) the task is created, not started (--start)
//	resume-started     the task is started (--start), no verdict printed
func Resume(ctx context.Context, facts Facts, l ledger.Ledger, m Materializer, req Request, opt ResumeOptions) *Verdict {
	s := &state{req: req, facts: facts, ledger: l, mat: m, containerID: opt.Container}
	v := s.run(ctx)
	if !v.Accepted {
		return v
	}
	if s.cc.pendingRestore {
		return s.retryRestore(ctx, v)
	}
	faultpoint.Reach("resume-claimed")
	cc := s.cc
	spec := host.ContainerSpec{
		ID: cc.target.ID, Run: cc.run, Manifest: s.ref.Manifest,
		Generation: cc.gen, Ref: cc.ref, Fence: cc.fence,
		Base: s.ref.Base, Layers: s.ref.Layers,
		Spec: s.createSpec, Runtime: snapshot.Runtime{Name: DefaultRuntime},
	}
	if rt := s.ref.Runtime; rt != nil {
		spec.Runtime = *rt
	}
	if spec.Spec == nil {
		spec.Env, _ = ContainerEnv(&s.ref.Core)
	}
	fail := func(class Class, err error) *Verdict {
		v.Accepted, v.Class, v.ExitCode = false, class, class.Code()
		v.Materialize = &CheckResult{Name: CheckMaterialize, Result: ResultFail, Detail: err.Error()}
		return v
	}

	// On the suspend's own host its chain snapshot is used as it is: no
	// layer is hashed or extracted (chain.go).
	reuse := sameHostChain(ctx, m, s.ref, s.hostID)
	detail, class, err := materialize(ctx, m, spec, reuse)
	if err != nil {
		if ce := checkError(s.releaseAfter(ctx, err)); ce != nil {
			err = ce.Err
		}
		return fail(class, err)
	}
	faultpoint.Reach("resume-created")

	if err := s.live(ctx); err != nil {
		class := ClassInternal
		if ce := checkError(err); ce != nil {
			class, err = ce.Class, ce.Err
		}
		if derr := m.DeleteContainer(context.WithoutCancel(ctx), spec.ID); derr != nil {
			err = fmt.Errorf("%w; deleting container %s failed: %v", err, spec.ID, derr)
		} else {
			err = fmt.Errorf("%w; container %s deleted", err, spec.ID)
		}
		return fail(class, err)
	}
	faultpoint.Reach("resume-live")
	detail += fmt.Sprintf("; live with fence %d", cc.fence)
	v.Container = spec.ID
	v.NotApplied = s.notApplied()

	if s.restoresMemory() {
		return s.restore(ctx, v, spec.ID, detail)
	}
	if opt.Start {
		pid, serr := m.StartTask(ctx, spec.ID)
		if serr != nil {
			return fail(ClassInternal, fmt.Errorf("%s; container %s stays live (it can be started, suspended or taken over); start its task: %w", detail, spec.ID, serr))
		}
		v.Pid = pid
		detail += fmt.Sprintf("; task started, pid %d", pid)
		faultpoint.Reach("resume-started")
	}
	v.Materialize = &CheckResult{Name: CheckMaterialize, Result: ResultPass, Detail: detail}
	return v
}

// notApplied is the verdict's notApplied: the spec edits, then what a
// `/1` ref's core declares that its incarnation does not get.
func (s *state) notApplied() []string {
	out := append([]string(nil), s.specEdits...)
	if s.ref.IsV1() {
		out = append(out, NotApplied(&s.ref.Core)...)
	}
	return out
}

// live takes the claim Live with the created container (docs/design.md
// "Materialize"). A *CheckError of class claim-conflict means the claim was
// lost; any other error that the outcome is unknown.
func (s *state) live(ctx context.Context) error {
	cc := s.cc
	lost := func(err error) error {
		return &CheckError{Check: CheckMaterialize, Class: ClassClaimConflict, Err: err}
	}
	select {
	case <-cc.claim.Lost():
		return lost(fmt.Errorf("the claim of run %q (fence %d) was lost before it went live: another resumer took the run, or it was discarded", cc.run, cc.fence))
	default:
	}
	_, err := cc.claim.Live(ctx, cc.target)
	if err == nil {
		return nil
	}
	if class, ok := ledgerClass(err); ok {
		return &CheckError{Check: CheckMaterialize, Class: class, Err: fmt.Errorf("the claim was lost (fenced out): %w", err)}
	}
	// Unknown outcome: read the record back.
	rec, gerr := s.ledger.Get(context.WithoutCancel(ctx), cc.run)
	switch {
	case gerr != nil:
		return fmt.Errorf("run ledger: live of run %q (fence %d): %w; reading the record back: %v", cc.run, cc.fence, err, gerr)
	case rec.State == ledger.StateLive && rec.Fence == cc.fence && rec.Holder != nil && rec.Holder.Container == cc.target:
		return nil
	}
	return lost(fmt.Errorf("run ledger: live of run %q (fence %d): %w; the record read back is %s", cc.run, cc.fence, err, rec))
}

// materialize checks the layer blobs and creates the container (whose
// apply checks the diffIDs, m.CheckDiff's doc). class is the verdict class
// of err.
func materialize(ctx context.Context, m Materializer, spec host.ContainerSpec, reuse string) (detail string, class Class, err error) {
	var size, uncompressed int64
	for i, l := range spec.Layers {
		if reuse != "" {
			size, uncompressed = size+l.Size, uncompressed+l.UncompressedSize
			continue
		}
		err = m.CheckDiff(ctx, l)
		switch {
		case errors.Is(err, snapshot.ErrDiffCorrupt), errdefs.IsNotFound(err):
			return "", ClassSnapshotMissing, fmt.Errorf("layers/%d: %w", i, err)
		case err != nil:
			return "", ClassInternal, fmt.Errorf("verify layers/%d %s: %w", i, l.Digest, err)
		}
		size, uncompressed = size+l.Size, uncompressed+l.UncompressedSize
	}
	faultpoint.Reach("resume-diffchecked")
	err = m.CreateContainer(ctx, spec)
	switch {
	case errdefs.IsAlreadyExists(err):
		return "", ClassClaimConflict, fmt.Errorf("container id %s already exists (choose another container id): %w", spec.ID, err)
	case errors.Is(err, snapshot.ErrDiffCorrupt):
		return "", ClassSnapshotMissing, err
	case errdefs.IsNotFound(err):
		return "", ClassImageUnresolved, fmt.Errorf("create container %s: %w", spec.ID, err)
	case err != nil:
		return "", ClassInternal, fmt.Errorf("create container %s: %w", spec.ID, err)
	}
	from := "its runtime spec (" + digest.FromBytes(spec.Spec).String() + ")"
	if spec.Spec == nil {
		from = "the image config and containerEnv"
	}
	rt := spec.Runtime.Name
	if o := spec.Runtime.Options; o != nil {
		rt += " with options " + o.TypeURL
	}
	if reuse != "" {
		return fmt.Sprintf("%s present (%d bytes, %d bytes uncompressed); %s; container %s created from %s under %s",
			layersWord(spec.Layers), size, uncompressed, reuse, spec.ID, from, rt), "", nil
	}
	return fmt.Sprintf("%s verified (%d bytes, %d bytes uncompressed); base %s + %s applied; container %s created from %s under %s",
		layersWord(spec.Layers), size, uncompressed, spec.Base.ManifestDigest, layersWord(spec.Layers), spec.ID, from, rt), "", nil
}

// layersWord names a ref's layers in a detail: the one layer's digest, or
// how many there are.
func layersWord(ls []snapshot.Layer) string {
	if len(ls) == 1 {
		return fmt.Sprintf("layer %s (diffID %s)", ls[0].Digest, ls[0].DiffID)
	}
	return fmt.Sprintf("%d layers", len(ls))
}
