package suspend

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Errors of Run, beside snapshot.ErrImageUnresolved (the image does not
// resolve), snapshot.ErrInvalidRun (the run id is not valid, or the
// container id does not make one) and the ledger's refusals (which also
// match ErrRunConflict); each carries a class (internal/exitcode).
var (
	// ErrMismatch: the declaration does not describe the container (its
	// snapshot's parent is not the chain of the image the manifest names,
	// or the reference's digest is not the image's; docs/design.md
	// "Suspend", step 3). Class "manifest-mismatch".
	ErrMismatch = errors.New("the declaration does not describe the container")
	// ErrContainerNotFound: no container with that id in the namespace.
	// Class "bad-input" (a container that does not exist is refused
	// input).
	ErrContainerNotFound = errors.New("container not found")
	// ErrRunConflict: the run id is taken (the ledger has a record of it, a
	// tombstone included, or its run lease was made for another
	// container), the ledger refused to record the generation, or the
	// container's interrupted suspend is not this run's to finish.
	// Class "claim-conflict".
	ErrRunConflict = errors.New("run id already used by another container")
	// ErrAlreadySuspended: the container carries the suspended label: a
	// suspend already stopped it (docs/design.md "Suspend", step 2). Class
	// "claim-conflict".
	ErrAlreadySuspended = errors.New("container already suspended")
	// ErrNeedsGenerations: the container carries a fence label (it holds a
	// resumed run), and suspending a resumed run needs generations, which
	// this version does not write (docs/design.md "Suspend"). Class
	// "bad-input".
	ErrNeedsGenerations = errors.New("suspending a resumed run needs generations")
	// ErrRunMismatch: the run id asked for is not the run the container is
	// labelled with. Class "bad-input".
	ErrRunMismatch = errors.New("run id is not the container's run")
	// ErrSnapshotMissing: the ref blob of a recorded generation that a
	// rerun must write out is absent from the content store or has another
	// digest. Class "snapshot-missing".
	ErrSnapshotMissing = errors.New("recorded ref blob missing")
	// ErrOutcomeUnknown: the ledger did not answer whether the generation
	// was recorded, not even when read back. The task is left paused and
	// the container labelled suspending, so that a rerun decides
	// (docs/design.md "Suspend", step 5). Class "internal".
	ErrOutcomeUnknown = errors.New("whether the ledger recorded the generation is unknown")
)

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
	// envmanifest.LoadPolicy): ingestion refuses those names and the ref
	// records the list. nil is recorded as [].
	Policy []string
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
	// ledger's fence is on its snapshot.LabelFence label).
	KeepRunning bool
	// Now returns the current time (time.Now when nil); it sets Created
	// when the run lease is created.
	Now func() time.Time
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
	// Lease is the run lease holding the layer, the spec blob, the ref
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
	// Resumed is true when this call found the run lease already there (a
	// rerun after an interrupted suspend, or after one the ledger refused).
	Resumed bool
	// Finished is true when this call finished an interrupted suspend
	// whose generation the ledger had recorded: it wrote the recorded ref
	// blob and took no new diff.
	Finished bool
}

// Run suspends a container as generation 1 of a run, following
// docs/design.md "Suspend" step by step:
//
//  1. ingest the config (envmanifest.IngestFile with the lockfile and the
//     policy); a refused config is a *envmanifest.RefusedError;
//  2. read the container (else ErrContainerNotFound) and its labels: a
//     container labelled snapshot.LabelSuspending is a rerun of an
//     interrupted suspend (step 6 below); one labelled
//     snapshot.LabelSuspended is ErrAlreadySuspended; one labelled
//     snapshot.LabelFence is ErrNeedsGenerations; any other is generation
//     1 of the run, whose id must be free in the ledger (no record, or a
//     purged one; else ErrRunConflict, before anything is paused);
//  3. the declaration must describe the container: its snapshot's parent
//     is identity.ChainID of the diffIDs of the image the manifest's
//     reference resolves to for the host platform, and a digest in the
//     reference is that image's index or manifest digest (else
//     ErrMismatch; an image that does not resolve is
//     snapshot.ErrImageUnresolved), and the devcontainer.metadata label of
//     its config must pass envmanifest.CheckImageMetadata (else an
//     *envmanifest.ImageMetadataError; no label passes);
//  4. create the run lease snapshot.RunLease(run) first (a rerun finds it
//     and keeps its creation time; a lease made for another container is
//     ErrRunConflict) and hold the base image's content in it; every later
//     write is under it;
//  5. label the container snapshot.LabelSuspending = 1 and LabelRun; pause
//     a running task (a paused one stays paused); store the zstd layer of
//     the container's active snapshot, its runtime spec (the exact bytes,
//     media type snapshot.MediaTypeSpec) and the signed ref
//     (snapshot.RefSchema, generation 1); then record it in the ledger
//     (ledger.Ledger.Suspended) while the task is still paused:
//     - recorded: write the ref file temp → fsync → rename, then with
//     KeepRunning resume the task and label LabelManifest and LabelFence
//     (the fence the ledger issued), else stop the task (kill, wait,
//     delete) and label LabelManifest and LabelSuspended; the
//     LabelSuspending label goes in the same update;
//     - refused (a *ledger.Error, also matching ErrRunConflict), or failed
//     without the generation recorded (read back with Get): resume a task
//     this suspend paused, restore the labels, write no ref file;
//     - unknown (the read-back fails too): leave the task paused and the
//     label set; ErrOutcomeUnknown.
//
// A rerun (step 6), for a container labelled LabelSuspending = 1: when the
// ledger's record is at generation 1 and its SuspendedBy is this container
// (host, namespace, id, creation time), Run writes the recorded ref blob
// (read by the record's digest: absent or different is
// ErrSnapshotMissing) to Out and takes no new diff, finishing as that
// ref's keptRunning says, whatever KeepRunning is: stop the task; or
// resume it, but only while the record is live with this container as
// holder (else ErrRunConflict, the task left paused). With no record the
// generation was not recorded and Run starts again at step 3, reusing the
// stored blobs. Anything else is ErrRunConflict, the container left as
// found.
//
// An invalid run id, or no run id when the container id does not make one,
// is snapshot.ErrInvalidRun. A crash at any point leaves no ref file or a
// complete one, and calling Run again completes the suspension. A test can
// hold the process between steps with the environment variable
// SANDBOX_RESUME_TEST_PAUSE_AT in a binary built with -tags faultpoint
// (faultpoint.go).
func Run(ctx context.Context, c snapshot.Capturer, l ledger.Ledger, req Request) (*Result, error) {
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
	s := &suspension{c: c, l: l, req: req, now: req.Now}
	if s.now == nil {
		s.now = time.Now
	}
	s.policy = slices.Clone(req.Policy)
	if s.policy == nil {
		s.policy = []string{}
	}
	return s.suspend(ctx)
}

// suspension is one call of Run.
type suspension struct {
	c      snapshot.Capturer
	l      ledger.Ledger
	req    Request
	now    func() time.Time
	policy []string

	m       *envmanifest.Manifest
	ctr     snapshot.Container
	host    snapshot.Host
	who     ledger.Container
	run     string
	gen     uint64
	rerun   bool // the container carries LabelSuspending = gen
	out     string
	res     *Result
	paused  time.Time // when this call paused the task, or found it paused
	ownTask bool      // the task is paused by a suspend of this run: undo resumes it
}

func (s *suspension) suspend(ctx context.Context) (*Result, error) {
	// 1. Ingest.
	m, err := envmanifest.IngestFile(s.req.ConfigPath, envmanifest.Options{Lockfile: s.req.Lockfile, Reserved: s.policy})
	if err != nil {
		return nil, err
	}
	s.m = m

	// 2. The container, its labels, and which generation.
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
	s.out = s.req.Out
	if s.out == "" {
		s.out = DefaultOut(s.run, s.gen)
	}
	s.res = &Result{Lease: snapshot.RunLease(s.run), Path: s.out}
	rec, err := s.l.Get(ctx, s.run)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("suspend: run %q: read the ledger: %w", s.run, err)
	case s.rerun && rec.Generation >= s.gen:
		if rec.Generation == s.gen && s.suspendedByThis(rec) {
			return s.finishRecorded(ctx, rec)
		}
		return nil, fmt.Errorf("suspend: %s carries %s=%d, but %s: the interrupted suspend is not this container's to finish: %w",
			s.who, snapshot.LabelSuspending, s.gen, describeRecord(rec), ErrRunConflict)
	case s.rerun:
		// The record is below G: G was not recorded; start again.
	case rec.State != ledger.StatePurged:
		return nil, fmt.Errorf("suspend: run %q: the run id is taken: %s: %w", s.run, describeRecord(rec), ErrRunConflict)
	}

	// 3. The declaration must describe the container.
	base, err := s.c.ResolveImage(ctx, m.Core.Image)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("suspend: image %s: %v: %w", m.Core.Image, err, snapshot.ErrImageUnresolved)
		}
		return nil, fmt.Errorf("suspend: resolve image %s: %w", m.Core.Image, err)
	}
	if err := describes(m.Core.Image, base, s.ctr); err != nil {
		return nil, err
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
	if err := s.c.SetContainerLabels(ctx, s.ctr.ID, map[string]string{
		snapshot.LabelSuspending: strconv.FormatUint(s.gen, 10), snapshot.LabelRun: s.run,
	}); err != nil {
		return nil, fmt.Errorf("suspend: label container %q %s=%d: %w", s.ctr.ID, snapshot.LabelSuspending, s.gen, err)
	}
	undoLabels := map[string]string{snapshot.LabelSuspending: "", snapshot.LabelRun: before}
	faultPoint("labelled")
	if err := s.pause(ctx); err != nil {
		return nil, s.undo(ctx, err, undoLabels)
	}
	faultPoint("pause")
	layer, err := s.c.CreateDiff(ctx, s.res.Lease, s.ctr)
	if err != nil {
		return nil, s.undo(ctx, fmt.Errorf("suspend: diff of container %q (snapshot %s/%s): %w", s.ctr.ID, s.ctr.Snapshotter, s.ctr.SnapshotKey, err), undoLabels)
	}
	faultPoint("diff")
	specDesc, err := s.c.WriteBlob(ctx, s.res.Lease, s.res.Lease+"/spec", snapshot.MediaTypeSpec, s.ctr.Spec)
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
		Layers:      []snapshot.Layer{layer},
		Spec:        &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: specDesc.Digest, Size: specDesc.Size},
		Runtime:     &runtime,
		KeptRunning: s.req.KeepRunning,
		Created:     created,
	}
	file, err := snapshot.SignRef(ref, s.req.Keys...)
	if err != nil {
		return nil, s.undo(ctx, fmt.Errorf("suspend: sign ref: %w", err), undoLabels)
	}
	desc, err := s.c.WriteBlob(ctx, s.res.Lease, s.res.Lease+"/ref", snapshot.MediaTypeRef, file)
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

// which reads the container's labels (docs/design.md "Suspend", step 2):
// it sets the generation, whether this is a rerun, and the run id.
func (s *suspension) which() error {
	labels := s.ctr.Labels
	label := labels[snapshot.LabelRun]
	switch {
	case labels[snapshot.LabelSuspending] != "":
		g, err := strconv.ParseUint(labels[snapshot.LabelSuspending], 10, 64)
		if err != nil || g == 0 {
			return fmt.Errorf("suspend: container %q: label %s=%q is not a generation: %w", s.ctr.ID, snapshot.LabelSuspending, labels[snapshot.LabelSuspending], ErrRunConflict)
		}
		if g > 1 {
			return fmt.Errorf("suspend: container %q carries %s=%d: %w", s.ctr.ID, snapshot.LabelSuspending, g, ErrNeedsGenerations)
		}
		s.gen, s.rerun = g, true
	case labels[snapshot.LabelSuspended] != "":
		return fmt.Errorf("suspend: container %q carries %s=%s: a suspend stopped it already (its run %q): %w",
			s.ctr.ID, snapshot.LabelSuspended, labels[snapshot.LabelSuspended], label, ErrAlreadySuspended)
	case labels[snapshot.LabelFence] != "":
		return fmt.Errorf("suspend: container %q carries %s=%s (it holds run %q): %w", s.ctr.ID, snapshot.LabelFence, labels[snapshot.LabelFence], label, ErrNeedsGenerations)
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
// this container (host, namespace, id and creation time) at s.gen.
func (s *suspension) suspendedByThis(rec ledger.Record) bool {
	by := rec.SuspendedBy
	return by != nil && by.Container == s.who && by.Created.Equal(s.ctr.Created) && by.Generation == s.gen
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

// lease creates the run lease (or finds this container's) and holds the
// base in it; it returns the ref's creation time.
func (s *suspension) lease(ctx context.Context, base snapshot.Base) (string, error) {
	id := s.res.Lease
	created := s.now().UTC().Truncate(time.Second).Format(time.RFC3339)
	err := s.c.CreateLease(ctx, id, map[string]string{
		snapshot.LabelRun:       s.run,
		snapshot.LabelContainer: s.ctr.ID,
		snapshot.LabelCreated:   created,
	})
	switch {
	case err == nil:
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
		s.res.Resumed = true
	default:
		return "", fmt.Errorf("suspend: create run lease %s: %w", id, err)
	}
	if err := s.c.HoldBase(ctx, id, base); err != nil {
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
		Run: s.run, Generation: s.gen, Ref: ref, Container: s.who, Created: s.ctr.Created, Keep: s.req.KeepRunning,
	})
	if err == nil {
		return rec, nil
	}
	if ledger.ClassOf(err) != "" {
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
	file, err := s.c.ReadBlob(ctx, rec.Ref)
	switch {
	case errdefs.IsNotFound(err), errdefs.IsDataLoss(err):
		return nil, fmt.Errorf("suspend: run %q generation %d: the recorded ref blob %s: %v: %w", s.run, s.gen, rec.Ref, err, ErrSnapshotMissing)
	case err != nil:
		return nil, fmt.Errorf("suspend: run %q generation %d: read the recorded ref blob %s: %w", s.run, s.gen, rec.Ref, err)
	}
	ref, err := snapshot.OpenRefUnsafe(file)
	if err != nil {
		return nil, fmt.Errorf("suspend: run %q generation %d: the recorded ref blob %s: %w", s.run, s.gen, rec.Ref, err)
	}
	if ref.Run != s.run || ref.Generation != s.gen {
		return nil, fmt.Errorf("suspend: the recorded ref blob %s is run %q generation %d, not %q generation %d: %w", rec.Ref, ref.Run, ref.Generation, s.run, s.gen, ErrSnapshotMissing)
	}
	if ref.KeptRunning {
		held := rec.State == ledger.StateLive && rec.Holder != nil && rec.Holder.Container == s.who
		if f := s.ctr.Labels[snapshot.LabelFence]; f != "" && f != strconv.FormatUint(rec.Fence, 10) {
			held = false
		}
		if !held {
			return nil, fmt.Errorf("suspend: generation %d of run %q was recorded kept running, but %s no longer holds the run (%s); the task is left as found: %w",
				s.gen, s.run, s.who, describeRecord(rec), ErrRunConflict)
		}
	}
	if s.ctr.Task == snapshot.TaskPaused || s.ctr.Task == snapshot.TaskPausing {
		s.paused = s.now()
	}
	s.res.Ref, s.res.File, s.res.RefBlob, s.res.Finished = ref, file, rec.Ref, true
	return s.finish(ctx, rec)
}

// finish is step 5's "recorded": write the ref file, then stop the task
// or (kept running) resume it, and label the container.
func (s *suspension) finish(ctx context.Context, rec ledger.Record) (*Result, error) {
	if err := atomicfile.WriteFile(s.out, s.res.File, 0o644); err != nil {
		return nil, fmt.Errorf("suspend: run %q generation %d is recorded; write the ref file: %w", s.run, s.gen, err)
	}
	faultPoint("written")
	s.res.Record = rec
	labels := map[string]string{
		snapshot.LabelRun: s.run, snapshot.LabelManifest: s.res.Ref.Manifest, snapshot.LabelSuspending: "",
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
	if err := s.c.SetContainerLabels(ctx, s.ctr.ID, labels); err != nil {
		return nil, fmt.Errorf("suspend: run %q generation %d is recorded and %s written; label container %q: %w", s.run, s.gen, s.out, s.ctr.ID, err)
	}
	return s.res, nil
}

// describes checks docs/design.md "Suspend" step 3 for a resolved image.
func describes(image string, base snapshot.Base, ctr snapshot.Container) error {
	want := ""
	if len(base.DiffIDs) > 0 {
		want = identity.ChainID(base.DiffIDs).String()
	}
	if ctr.ParentChainID != want {
		return fmt.Errorf("suspend: container %q: snapshot %s/%s has parent %q, but %s (manifest %s) has chain ID %q: %w",
			ctr.ID, ctr.Snapshotter, ctr.SnapshotKey, ctr.ParentChainID, image, base.ManifestDigest, want, ErrMismatch)
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return fmt.Errorf("suspend: image %q: %w", image, err)
	}
	if d, ok := named.(reference.Digested); ok {
		if d.Digest() != base.ManifestDigest && d.Digest() != base.IndexDigest {
			return fmt.Errorf("suspend: image %s: its digest is neither the resolved index %q nor manifest %q: %w",
				image, base.IndexDigest, base.ManifestDigest, ErrMismatch)
		}
	}
	return nil
}
