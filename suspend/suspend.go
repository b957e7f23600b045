package suspend

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Errors of Run, beside errdef.ErrImageUnresolved (the image does not
// resolve, or the content of a run's base image is absent),
// snapshot.ErrInvalidRun (the run id is not valid, or the container id
// does not make one) and the ledger's refusals (which also match
// ErrRunConflict); each carries a class (internal/exitcode).
var (
	// ErrMismatch: the declaration does not describe the container
	// (docs/design.md "Suspend", step 3). At generation 1: its snapshot's
	// parent is not the chain of the image the manifest names, the
	// reference's digest is not the image's, a containerEnv entry is not in
	// the runtime spec's process.env with its value, or a declared mount
	// target is not a destination of the spec's mounts. At a later
	// generation: the offered manifest address is not the parent
	// generation's, or the snapshot's parent is not the chain of the base
	// and the layers of the generation the container was resumed from.
	// Class "manifest-mismatch".
	ErrMismatch = errdef.New(errdef.ErrMismatch, "the declaration does not describe the container")
	// ErrContainerNotFound: no container with that id in the namespace.
	// Class "bad-input" (a container that does not exist is refused
	// input).
	ErrContainerNotFound = errdef.New(errdef.ErrBadInput, "container not found")
	// ErrRunConflict: the run id is taken (the ledger has a record of it, a
	// tombstone included, or its run lease was made for another
	// container), the container carries a fence label but does not hold
	// the run (the record is not live with it as holder and that fence:
	// fenced out), the ledger refused to record the generation, or the
	// container's interrupted suspend is not this run's to finish.
	// Class "claim-conflict".
	ErrRunConflict = errdef.New(errdef.ErrClaimConflict, "the run is taken or held by another container")
	// ErrAlreadySuspended: the container carries the suspended label: a
	// suspend already stopped it (docs/design.md "Suspend", step 2). Class
	// "claim-conflict".
	ErrAlreadySuspended = errdef.New(errdef.ErrClaimConflict, "container already suspended")
	// ErrRunMismatch: the run id asked for is not the run the container is
	// labelled with. Class "bad-input".
	ErrRunMismatch = errdef.New(errdef.ErrBadInput, "run id is not the container's run")
	// ErrPolicyMismatch: at a later generation, the reserved-environment
	// list asked for is not the one the parent generation recorded (a
	// running run's policy never changes; docs/design.md "Suspend", step
	// 1). Class "bad-input".
	ErrPolicyMismatch = errdef.New(errdef.ErrBadInput, "reserved-environment policy is not the run's")
	// ErrOutcomeUnknown: the ledger did not answer whether the generation
	// was recorded, not even when read back. The task is left paused and
	// the container labelled suspending, so that a rerun decides
	// (docs/design.md "Suspend", step 5). Class "internal".
	ErrOutcomeUnknown = errors.New("whether the ledger recorded the generation is unknown")
)

// DefaultKeepGenerations is how many of a run's latest generations keep
// their layers under the run lease when Request.KeepGenerations is 0
// (docs/design.md "SnapshotRef": retention).
const DefaultKeepGenerations = 3

// Request is the input of Run (docs/design.md "Suspend").
type Request struct {
	// ContainerID is the container to capture (required).
	ContainerID string
	// ConfigPath is the devcontainer.json that declares the run (required).
	ConfigPath string
	// Lockfile is an explicit lockfile path; "" discovers one beside
	// ConfigPath as the reference CLI does.
	Lockfile string
	// Policy is the effective reserved-environment list (see
	// envmanifest.LoadPolicy): at generation 1 ingestion refuses those
	// names and the ref records the list (nil is recorded as []). At a
	// later generation the parent generation's recorded list applies
	// instead: Policy is ignored unless PolicySet, and then it must be
	// that list (compared as sorted sets), else ErrPolicyMismatch.
	Policy []string
	// PolicySet says the caller chose Policy (the CLI's --policy); without
	// it a later generation uses its parent's list as recorded, so a newer
	// release's default list never changes a running run.
	PolicySet bool
	// Run is the run id; "" means the container's snapshot.LabelRun label,
	// else snapshot.DefaultRunID(ContainerID).
	Run string
	// Keys sign the ref (at least one): crypto.Signers holding Ed25519
	// keys (envelope.Sign).
	Keys []crypto.Signer
	// Out is the ref file to write; "" means DefaultOut(run, generation)
	// in the current directory.
	Out string
	// KeepRunning resumes the task after the generation is recorded
	// instead of stopping it; the container then holds the run (the
	// ledger's fence is on its snapshot.LabelFence label) and its next
	// suspend writes the next generation.
	KeepRunning bool
	// Flatten makes the generation's layers one layer: the diff of the
	// container's snapshot against the base image's chain
	// (snapshot.FlatDiffer) instead of the layers of the generation it was
	// resumed from plus its own diff. A generation whose layers would
	// exceed snapshot.MaxLayers is flattened anyway.
	Flatten bool
	// Memory checkpoints the task's memory after the pause and before the
	// diff (docs/design.md "Memory"; memory.go): the ref records it and a
	// resume restores the process instead of restarting it.
	Memory bool
	// KeepMemory keeps the parent generation's memory blobs under the run
	// lease once this generation is recorded; without it they are released
	// (docs/design.md "Memory": retention; memory.go).
	KeepMemory bool
	// KeepGenerations is how many of the run's latest generations (this
	// one included) keep their layers under the run lease; the layers no
	// longer named by any of them are released from it once this
	// generation is recorded (ref and spec blobs always stay). 0 means
	// DefaultKeepGenerations; it must not be negative.
	KeepGenerations int
	// Progress, when set, receives the byte progress of the diff (phase
	// "diff", total unknown); the CLI passes one only when its stderr is a
	// terminal.
	Progress snapshot.Progress
	// Now returns the current time (time.Now when nil); it sets Created.
	Now func() time.Time
	// Rand is where a new run UID's 128 bits are read from
	// (snapshot.NewRunUID; crypto/rand.Reader when nil): at generation 1,
	// and at the first sandbox.snapshot-ref/3 generation after a /2 parent.
	Rand io.Reader
}

// DefaultOut is the ref file a suspend writes without Request.Out:
// "<run>.g<generation>.ref.json" (docs/design.md "Suspend").
func DefaultOut(run string, generation uint64) string {
	return fmt.Sprintf("%s.g%d.ref.json", run, generation)
}

// Result is what Run did.
type Result struct {
	// Ref is the signed SnapshotRef; File its file bytes, also stored as
	// the ref blob RefBlob (its digest, media type snapshot.MediaTypeRef)
	// in the content store: the ref the ledger records.
	Ref     *snapshot.Ref
	File    []byte
	RefBlob digest.Digest
	// Path is the ref file written.
	Path string
	// Lease is the run lease holding the layers, the spec blob, the ref
	// blob and the base.
	Lease string
	// Record is the ledger's record of the run after the suspend.
	Record ledger.Record
	// Fence is the fencing token the container holds the run with when it
	// was kept running (its snapshot.LabelFence label); 0 otherwise.
	Fence uint64
	// Paused is how long this call held the task paused (from the pause,
	// or from finding it paused, to the stop or the resume); 0 when it had
	// no task to pause.
	Paused time.Duration
	// Resumed is true when this call continued an earlier attempt at the
	// same generation: the container carried snapshot.LabelSuspending (a
	// rerun), or at generation 1 the run lease was there already (a rerun
	// after a suspend the ledger refused). Blobs already stored are reused.
	Resumed bool
	// Finished is true when this call finished an interrupted suspend
	// whose generation the ledger had recorded: it wrote the recorded ref
	// blob and took no new diff.
	Finished bool
	// Flattened is true when the generation's one layer is the diff
	// against the base chain although the container was resumed from a
	// generation with layers (Request.Flatten, or more than
	// snapshot.MaxLayers layers).
	Flattened bool
	// Chained is true when this call committed the container's snapshot as
	// the chain snapshot of the generation it wrote (docs/design.md
	// "Resume on the same host without extracting"); false when it was
	// kept running, flattened, or the chain snapshot existed already.
	Chained bool
	// Released are the layer blobs of generations older than the latest
	// Request.KeepGenerations that this call released from the run lease
	// (those an earlier suspend released already included), oldest
	// generation last.
	Released []digest.Digest
	// ReleasedMemory are the parent generation's memory blobs this call
	// released from the run lease (none with Request.KeepMemory).
	ReleasedMemory []digest.Digest
	// Deleted is true when the container was an incarnation that this
	// (stopping) suspend deleted with its snapshot (docs/design.md
	// "Suspend", step 7).
	Deleted bool
}

// Run suspends a container and writes the run's next generation,
// following docs/design.md "Suspend" step by step:
//
//  2. read the container (else ErrContainerNotFound) and its labels, and
//     the ledger's record of its run — before anything else, as a later
//     generation's policy is its parent's. A container labelled
//     snapshot.LabelSuspending = G is a rerun of an interrupted suspend
//     (below). One labelled snapshot.LabelSuspended is
//     ErrAlreadySuspended. One labelled snapshot.LabelFence = F holds the
//     run (an incarnation, or a runtime container kept running): the
//     record must be live with this container (host, namespace, id) as
//     holder and fence F, else ErrRunConflict before anything is paused;
//     it writes generation G = the record's generation + 1, whose parent
//     is the record's ref, read from the content store (bytes re-hashed;
//     absent or different: errdef.ErrSnapshotMissing); an incarnation's
//     snapshot.LabelRef names the generation it was resumed from, read
//     the same way. Any other container writes generation 1 of the run,
//     whose id must be free in the ledger (no record, or a purged one;
//     else ErrRunConflict). A Request.Run other than the container's
//     snapshot.LabelRun is ErrRunMismatch.
//  1. ingest the config (envmanifest.IngestFile with the lockfile and the
//     policy: at a later generation the parent's recorded list, see
//     Request.Policy); a refused config is a *envmanifest.RefusedError;
//  3. the declaration must describe the container (else ErrMismatch). At
//     generation 1: the container's snapshot's parent is identity.ChainID
//     of the diffIDs of the image the manifest's reference resolves to
//     for the host platform (an image that does not resolve is
//     errdef.ErrImageUnresolved), a digest in the reference is that
//     image's index or manifest digest, every containerEnv entry whose
//     value holds no "${" is in the spec's process.env with that value
//     (and no other value), and every declared mount target is the
//     destination of a mount of the spec. At a later generation: the
//     manifest address is the parent's (core, manifest, pinned, policy,
//     lockfile and base are copied from it; the image is not resolved
//     again) and the snapshot's parent is identity.ChainID of the base's
//     diffIDs followed by those of the layers of the generation it was
//     resumed from (none for a runtime container kept running). At every
//     generation the devcontainer.metadata label of the image's config
//     must pass envmanifest.CheckImageMetadata (else an
//     *envmanifest.ImageMetadataError; no label passes);
//  4. create the run lease snapshot.RunLease(run) first (at generation 1
//     a rerun finds it and keeps its creation time, and a lease made for
//     another container is ErrRunConflict; a later generation finds it)
//     and hold the base image's content in it (absent content:
//     errdef.ErrImageUnresolved); every later write is under it;
//  5. label the container snapshot.LabelSuspending = G (and LabelRun; at a
//     later generation also snapshot.LabelCreated, the ref's creation time,
//     and over a /1 or /2 parent snapshot.LabelRunUID, the run UID this
//     generation mints, so that a rerun writes the same ref);
//     pause a running task (a paused one stays paused); store the layer
//     — the diff of the container's snapshot against its parent
//     (snapshot.Differ), or with Request.Flatten or past
//     snapshot.MaxLayers layers against the base chain
//     (snapshot.FlatDiffer) — its runtime spec (the exact bytes, media
//     type snapshot.MediaTypeSpec) and the signed ref (snapshot.RefSchema;
//     Layers are the resumed-from generation's layers followed by the new
//     one; RunUID at generation 1 minted from Request.Rand and labelled on
//     the run lease (snapshot.LabelRunUID; a rerun keeps it), later the
//     parent's (minted for a /1 or /2 parent); at a later generation
//     Parent is the parent's digest, Ancestors the parent's followed by
//     it (snapshot.NextAncestors) and Fence the container's fence); then
//     record it in the ledger
//     (ledger.Ledger.Suspended with that fence) while the task is still
//     paused:
//     - recorded: write the ref file temp → fsync → rename, then with
//     KeepRunning resume the task and label LabelManifest and LabelFence
//     (the fence the ledger issued; unchanged at a later generation),
//     else stop the task (kill, wait, delete); release from the run lease
//     the layers no longer named by the latest Request.KeepGenerations
//     generations (walking the Parent chain as far as its ref blobs are
//     on this host); then an incarnation (a container carrying
//     snapshot.LabelRef) whose task was stopped is deleted with its
//     snapshot (step 7: its content lives in the layers), and any other
//     container is labelled — LabelManifest and, when stopped,
//     LabelSuspended = G — with LabelSuspending (and LabelCreated and
//     LabelRunUID) removed
//     in the same update;
//     - refused (a *ledger.Error, also matching ErrRunConflict), or failed
//     without the generation recorded (read back with Get): resume a task
//     this suspend paused, restore the labels, write no ref file;
//     - unknown (the read-back fails too): leave the task paused and the
//     label set; ErrOutcomeUnknown.
//
// A rerun (step 6), for a container labelled LabelSuspending = G: when the
// ledger's record is at generation G and its SuspendedBy is this container
// (host, namespace, id, creation time, fence) at G, Run writes the
// recorded ref blob (read by the record's digest: absent or different is
// errdef.ErrSnapshotMissing) to Out and takes no new diff, finishing as that
// ref's keptRunning says, whatever KeepRunning is: stop the task (then
// release, delete or label as above); or resume it, but only while the
// record is live with this container as holder and its fence (else
// ErrRunConflict, the task left paused). When the record is below G (no
// record for G = 1; at a later generation, live at G-1 with this container
// as holder and its fence) G was not recorded and Run starts again at
// step 1, reusing the stored blobs. Anything else is ErrRunConflict, the
// container left as found.
//
// An invalid run id, or no run id when the container id does not make one,
// is snapshot.ErrInvalidRun. A crash at any point leaves no ref file or a
// complete one, and calling Run again completes the suspension. A test can
// hold the process between steps with the environment variable
// SANDBOX_RESUME_TEST_PAUSE_AT in a binary built with -tags faultpoint
// (faultpoint.go).
func Run(ctx context.Context, c Host, l ledger.Ledger, req Request) (*Result, error) {
	if req.ContainerID == "" {
		return nil, errors.New("suspend: no container id")
	}
	if len(req.Keys) == 0 {
		return nil, errors.New("suspend: no signing key")
	}
	if l == nil {
		return nil, errors.New("suspend: no run ledger")
	}
	if req.Run != "" && !snapshot.ValidRunID(req.Run) {
		return nil, fmt.Errorf("suspend: run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters: %w", req.Run, snapshot.MaxRunIDLen, snapshot.ErrInvalidRun)
	}
	if req.KeepGenerations < 0 {
		return nil, fmt.Errorf("suspend: keep %d generations: %w", req.KeepGenerations, errdefs.ErrInvalidArgument)
	}
	s := &suspension{c: c, l: l, req: req, now: req.Now, keep: req.KeepGenerations}
	if s.now == nil {
		s.now = time.Now
	}
	if s.keep == 0 {
		s.keep = DefaultKeepGenerations
	}
	s.policy = slices.Clone(req.Policy)
	if s.policy == nil {
		s.policy = []string{}
	}
	return s.suspend(ctx)
}

// suspension is one call of Run.
type suspension struct {
	c      Host
	l      ledger.Ledger
	req    Request
	now    func() time.Time
	policy []string
	keep   int

	m       *envmanifest.Manifest
	ctr     snapshot.Container
	host    snapshot.Host
	who     ledger.Container
	run     string
	gen     uint64
	fence   uint64 // the container's fence label; 0 at generation 1
	rerun   bool   // the container carries LabelSuspending = gen
	out     string
	res     *Result
	paused  time.Time // when this call paused the task, or found it paused
	ownTask bool      // the task is paused by a suspend of this run: undo resumes it

	// At a later generation: the parent generation (the ledger's latest)
	// and its digest, and the generation the container was resumed from
	// (nil for a runtime container kept running).
	parent    *snapshot.Ref
	parentRef digest.Digest
	from      *snapshot.Ref
	runUID    string // the ref's run UID (lease at generation 1, else laterRunUID)
}

// laterRunUID sets s.runUID at a later generation: the parent's
// (docs/design.md "Exactly once across hosts"), or for a parent without one
// (a /1 or /2 ref) a new one, labelled on the container
// (snapshot.LabelRunUID, beside LabelCreated, in labels and removed by
// undoLabels) so that a rerun writes the same ref; a rerun takes it from
// that label.
func (s *suspension) laterRunUID(labels, undoLabels map[string]string) error {
	if s.parent.IsV3() {
		s.runUID = s.parent.RunUID
		return nil
	}
	uid := s.ctr.Labels[snapshot.LabelRunUID]
	if !s.rerun || !snapshot.ValidRunUID(uid) {
		var err error
		if uid, err = snapshot.NewRunUID(s.req.Rand); err != nil {
			return fmt.Errorf("suspend: run %q generation %d: %w", s.run, s.gen, err)
		}
	}
	s.runUID, labels[snapshot.LabelRunUID], undoLabels[snapshot.LabelRunUID] = uid, uid, ""
	return nil
}

func (s *suspension) suspend(ctx context.Context) (*Result, error) {
	// 2. The container, its labels, and which generation.
	var err error
	s.ctr, err = s.c.Container(ctx, s.req.ContainerID)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("suspend: container %q: %v: %w", s.req.ContainerID, err, ErrContainerNotFound)
		}
		return nil, fmt.Errorf("suspend: inspect container %q: %w", s.req.ContainerID, err)
	}
	if err := s.which(); err != nil {
		return nil, err
	}
	s.host, err = s.c.Host(ctx)
	if err != nil {
		return nil, fmt.Errorf("suspend: host facts: %w", err)
	}
	s.who = ledger.Container{Host: s.host.ID, Namespace: s.ctr.Namespace, ID: s.ctr.ID}
	rec, err := s.l.Get(ctx, s.run)
	found := err == nil
	switch {
	case errors.Is(err, ledger.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("suspend: run %q: read the ledger: %w", s.run, err)
	}
	switch {
	case s.rerun && found && rec.Generation >= s.gen:
		if rec.Generation == s.gen && s.suspendedByThis(rec) {
			s.start()
			return s.finishRecorded(ctx, rec)
		}
		return nil, fmt.Errorf("suspend: %s carries %s=%d, but %s: the interrupted suspend is not this container's to finish: %w",
			s.who, snapshot.LabelSuspending, s.gen, describeRecord(rec), ErrRunConflict)
	case s.gen == 1 && s.rerun:
		// The record is below 1 (none, or purged): not recorded; start again.
	case s.gen == 1 && found && rec.State != ledger.StatePurged:
		return nil, fmt.Errorf("suspend: run %q: the run id is taken: %s: %w", s.run, describeRecord(rec), ErrRunConflict)
	case s.gen == 1:
	case !found || !s.holdsRun(rec) || (s.rerun && rec.Generation+1 != s.gen):
		// A container holding the run (or whose interrupted suspend of
		// generation G must start again) must still hold it: live, with
		// it as holder and its fence, at G-1.
		what := fmt.Sprintf("carries %s=%d", snapshot.LabelFence, s.fence)
		if s.rerun {
			what += fmt.Sprintf(" and %s=%d", snapshot.LabelSuspending, s.gen)
		}
		state := "the ledger has no record of it"
		if found {
			state = describeRecord(rec)
		}
		return nil, fmt.Errorf("suspend: %s %s, but it does not hold run %q: %s: %w", s.who, what, s.run, state, ErrRunConflict)
	default:
		s.gen = rec.Generation + 1
	}
	s.start()
	if s.gen > 1 {
		if err := s.ancestors(ctx, rec); err != nil {
			return nil, err
		}
	}

	// 1. Ingest (a later generation with its parent's policy).
	opts := envmanifest.Options{Lockfile: s.req.Lockfile, Reserved: s.policy}
	if s.parent != nil {
		if s.req.PolicySet && !samePolicy(s.req.Policy, s.parent.Policy) {
			return nil, fmt.Errorf("suspend: run %q generation %d records the reserved-environment list %q, not %q: %w",
				s.run, s.parent.Generation, s.parent.Policy, s.req.Policy, ErrPolicyMismatch)
		}
		s.policy = slices.Clone(s.parent.Policy)
		if s.policy == nil {
			s.policy = []string{}
		}
		opts.Reserved, opts.RequireLockfile = s.policy, s.parent.Lockfile != ""
	}
	m, err := envmanifest.IngestFile(s.req.ConfigPath, opts)
	if err != nil {
		return nil, err
	}
	s.m = m

	// 3. The declaration must describe the container.
	var base snapshot.Base
	if s.parent == nil {
		base, err = s.c.ResolveImage(ctx, m.Core.Image)
		if err != nil {
			if errdefs.IsNotFound(err) {
				return nil, fmt.Errorf("suspend: image %s: %v: %w", m.Core.Image, err, errdef.ErrImageUnresolved)
			}
			return nil, fmt.Errorf("suspend: resolve image %s: %w", m.Core.Image, err)
		}
		if err := describes(m.Core.Image, base, s.ctr); err != nil {
			return nil, err
		}
		if err := describesSpec(s.ctr, &m.Core); err != nil {
			return nil, err
		}
		if err := describesUser(ctx, s.c, s.ctr, &m.Core); err != nil {
			return nil, err
		}
	} else {
		base = s.parent.Base
		if err := s.describesLater(); err != nil {
			return nil, err
		}
	}
	if err := checkImageMetadata(ctx, s.c, m.Core.Image, base); err != nil {
		return nil, err
	}
	if len(s.ctr.Spec) == 0 {
		return nil, fmt.Errorf("suspend: container %q has no runtime spec to record: %w", s.ctr.ID, errdefs.ErrFailedPrecondition)
	}

	// 4. The run lease first.
	created, err := s.lease(ctx, base)
	if err != nil {
		return nil, err
	}
	faultPoint("lease")

	// 5. Label, pause, store, record.
	before := s.ctr.Labels[snapshot.LabelRun]
	labels := map[string]string{snapshot.LabelSuspending: strconv.FormatUint(s.gen, 10), snapshot.LabelRun: s.run}
	undoLabels := map[string]string{snapshot.LabelSuspending: "", snapshot.LabelRun: before}
	if s.gen > 1 {
		// A rerun writes the same ref: it takes the creation time from here
		// (generation 1 takes it from the run lease it created).
		labels[snapshot.LabelCreated], undoLabels[snapshot.LabelCreated] = created, ""
		if err := s.laterRunUID(labels, undoLabels); err != nil {
			return nil, err
		}
	}
	if err := s.c.SetContainerLabels(ctx, s.ctr.ID, labels); err != nil {
		return nil, fmt.Errorf("suspend: label container %q %s=%d: %w", s.ctr.ID, snapshot.LabelSuspending, s.gen, err)
	}
	faultPoint("labelled")
	if err := s.pause(ctx); err != nil {
		return nil, s.undo(ctx, err, undoLabels)
	}
	faultPoint("pause")
	mem, err := s.checkpoint(ctx)
	if err != nil {
		return nil, s.undo(ctx, err, undoLabels)
	}
	layers, err := s.diff(ctx, base)
	if err != nil {
		return nil, s.undo(ctx, err, undoLabels)
	}
	faultPoint("diff")
	specDesc, err := s.c.WriteBlob(ctx, s.res.Lease, s.ingestRef("spec"), snapshot.MediaTypeSpec, s.ctr.Spec)
	if err != nil {
		return nil, s.undo(ctx, fmt.Errorf("suspend: write the runtime spec blob of %q under lease %s: %w", s.ctr.ID, s.res.Lease, err), undoLabels)
	}
	runtime := s.ctr.Runtime
	ref := &snapshot.Ref{
		Schema:      snapshot.RefSchema,
		Run:         s.run,
		Generation:  s.gen,
		Manifest:    m.Address,
		Core:        m.Core,
		Pinned:      m.IsPinned(),
		Policy:      s.policy,
		Lockfile:    m.Lockfile,
		Host:        s.host,
		Base:        base,
		Layers:      layers,
		Spec:        &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: specDesc.Digest, Size: specDesc.Size},
		Runtime:     &runtime,
		KeptRunning: s.req.KeepRunning,
		Created:     created,
		RunUID:      s.runUID, // lease (generation 1) or laterRunUID
		Memory:      mem,
	}
	if p := s.parent; p != nil {
		// Copied from the parent (docs/design.md "SnapshotRef"); the
		// manifest address was checked equal in step 3. The run UID too
		// (a /2 parent has none: one is minted) and the ancestors are the
		// parent's and the parent ("Exactly once across hosts").
		ref.Parent, ref.Fence, ref.Ancestors = s.parentRef, s.fence, snapshot.NextAncestors(p, s.parentRef)
		ref.Manifest, ref.Core, ref.Pinned, ref.Policy, ref.Lockfile = p.Manifest, p.Core, p.Pinned, p.Policy, p.Lockfile
		if ref.Policy == nil {
			ref.Policy = []string{}
		}
	}
	file, err := snapshot.SignRef(ref, s.req.Keys...)
	if err != nil {
		return nil, s.undo(ctx, fmt.Errorf("suspend: sign ref: %w", err), undoLabels)
	}
	desc, err := s.c.WriteBlob(ctx, s.res.Lease, s.ingestRef("ref"), snapshot.MediaTypeRef, file)
	if err != nil {
		return nil, s.undo(ctx, fmt.Errorf("suspend: write ref blob under lease %s: %w", s.res.Lease, err), undoLabels)
	}
	faultPoint("refblob")
	rec, err = s.record(ctx, desc.Digest)
	if err != nil {
		if errors.Is(err, ErrOutcomeUnknown) {
			return nil, err
		}
		return nil, s.undo(ctx, err, undoLabels)
	}
	faultPoint("recorded")
	s.res.Ref, s.res.File, s.res.RefBlob = ref, file, desc.Digest
	return s.finish(ctx, rec)
}

// start sets the ref file's path and the result once the generation is
// known.
func (s *suspension) start() {
	s.out = s.req.Out
	if s.out == "" {
		s.out = DefaultOut(s.run, s.gen)
	}
	s.res = &Result{Lease: snapshot.RunLease(s.run), Path: s.out, Resumed: s.rerun}
}

// ingestRef names a blob's ingest in the content store: per run lease and
// generation, so that an ingest a killed suspend left is resumed only by
// the same blob.
func (s *suspension) ingestRef(what string) string {
	return fmt.Sprintf("%s/g%d/%s", s.res.Lease, s.gen, what)
}

// diff stores the generation's own layer and returns its layers
// (docs/design.md "SnapshotRef", `layers`): the layers of the generation
// the container was resumed from followed by the diff of its snapshot
// against its parent; or, with Request.Flatten or past snapshot.MaxLayers
// layers, the one diff of its snapshot against the base chain.
func (s *suspension) diff(ctx context.Context, base snapshot.Base) ([]snapshot.Layer, error) {
	var below []snapshot.Layer
	if s.from != nil {
		below = s.from.Layers
	}
	if p := s.req.Progress; p != nil {
		p.Phase("diff", -1)
	}
	if len(below) > 0 && (s.req.Flatten || len(below)+1 > snapshot.MaxLayers) {
		layer, err := s.c.CreateFlatDiff(ctx, s.res.Lease, s.ctr, base.DiffIDs, s.req.Progress)
		if err != nil {
			return nil, fmt.Errorf("suspend: flattened diff of container %q (snapshot %s/%s against base %s): %w",
				s.ctr.ID, s.ctr.Snapshotter, s.ctr.SnapshotKey, base.ManifestDigest, err)
		}
		s.res.Flattened = true
		return []snapshot.Layer{layer}, nil
	}
	layer, err := s.c.CreateDiff(ctx, s.res.Lease, s.ctr, s.req.Progress)
	if err != nil {
		return nil, fmt.Errorf("suspend: diff of container %q (snapshot %s/%s): %w", s.ctr.ID, s.ctr.Snapshotter, s.ctr.SnapshotKey, err)
	}
	return append(slices.Clone(below), layer), nil
}

// which reads the container's labels (docs/design.md "Suspend", step 2):
// it sets the generation (0 for a container holding the run: the record
// decides), the fence, whether this is a rerun, and the run id.
func (s *suspension) which() error {
	labels := s.ctr.Labels
	label := labels[snapshot.LabelRun]
	fence := func() error {
		f, err := strconv.ParseUint(labels[snapshot.LabelFence], 10, 64)
		if err != nil || f == 0 {
			return fmt.Errorf("suspend: container %q: label %s=%q is not a fence: %w", s.ctr.ID, snapshot.LabelFence, labels[snapshot.LabelFence], ErrRunConflict)
		}
		s.fence = f
		return nil
	}
	switch {
	case labels[snapshot.LabelSuspending] != "":
		g, err := strconv.ParseUint(labels[snapshot.LabelSuspending], 10, 64)
		if err != nil || g == 0 {
			return fmt.Errorf("suspend: container %q: label %s=%q is not a generation: %w", s.ctr.ID, snapshot.LabelSuspending, labels[snapshot.LabelSuspending], ErrRunConflict)
		}
		if g > 1 {
			// A later generation is written by a fence holder.
			if err := fence(); err != nil {
				return err
			}
		}
		s.gen, s.rerun = g, true
	case labels[snapshot.LabelSuspended] != "":
		return fmt.Errorf("suspend: container %q carries %s=%s: a suspend stopped it already (its run %q): %w",
			s.ctr.ID, snapshot.LabelSuspended, labels[snapshot.LabelSuspended], label, ErrAlreadySuspended)
	case labels[snapshot.LabelFence] != "":
		if err := fence(); err != nil {
			return err
		}
	default:
		s.gen = 1
	}
	switch {
	case s.req.Run != "" && label != "" && s.req.Run != label:
		return fmt.Errorf("suspend: run %q asked for, but container %q is labelled %s=%s: %w", s.req.Run, s.ctr.ID, snapshot.LabelRun, label, ErrRunMismatch)
	case s.req.Run != "":
		s.run = s.req.Run
	case label != "":
		if !snapshot.ValidRunID(label) {
			return fmt.Errorf("suspend: container %q: label %s=%q is not a valid run id: %w", s.ctr.ID, snapshot.LabelRun, label, snapshot.ErrInvalidRun)
		}
		s.run = label
	default:
		run, ok := snapshot.DefaultRunID(s.ctr.ID)
		if !ok {
			return fmt.Errorf("suspend: container id %q is not a valid run id, so the run id must be given: %w", s.ctr.ID, snapshot.ErrInvalidRun)
		}
		s.run = run
	}
	return nil
}

// suspendedByThis reports whether rec's latest generation was written by
// this container (host, namespace, id, creation time and fence) at s.gen.
func (s *suspension) suspendedByThis(rec ledger.Record) bool {
	by := rec.SuspendedBy
	return by != nil && by.Container == s.who && by.Created.Equal(s.ctr.Created) && by.Generation == s.gen && by.Fence == s.fence
}

// holdsRun reports whether rec is live with this container as holder and
// its fence label's fence.
func (s *suspension) holdsRun(rec ledger.Record) bool {
	return rec.State == ledger.StateLive && rec.Holder != nil && rec.Holder.Container == s.who && rec.Fence == s.fence
}

// describeRecord renders a record for messages: its state, generation and
// who suspended or holds it.
func describeRecord(rec ledger.Record) string {
	out := fmt.Sprintf("the ledger's record is %s at generation %d (fence %d)", rec.State, rec.Generation, rec.Fence)
	if by := rec.SuspendedBy; by != nil {
		out += fmt.Sprintf(", generation %d suspended by %s created %s", by.Generation, by.Container, by.Created.Format(time.RFC3339Nano))
	}
	if h := rec.Holder; h != nil {
		out += ", held by " + h.String()
	}
	return out
}

// lease creates the run lease (or finds it) and holds the base in it; it
// returns the ref's creation time. At generation 1 a lease found is a
// rerun's (it must be this container's) and its creation time is kept, so
// a rerun writes the same ref. A later generation finds the lease of the
// run (made by generation 1's suspend, or by resume); its creation time is
// now, or in a rerun the one the interrupted suspend put on the container
// (snapshot.LabelCreated, beside LabelSuspending), so that it too writes
// the same ref. Generation 1 mints the run UID (s.runUID) and labels the
// lease with it (snapshot.LabelRunUID), and a rerun keeps the one it finds
// there.
func (s *suspension) lease(ctx context.Context, base snapshot.Base) (string, error) {
	id := s.res.Lease
	created := s.now().UTC().Truncate(time.Second).Format(time.RFC3339)
	if s.gen > 1 && s.rerun {
		if t, err := time.Parse(time.RFC3339, s.ctr.Labels[snapshot.LabelCreated]); err == nil {
			created = t.UTC().Format(time.RFC3339)
		}
	}
	labels := map[string]string{
		snapshot.LabelRun:       s.run,
		snapshot.LabelContainer: s.ctr.ID,
		snapshot.LabelCreated:   created,
	}
	if s.gen == 1 {
		uid, err := snapshot.NewRunUID(s.req.Rand)
		if err != nil {
			return "", fmt.Errorf("suspend: run %q: %w", s.run, err)
		}
		s.runUID, labels[snapshot.LabelRunUID] = uid, uid
	}
	err := s.c.CreateLease(ctx, id, labels)
	switch {
	case err == nil:
	case errdefs.IsAlreadyExists(err) && s.gen > 1:
	case errdefs.IsAlreadyExists(err):
		l, err := s.c.Lease(ctx, id)
		if err != nil {
			return "", fmt.Errorf("suspend: run lease %s: %w", id, err)
		}
		if owner := l.Labels[snapshot.LabelContainer]; owner != s.ctr.ID {
			return "", fmt.Errorf("suspend: run lease %s was made for container %q, not %q: %w", id, owner, s.ctr.ID, ErrRunConflict)
		}
		if t, err := time.Parse(time.RFC3339, l.Labels[snapshot.LabelCreated]); err == nil {
			created = t.UTC().Format(time.RFC3339)
		}
		if uid := l.Labels[snapshot.LabelRunUID]; snapshot.ValidRunUID(uid) {
			s.runUID = uid
		}
		s.res.Resumed = true
	default:
		return "", fmt.Errorf("suspend: create run lease %s: %w", id, err)
	}
	if err := s.c.HoldBase(ctx, id, base); err != nil {
		if s.gen > 1 && errdefs.IsNotFound(err) {
			return "", fmt.Errorf("suspend: run %q: hold base image %s (manifest %s) in lease %s: %v: %w", s.run, base.Name, base.ManifestDigest, id, err, errdef.ErrImageUnresolved)
		}
		return "", fmt.Errorf("suspend: hold base image %s in lease %s: %w", base.ManifestDigest, id, err)
	}
	return created, nil
}

// pause pauses a running task; a task found paused stays paused.
func (s *suspension) pause(ctx context.Context) error {
	switch s.ctr.Task {
	case snapshot.TaskRunning, snapshot.TaskPausing:
		s.paused = s.now()
		if err := s.c.PauseTask(ctx, s.ctr.ID); err != nil {
			return fmt.Errorf("suspend: pause task of %q: %w", s.ctr.ID, err)
		}
		s.ownTask = true
	case snapshot.TaskPaused:
		s.paused = s.now()
		// Paused by the interrupted suspend this rerun finishes: ours to
		// resume if this one does not record.
		s.ownTask = s.rerun
	}
	return nil
}

// undo is step 5's "refused or failed": resume the task this suspend
// paused and restore the labels; no ref file is written. It returns cause,
// joined with what failed while undoing.
func (s *suspension) undo(ctx context.Context, cause error, labels map[string]string) error {
	ctx = context.WithoutCancel(ctx)
	if s.ownTask {
		if err := s.c.ResumeTask(ctx, s.ctr.ID); err != nil {
			cause = errors.Join(cause, fmt.Errorf("suspend: resume task of %q after the failure: %w", s.ctr.ID, err))
		}
	}
	if err := s.c.SetContainerLabels(ctx, s.ctr.ID, labels); err != nil {
		cause = errors.Join(cause, fmt.Errorf("suspend: remove label %s from %q after the failure: %w", snapshot.LabelSuspending, s.ctr.ID, err))
	}
	return cause
}

// record runs the Suspended transition (docs/design.md "Suspend", step 5)
// and returns the record written. A refusal is returned as it is (a
// *ledger.Error, also matching ErrRunConflict). Any other failure is read
// back: the record names this suspend's generation and ref → recorded; the
// ledger answers otherwise → not recorded (the failure is returned); no
// answer → ErrOutcomeUnknown.
func (s *suspension) record(ctx context.Context, ref digest.Digest) (ledger.Record, error) {
	rec, err := s.l.Suspended(ctx, ledger.SuspendRequest{
		Run: s.run, Generation: s.gen, Ref: ref, Container: s.who, Created: s.ctr.Created, Fence: s.fence, Keep: s.req.KeepRunning,
		RunUID: s.runUID, // the ledger refuses another run's (and, at generation 1, a purged run's)
	})
	if err == nil {
		return rec, nil
	}
	if errdef.Class(err) != nil {
		return ledger.Record{}, fmt.Errorf("suspend: %w: %w", err, ErrRunConflict)
	}
	back, gerr := s.l.Get(context.WithoutCancel(ctx), s.run)
	switch {
	case gerr == nil && back.Generation == s.gen && back.Ref == ref && s.suspendedByThis(back):
		return back, nil
	case gerr == nil || errors.Is(gerr, ledger.ErrNotFound):
		return ledger.Record{}, fmt.Errorf("suspend: record generation %d of run %q in the ledger (not recorded): %w", s.gen, s.run, err)
	}
	return ledger.Record{}, fmt.Errorf("suspend: record generation %d of run %q in the ledger: %w; reading it back: %w; the task of %q is left paused and labelled %s=%d, so that a rerun decides: %w",
		s.gen, s.run, err, gerr, s.ctr.ID, snapshot.LabelSuspending, s.gen, ErrOutcomeUnknown)
}

// finishRecorded is step 6 for a generation the ledger recorded from this
// container: the recorded ref blob is written out, no new diff is taken,
// and the suspend finishes as that ref's keptRunning says.
func (s *suspension) finishRecorded(ctx context.Context, rec ledger.Record) (*Result, error) {
	ref, file, err := s.readRef(ctx, rec.Ref, "the recorded generation", s.gen)
	if err != nil {
		return nil, err
	}
	held := rec.State == ledger.StateLive && rec.Holder != nil && rec.Holder.Container == s.who
	if s.fence != 0 && rec.Fence != s.fence {
		// At generation 1 the fence label is set only when the suspend
		// finishes: the holder alone identifies the container.
		held = false
	}
	if ref.KeptRunning && !held {
		return nil, fmt.Errorf("suspend: generation %d of run %q was recorded kept running, but %s no longer holds the run (%s); the task is left as found: %w",
			s.gen, s.run, s.who, describeRecord(rec), ErrRunConflict)
	}
	if s.ctr.Task == snapshot.TaskPaused || s.ctr.Task == snapshot.TaskPausing {
		s.paused = s.now()
	}
	s.res.Ref, s.res.File, s.res.RefBlob, s.res.Finished = ref, file, rec.Ref, true
	return s.finish(ctx, rec)
}

// finish is step 5's "recorded" and step 7: write the ref file, stop the
// task or (kept running) resume it, release the layers of older
// generations, and label the container — or delete it, an incarnation
// whose task was stopped.
func (s *suspension) finish(ctx context.Context, rec ledger.Record) (*Result, error) {
	if err := atomicfile.WriteFile(s.out, s.res.File, 0o644); err != nil {
		return nil, fmt.Errorf("suspend: run %q generation %d is recorded; write the ref file: %w", s.run, s.gen, err)
	}
	faultPoint("written")
	s.res.Record = rec
	labels := map[string]string{
		snapshot.LabelRun: s.run, snapshot.LabelManifest: s.res.Ref.Manifest, snapshot.LabelSuspending: "",
	}
	if s.gen > 1 {
		labels[snapshot.LabelCreated], labels[snapshot.LabelRunUID] = "", ""
	}
	if s.res.Ref.KeptRunning {
		switch s.ctr.Task {
		case snapshot.TaskRunning, snapshot.TaskPausing, snapshot.TaskPaused:
			if err := s.c.ResumeTask(ctx, s.ctr.ID); err != nil {
				return nil, fmt.Errorf("suspend: run %q generation %d is recorded and %s written; resume task of %q: %w", s.run, s.gen, s.out, s.ctr.ID, err)
			}
		}
		s.res.Fence = rec.Fence
		labels[snapshot.LabelFence] = strconv.FormatUint(rec.Fence, 10)
	} else {
		if s.ctr.Task != snapshot.TaskNone {
			if err := s.c.StopTask(ctx, s.ctr.ID); err != nil {
				return nil, fmt.Errorf("suspend: run %q generation %d is recorded and %s written; stop task of %q: %w", s.run, s.gen, s.out, s.ctr.ID, err)
			}
		}
		labels[snapshot.LabelSuspended] = strconv.FormatUint(s.gen, 10)
	}
	if !s.paused.IsZero() {
		s.res.Paused = s.now().Sub(s.paused)
	}
	faultPoint("stop")
	// The stopped container's snapshot becomes its generation's chain
	// snapshot, so a resume on this host extracts nothing (chain.go).
	chained, err := s.commitChain(ctx)
	if err != nil {
		return nil, fmt.Errorf("suspend: run %q generation %d is recorded and %s written; %w", s.run, s.gen, s.out, err)
	}
	s.res.Chained = chained
	faultPoint("chained")
	released, err := s.release(ctx)
	if err != nil {
		return nil, fmt.Errorf("suspend: run %q generation %d is recorded and %s written; release the layers of generations older than the latest %d from lease %s: %w",
			s.run, s.gen, s.out, s.keep, s.res.Lease, err)
	}
	s.res.Released = released
	if err := s.releaseMemory(ctx); err != nil {
		return nil, fmt.Errorf("suspend: run %q generation %d is recorded and %s written; %w", s.run, s.gen, s.out, err)
	}
	faultPoint("released")
	if !s.res.Ref.KeptRunning && s.ctr.Labels[snapshot.LabelRef] != "" {
		// Step 7: an incarnation whose suspend stopped it goes, with its
		// snapshot; its content lives in the layers.
		if err := s.c.DeleteContainer(ctx, s.ctr.ID); err != nil {
			return nil, fmt.Errorf("suspend: run %q generation %d is recorded and %s written; delete incarnation %q: %w", s.run, s.gen, s.out, s.ctr.ID, err)
		}
		s.res.Deleted = true
		return s.res, nil
	}
	if err := s.c.SetContainerLabels(ctx, s.ctr.ID, labels); err != nil {
		return nil, fmt.Errorf("suspend: run %q generation %d is recorded and %s written; label container %q: %w", s.run, s.gen, s.out, s.ctr.ID, err)
	}
	return s.res, nil
}
