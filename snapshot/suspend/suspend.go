package suspend

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Errors of Run, beside snapshot.ErrImageUnresolved (the image does not
// resolve) and snapshot.ErrInvalidRun (the run id is not valid, or the
// container id does not make one); each carries a class
// (internal/exitcode).
var (
	// ErrMismatch: the declaration does not describe the container (its
	// snapshot's parent is not the chain of the image the manifest names,
	// or the reference's digest is not the image's; docs/design.md
	// "Suspend", step 2). Class "manifest-mismatch".
	ErrMismatch = errors.New("the declaration does not describe the container")
	// ErrContainerNotFound: no container with that id in the namespace.
	// Class "bad-input" (a container that does not exist is refused
	// input).
	ErrContainerNotFound = errors.New("container not found")
	// ErrRunConflict: the run lease exists for another container. Class
	// "claim-conflict".
	ErrRunConflict = errors.New("run id already used by another container")
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
	// Run is the run id; "" means snapshot.DefaultRunID(ContainerID).
	Run string
	// Keys sign the ref (at least one): crypto.Signers holding Ed25519
	// keys (envelope.Sign).
	Keys []crypto.Signer
	// Out is the ref file to write; "" means "<run>.ref.json" in the
	// current directory.
	Out string
	// KeepRunning resumes the task after the diff instead of stopping it.
	KeepRunning bool
	// Now returns the current time (time.Now when nil); it sets Created
	// when the run lease is created.
	Now func() time.Time
}

// Result is what Run did.
type Result struct {
	// Ref is the signed SnapshotRef; File its file bytes, also stored as
	// the ref blob RefBlob (media type snapshot.MediaTypeRef) in the
	// content store.
	Ref     *snapshot.Ref
	File    []byte
	RefBlob string
	// Path is the ref file written.
	Path string
	// Lease is the run lease holding the diff, the ref blob and the base.
	Lease string
	// Resumed is true when this call found the run lease already there (a
	// rerun after an interrupted suspend).
	Resumed bool
}

// Run suspends a container: it captures its file system changes into the
// content store and writes a signed SnapshotRef, following docs/design.md
// "Suspend" step by step:
//
//  1. ingest the config (envmanifest.IngestFile with the lockfile and the
//     policy); a refused config is a *envmanifest.RefusedError;
//  2. the container (else ErrContainerNotFound) must be described by the
//     declaration: its snapshot's parent must be identity.ChainID of the
//     diffIDs of the image the manifest's reference resolves to for the
//     host platform, and a digest in the reference must be that image's
//     index or manifest digest (else ErrMismatch; an image that does not
//     resolve is snapshot.ErrImageUnresolved), and the devcontainer.metadata
//     label of its config must pass envmanifest.CheckImageMetadata (else an
//     *envmanifest.ImageMetadataError; no label passes);
//  3. create the run lease snapshot.RunLease(run) first (a rerun finds it
//     and keeps its creation time; a lease made for another container is
//     ErrRunConflict) and hold the base image's content in it; every later
//     write is under it;
//  4. pause a running task (a paused one stays paused), create the zstd
//     rootfs diff of the container's active snapshot, then stop the task
//     (kill, wait, delete) or, with KeepRunning, resume it and record
//     keptRunning: true;
//  5. sign the ref, write it as a blob under the lease, label the container
//     (io.sandbox-resume.run, io.sandbox-resume.manifest), and write the
//     ref file temp → fsync → rename.
//
// An invalid run id, or no run id when the container id does not make one,
// is snapshot.ErrInvalidRun. An interruption at any point leaves no ref
// file or a complete one, and calling Run again with the same run id
// completes the suspension (also when the task was left paused). If the
// diff fails, a task this call paused is resumed. A test can hold the
// process between steps with the environment variable
// SANDBOX_RESUME_TEST_PAUSE_AT (faultpoint.go).
func Run(ctx context.Context, c snapshot.Capturer, req Request) (*Result, error) {
	if req.ContainerID == "" {
		return nil, errors.New("suspend: no container id")
	}
	if len(req.Keys) == 0 {
		return nil, errors.New("suspend: no signing key")
	}
	run := req.Run
	if run == "" {
		var ok bool
		if run, ok = snapshot.DefaultRunID(req.ContainerID); !ok {
			return nil, fmt.Errorf("suspend: container id %q is not a valid run id, so the run id must be given: %w", req.ContainerID, snapshot.ErrInvalidRun)
		}
	} else if !snapshot.ValidRunID(run) {
		return nil, fmt.Errorf("suspend: run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters: %w", run, snapshot.MaxRunIDLen, snapshot.ErrInvalidRun)
	}
	out := req.Out
	if out == "" {
		out = run + ".ref.json"
	}
	now := req.Now
	if now == nil {
		now = time.Now
	}
	policy := slices.Clone(req.Policy)
	if policy == nil {
		policy = []string{}
	}

	// 1. Ingest.
	m, err := envmanifest.IngestFile(req.ConfigPath, envmanifest.Options{Lockfile: req.Lockfile, Reserved: policy})
	if err != nil {
		return nil, err
	}

	// 2. The declaration must describe the container.
	ctr, err := c.Container(ctx, req.ContainerID)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("suspend: container %q: %v: %w", req.ContainerID, err, ErrContainerNotFound)
		}
		return nil, fmt.Errorf("suspend: inspect container %q: %w", req.ContainerID, err)
	}
	host, err := c.Host(ctx)
	if err != nil {
		return nil, fmt.Errorf("suspend: host facts: %w", err)
	}
	base, err := c.ResolveImage(ctx, m.Core.Image)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("suspend: image %s: %v: %w", m.Core.Image, err, snapshot.ErrImageUnresolved)
		}
		return nil, fmt.Errorf("suspend: resolve image %s: %w", m.Core.Image, err)
	}
	if err := describes(m.Core.Image, base, ctr); err != nil {
		return nil, err
	}
	if err := checkImageMetadata(ctx, c, m.Core.Image, base); err != nil {
		return nil, err
	}

	// 3. The run lease first.
	leaseID := snapshot.RunLease(run)
	res := &Result{Lease: leaseID, Path: out}
	created := now().UTC().Truncate(time.Second).Format(time.RFC3339)
	err = c.CreateLease(ctx, leaseID, map[string]string{
		snapshot.LabelRun:       run,
		snapshot.LabelContainer: req.ContainerID,
		snapshot.LabelCreated:   created,
	})
	switch {
	case err == nil:
	case errdefs.IsAlreadyExists(err):
		l, err := c.Lease(ctx, leaseID)
		if err != nil {
			return nil, fmt.Errorf("suspend: run lease %s: %w", leaseID, err)
		}
		if owner := l.Labels[snapshot.LabelContainer]; owner != req.ContainerID {
			return nil, fmt.Errorf("suspend: run lease %s was made for container %q, not %q: %w", leaseID, owner, req.ContainerID, ErrRunConflict)
		}
		if t, err := time.Parse(time.RFC3339, l.Labels[snapshot.LabelCreated]); err == nil {
			created = t.UTC().Format(time.RFC3339)
		}
		res.Resumed = true
	default:
		return nil, fmt.Errorf("suspend: create run lease %s: %w", leaseID, err)
	}
	if err := c.HoldBase(ctx, leaseID, base); err != nil {
		return nil, fmt.Errorf("suspend: hold base image %s in lease %s: %w", base.ManifestDigest, leaseID, err)
	}
	faultPoint("lease")

	// 4. Pause, diff, stop (or resume).
	pausedHere := false
	switch ctr.Task {
	case snapshot.TaskRunning, snapshot.TaskPausing:
		if err := c.PauseTask(ctx, ctr.ID); err != nil {
			return nil, fmt.Errorf("suspend: pause task of %q: %w", ctr.ID, err)
		}
		pausedHere = true
	}
	faultPoint("pause")
	diff, err := c.CreateDiff(ctx, leaseID, ctr)
	if err != nil {
		if pausedHere {
			if rerr := c.ResumeTask(ctx, ctr.ID); rerr != nil {
				err = errors.Join(err, fmt.Errorf("resume task after the failed diff: %w", rerr))
			}
		}
		return nil, fmt.Errorf("suspend: diff of container %q (snapshot %s/%s): %w", ctr.ID, ctr.Snapshotter, ctr.SnapshotKey, err)
	}
	faultPoint("diff")
	kept := false
	switch {
	case req.KeepRunning && (ctr.Task == snapshot.TaskRunning || ctr.Task == snapshot.TaskPausing || ctr.Task == snapshot.TaskPaused):
		if err := c.ResumeTask(ctx, ctr.ID); err != nil {
			return nil, fmt.Errorf("suspend: resume task of %q: %w", ctr.ID, err)
		}
		kept = true
	case ctr.Task != snapshot.TaskNone:
		if err := c.StopTask(ctx, ctr.ID); err != nil {
			return nil, fmt.Errorf("suspend: stop task of %q: %w", ctr.ID, err)
		}
	}

	faultPoint("stop")

	// 5. Ref blob, labels, ref file.
	ref := &snapshot.Ref{
		Schema:      snapshot.RefSchema,
		Run:         run,
		Manifest:    m.Address,
		Core:        m.Core,
		Pinned:      m.IsPinned(),
		Policy:      policy,
		Lockfile:    m.Lockfile,
		Host:        host,
		Base:        base,
		RootfsDiff:  diff,
		KeptRunning: kept,
		Created:     created,
	}
	file, err := snapshot.SignRef(ref, req.Keys...)
	if err != nil {
		return nil, fmt.Errorf("suspend: sign ref: %w", err)
	}
	desc, err := c.WriteBlob(ctx, leaseID, leaseID+"/ref", snapshot.MediaTypeRef, file)
	if err != nil {
		return nil, fmt.Errorf("suspend: write ref blob under lease %s: %w", leaseID, err)
	}
	faultPoint("refblob")
	if err := c.SetContainerLabels(ctx, ctr.ID, map[string]string{snapshot.LabelRun: run, snapshot.LabelManifest: m.Address}); err != nil {
		return nil, fmt.Errorf("suspend: label container %q: %w", ctr.ID, err)
	}
	faultPoint("label")
	if err := atomicfile.WriteFile(out, file, 0o644); err != nil {
		return nil, fmt.Errorf("suspend: %w", err)
	}
	res.Ref, res.File, res.RefBlob = ref, file, desc.Digest.String()
	return res, nil
}

// describes checks docs/design.md "Suspend" step 2 for a resolved image.
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
