package resume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/faultpoint"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ContainerSpec is what Materializer.CreateContainer makes (DESIGN
// "Materialize, claim, run lifecycle").
//
// ID is the container id and its snapshot key; Run and Manifest become the
// container labels snapshot.LabelRun and snapshot.LabelManifest; Base is the
// verified ref's base image (its ManifestDigest names the layers applied,
// DiffIDs their uncompressed digests, ConfigDigest the image config the
// spec starts from); Layers are the verified ref's layers, applied on top
// in order (oldest first; a generation-1 ref has one); Env
// holds "KEY=VALUE" entries added to the image config's environment (the
// containerEnv entries whose values hold no "${"), sorted by key.
type ContainerSpec struct {
	ID       string
	Run      string
	Manifest string
	Base     snapshot.Base
	Layers   []snapshot.Layer
	Env      []string
}

// Materializer claims a run and brings its file system back as a new
// container (DESIGN "Materialize, claim, run lifecycle"). runtime/containerd
// implements it against a daemon (claim = the lease
// "sandbox-resume.claim/<run>", whose creation is atomic) and resume/fake in
// memory; resume/materializertest is the conformance suite for both.
//
// Errors carry github.com/containerd/errdefs classes and name the lease,
// digest or container they concern.
type Materializer interface {
	// CreateClaim creates run's claim lease atomically with holder's labels
	// (the LabelClaim* constants; holder.Lease is ignored). It fails with
	// errdefs.ErrAlreadyExists when the lease exists, whoever holds it.
	CreateClaim(ctx context.Context, run string, holder Claim) error

	// TakeOverClaim replaces run's claim, which the caller found stale
	// (stale.Live() false), by holder's: it deletes the lease only while its
	// labels still name stale's holder, synchronously (what the stale holder
	// had made under it is collected), then creates it as CreateClaim does.
	// Two callers taking over the same stale claim: at most one succeeds,
	// the other gets errdefs.ErrAlreadyExists (a lost race), as does a
	// caller that finds the lease now names another holder.
	TakeOverClaim(ctx context.Context, run string, stale *Claim, holder Claim) error

	// ReleaseClaim deletes run's claim lease synchronously if its labels
	// name holder's container, pid and start time; otherwise (or when it is
	// absent) it does nothing and returns nil.
	ReleaseClaim(ctx context.Context, run string, holder Claim) error

	// CheckDiff reads a stored layer blob of the ref with snapshot.VerifyDiff,
	// the one layer verifier (size, digest, and a decompression bounded by
	// d.UncompressedSize with sha256 d.DiffID). A mismatch wraps
	// snapshot.ErrDiffCorrupt and names both digests; an absent blob wraps
	// errdefs.ErrNotFound.
	CheckDiff(ctx context.Context, d snapshot.Layer) error

	// ContainerExists reports whether a container with this id exists (in
	// this namespace).
	ContainerExists(ctx context.Context, id string) (bool, error)

	// CreateContainer applies the base layers and spec.Layers (containerd:
	// rootfs.ApplyLayers under run's claim lease), prepares the snapshot
	// spec.ID on the host's default snapshotter and creates the container
	// spec.ID (spec from the base image config plus spec.Env; runtime
	// io.containerd.runc.v2; labels run and manifest). On error no
	// container spec.ID was created by this call. An existing container id
	// is errdefs.ErrAlreadyExists; a failed diffID check while applying
	// wraps snapshot.ErrDiffCorrupt; missing base content
	// errdefs.ErrNotFound.
	CreateContainer(ctx context.Context, spec ContainerSpec) error

	// StartTask creates and starts the container's task detached (its
	// output discarded) and returns the task's pid. A container that does
	// not exist is errdefs.ErrNotFound.
	StartTask(ctx context.Context, id string) (uint32, error)
}

// ResumeOptions are the options of `resume` without --check.
//
// Container is the id of the container to create (--container; default
// DefaultContainerID(run)); Start starts its task (--start).
type ResumeOptions struct {
	Container string
	Start     bool
}

// DefaultContainerID is the id of a resumed container when --container is
// not given: "<run>-resumed" (DESIGN "Materialize").
func DefaultContainerID(run string) string { return run + "-resumed" }

// containerIDRE is containerd's identifier grammar (pkg/identifiers).
var containerIDRE = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`)

// ValidContainerID reports whether id is a containerd identifier:
// [A-Za-z0-9]+([._-][A-Za-z0-9]+)*, at most 76 characters.
func ValidContainerID(id string) bool { return len(id) <= 76 && containerIDRE.MatchString(id) }

// CheckMaterialize names the verdict's "materialize" member (present only
// when Resume materialized or tried to).
const CheckMaterialize = "materialize"

// Holder returns the claim holder this process is: container id, host id,
// os.Getpid(), its start time (ProcessStartTime) and boot id (BootID).
// Errors are those of reading /proc.
func Holder(container, hostID string) (Claim, error) {
	pid := os.Getpid()
	start, err := ProcessStartTime(pid)
	if err != nil {
		return Claim{}, fmt.Errorf("claim holder: %w", err)
	}
	boot, err := BootID()
	if err != nil {
		return Claim{}, fmt.Errorf("claim holder: %w", err)
	}
	return Claim{Container: container, HostID: hostID, PID: pid, StartTime: start, BootID: boot}, nil
}

// ClaimLabels returns the lease labels naming holder (the LabelClaim*
// constants); the host label is omitted when HostID is empty.
func ClaimLabels(holder Claim) map[string]string {
	l := map[string]string{
		LabelClaimContainer: holder.Container,
		LabelClaimPID:       strconv.Itoa(holder.PID),
		LabelClaimStart:     holder.StartTime,
		LabelClaimBoot:      holder.BootID,
	}
	if holder.HostID != "" {
		l[LabelClaimHost] = holder.HostID
	}
	return l
}

// SameHolder reports whether a and b name the same holder: container, host,
// pid, start time and boot id.
func SameHolder(a, b *Claim) bool {
	return a.Container == b.Container && a.HostID == b.HostID && a.PID == b.PID &&
		a.StartTime == b.StartTime && a.BootID == b.BootID
}

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

// NotApplied lists, as JSON Pointers into the recorded core, what a v1
// resume does not apply to the container (DESIGN "Materialize"): every
// mount, remoteUser, and containerEnv values holding "${…}". Nil when
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

// Resume is `resume` without --check (DESIGN "Resume decision",
// "Materialize, claim, run lifecycle"): checks 1–9 as Decide runs them,
// then check 10 creates the run's claim lease (m.CreateClaim, or
// m.TakeOverClaim of a stale one) naming this process as holder of the
// container opt.Container (default DefaultContainerID), then materializes:
// the container id must not exist (else claim-conflict, 8), the diff is
// verified (m.CheckDiff: a mismatch or an absent blob is
// snapshot-missing, 7), the container is created (m.CreateContainer) and,
// with opt.Start, its task started (m.StartTask; Pid in the verdict).
//
// The claim is released (m.ReleaseClaim) when materialization fails before
// the container exists; after the container exists it stays, so a second
// resume of the run is 8 naming the holder. The verdict's Materialize
// member reports the outcome; Container and NotApplied are set once the
// container exists. A daemon error is class internal (exit 1).
//
// Fault points (internal/faultpoint, test-only: with
// SANDBOX_RESUME_TEST_PAUSE_AT=<step> the process reports the step on
// stderr and holds there so that a test can SIGKILL it; no effect when
// unset), in order — runtime/containerd/materialize.go adds the steps
// marked (rt):
//
//	resume-takeover    (rt) the takeover lock lease exists, the stale claim is not yet replaced
//	resume-claimed     the claim lease names this process, nothing made under it
//	resume-diffchecked the rootfs diff is verified, nothing applied
//	resume-applied     (rt) base layers and diff applied under the claim lease, no snapshot spec.ID
//	resume-prepared    (rt) snapshot spec.ID prepared under the claim lease, no container
//	resume-created     the container exists, no task
//	resume-task        (rt) the task is created, not started (--start)
//	resume-started     the task is started (--start), no verdict printed
func Resume(ctx context.Context, facts Facts, claims Claims, m Materializer, req Request, opt ResumeOptions) *Verdict {
	s := &state{req: req, facts: facts, claims: claims, mat: m, containerID: opt.Container}
	v := s.run(ctx)
	if !v.Accepted {
		return v
	}
	faultpoint.Reach("resume-claimed")
	spec := ContainerSpec{
		ID: s.containerID, Run: s.ref.Run, Manifest: s.ref.Manifest,
		Base: s.ref.Base, Layers: s.ref.Layers,
	}
	spec.Env, _ = ContainerEnv(&s.ref.Core)
	detail, class, created, err := materialize(ctx, m, spec)
	if err != nil && !created {
		if rerr := m.ReleaseClaim(context.WithoutCancel(ctx), s.ref.Run, s.holder); rerr != nil {
			err = fmt.Errorf("%w (and releasing the claim failed: %v)", err, rerr)
		} else {
			err = fmt.Errorf("%w; claim %s released", err, snapshot.ClaimLease(s.ref.Run))
		}
	}
	if created {
		v.Container = spec.ID
		v.NotApplied = NotApplied(&s.ref.Core)
		faultpoint.Reach("resume-created")
	}
	if err == nil && opt.Start {
		pid, serr := m.StartTask(ctx, spec.ID)
		if serr != nil {
			err, class = fmt.Errorf("container %s created; start its task: %w", spec.ID, serr), ClassInternal
		} else {
			v.Pid = pid
			detail += fmt.Sprintf("; task started, pid %d", pid)
			faultpoint.Reach("resume-started")
		}
	}
	if err != nil {
		v.Accepted, v.Class, v.ExitCode = false, class, class.Code()
		v.Materialize = &CheckResult{Name: CheckMaterialize, Result: ResultFail, Detail: err.Error()}
		return v
	}
	v.Materialize = &CheckResult{Name: CheckMaterialize, Result: ResultPass, Detail: detail}
	return v
}

// materialize runs the steps after the claim; created reports whether the
// container exists (made by this call) when err is not nil.
func materialize(ctx context.Context, m Materializer, spec ContainerSpec) (detail string, class Class, created bool, err error) {
	exists, err := m.ContainerExists(ctx, spec.ID)
	switch {
	case err != nil:
		return "", ClassInternal, false, fmt.Errorf("container %s: %w", spec.ID, err)
	case exists:
		return "", ClassClaimConflict, false, fmt.Errorf("container id %s already exists (choose another container id)", spec.ID)
	}
	var size, uncompressed int64
	for i, l := range spec.Layers {
		err = m.CheckDiff(ctx, l)
		switch {
		case errors.Is(err, snapshot.ErrDiffCorrupt), errdefs.IsNotFound(err):
			return "", ClassSnapshotMissing, false, fmt.Errorf("layers/%d: %w", i, err)
		case err != nil:
			return "", ClassInternal, false, fmt.Errorf("verify layers/%d %s: %w", i, l.Digest, err)
		}
		size, uncompressed = size+l.Size, uncompressed+l.UncompressedSize
	}
	faultpoint.Reach("resume-diffchecked")
	err = m.CreateContainer(ctx, spec)
	switch {
	case errdefs.IsAlreadyExists(err):
		return "", ClassClaimConflict, false, fmt.Errorf("container id %s already exists (choose another container id): %w", spec.ID, err)
	case errors.Is(err, snapshot.ErrDiffCorrupt):
		return "", ClassSnapshotMissing, false, err
	case errdefs.IsNotFound(err):
		return "", ClassImageUnresolved, false, fmt.Errorf("create container %s: %w", spec.ID, err)
	case err != nil:
		return "", ClassInternal, false, fmt.Errorf("create container %s: %w", spec.ID, err)
	}
	return fmt.Sprintf("%s verified (%d bytes, %d bytes uncompressed); base %s + %s applied; container %s created",
		layersWord(spec.Layers), size, uncompressed, spec.Base.ManifestDigest, layersWord(spec.Layers), spec.ID), "", true, nil
}

// claimAndHold is check 10 without --check: create the claim, or take over
// a stale one.
func (s *state) claimAndHold(ctx context.Context) (string, error) {
	run := s.ref.Run
	if s.containerID == "" {
		s.containerID = DefaultContainerID(run)
	}
	holder, err := Holder(s.containerID, s.hostID)
	if err != nil {
		return "", internal(CheckClaim, err)
	}
	holder.Lease = snapshot.ClaimLease(run)
	s.holder = holder
	c, err := s.claims.ClaimHolder(ctx, run)
	if err != nil {
		return "", internal(CheckClaim, fmt.Errorf("claim of run %q: %w", run, err))
	}
	took := ""
	switch {
	case c == nil:
		err = s.mat.CreateClaim(ctx, run, holder)
	case c.Live():
		return "", refusef(CheckClaim, ClassClaimConflict, "run %q is claimed: %s", run, c)
	default:
		err = s.mat.TakeOverClaim(ctx, run, c, holder)
		took = fmt.Sprintf(" (took over the stale %s)", c)
	}
	if errdefs.IsAlreadyExists(err) {
		// Lost a race: name the winner.
		if now, herr := s.claims.ClaimHolder(ctx, run); herr == nil && now != nil {
			return "", refusef(CheckClaim, ClassClaimConflict, "run %q is claimed: %s", run, now)
		}
		return "", refuse(CheckClaim, ClassClaimConflict, fmt.Errorf("run %q: claim lost to a concurrent resume: %w", run, err))
	}
	if err != nil {
		return "", internal(CheckClaim, fmt.Errorf("claim run %q: %w", run, err))
	}
	return fmt.Sprintf("claimed run %q%s: %s", run, took, &holder), nil
}

// layersWord names a ref's layers in a detail: the one layer's digest, or
// how many there are.
func layersWord(ls []snapshot.Layer) string {
	if len(ls) == 1 {
		return fmt.Sprintf("layer %s (diffID %s)", ls[0].Digest, ls[0].DiffID)
	}
	return fmt.Sprintf("%d layers", len(ls))
}
