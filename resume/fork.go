package resume

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ForkHost is what Fork needs of the host it runs on, as host's roles:
// its identity and namespace (Info: the fork's host, and the namespace
// its suspendedBy names), the content check 9 looks at (Content.BlobSize
// for layer and memory blobs, Content.ReadSpec for the spec, read and
// verified), and the new run's lease (Leases.StoreRef, AddToLease,
// HoldBase), which comes to hold the shared blobs, the base and the fork's
// ref blob. runtime/containerd implements it against a daemon and
// host/memhost in memory.
type ForkHost interface {
	host.Info
	host.Content
	host.Leases
}

// ForkRequest is the input of Fork (docs/design.md "Repin and fork").
//
// RefFile holds the source generation's ref file bytes as read; RefSource
// names it in messages; Trust holds the keys its signatures must verify
// against. Run is the new run's id (--as). WithMemory copies the source
// generation's memory too (--with-memory): the fork then duplicates
// whatever its processes hold. Keys sign the fork's generation 1. Now is
// the clock (time.Now when nil); Rand is where the new run UID's 128 bits
// are read from (crypto/rand.Reader when nil).
type ForkRequest struct {
	RefFile    []byte
	RefSource  string
	Trust      *envelope.KeyRing
	Run        string
	WithMemory bool
	Keys       []crypto.Signer
	Now        func() time.Time
	Rand       io.Reader
}

// ForkResult is what Fork wrote: the new run's generation 1 (Ref, File,
// its digest Digest), the ledger's record of the new run, and the run
// lease holding its content. Memory says whether the fork carries the
// source's memory; Notes are what the operator must be told (memory
// asked for but absent, memory duplicated).
type ForkResult struct {
	Ref    *snapshot.Ref
	File   []byte
	Digest digest.Digest
	Record ledger.Record
	Lease  string
	Memory bool
	Notes  []string
}

// Fork starts a new run on purpose, with lineage, from a verified
// generation of another run (docs/design.md "Repin and fork"). In order,
// each refusal a *CheckError (Check CheckFork) with its class:
//
//  1. Run must be a valid run id (snapshot.ErrInvalidRun) other than the
//     source's (bad-input: a fork is a new run);
//  2. the ref opens with snapshot.OpenRef against Trust (as resume's
//     checks 1–4); it must be a sandbox.snapshot-ref/3 ref (bad-input: a
//     /1 or /2 ref has no run UID for forkedFrom);
//  3. check 9: every layer blob (and, with WithMemory, every memory blob)
//     is present with its recorded size, and the spec blob reads and
//     verifies (snapshot-missing);
//  4. the ledger must accept Suspended(Run, 1): no record, or a purged
//     one (predicted with ledger.Apply before anything is stored;
//     claim-conflict). The source run's record is never read or touched.
//
// Then it signs generation 1 of Run — the source's core, manifest,
// pinned, policy, lockfile, base, layers, spec and runtime, its memory
// only with WithMemory, a new run UID, this host, no parent, fence or
// ancestors, forkedFrom {run, runUID, generation, ref} — stores it under
// Run's run lease, makes that lease hold the layers, the spec, the memory
// blobs copied and the base (the blobs are shared with the source), and
// records Suspended(Run, 1) with ForkedFrom; its suspendedBy names
// "fork:<source run>@<generation>" in Namespace on this host, since no
// container was suspended. The caller writes File.
func Fork(ctx context.Context, h ForkHost, l ledger.Ledger, req ForkRequest) (*ForkResult, error) {
	if !snapshot.ValidRunID(req.Run) {
		return nil, fmt.Errorf("%s: new run id %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters: %w", CheckFork, req.Run, snapshot.MaxRunIDLen, snapshot.ErrInvalidRun)
	}
	ref, err := openForOperator(CheckFork, req.RefFile, req.RefSource, req.Trust)
	if err != nil {
		return nil, err
	}
	if !ref.IsV3() {
		return nil, refusef(CheckFork, ClassBadInput, "%s is a %s ref: only a %s ref carries the run UID a fork's forkedFrom names (resume it and suspend it once more)", sourceName(req.RefSource), ref.Schema, snapshot.RefSchemaV3)
	}
	if req.Run == ref.Run {
		return nil, refusef(CheckFork, ClassBadInput, "the new run id %q is the source run's: a fork is a new run (--as another id)", req.Run)
	}
	res := &ForkResult{Lease: snapshot.RunLease(req.Run)}
	switch {
	case req.WithMemory && ref.Memory == nil:
		res.Notes = append(res.Notes, fmt.Sprintf("generation %d of run %q carries no memory: the fork copies its filesystem only", ref.Generation, ref.Run))
	case req.WithMemory:
		res.Memory = true
		res.Notes = append(res.Notes, fmt.Sprintf("the fork carries the memory of generation %d of run %q: whatever its processes hold in memory (tokens, secrets, sessions, random state) is duplicated in both runs", ref.Generation, ref.Run))
	case ref.Memory != nil:
		res.Notes = append(res.Notes, fmt.Sprintf("generation %d of run %q carries memory; the fork copies its filesystem only (--with-memory copies the memory too)", ref.Generation, ref.Run))
	}

	blobs, err := forkContent(ctx, h, ref, res.Memory)
	if err != nil {
		return nil, err
	}

	now := time.Now
	if req.Now != nil {
		now = req.Now
	}
	t := now().UTC()
	uid, err := snapshot.NewRunUID(req.Rand)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CheckFork, err)
	}
	source := digest.FromBytes(req.RefFile)
	from := &snapshot.ForkedFrom{Run: ref.Run, RunUID: ref.RunUID, Generation: ref.Generation, Ref: source}
	self, err := h.Host(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: host identity: %w", CheckFork, err)
	}
	// No container suspended the fork: suspendedBy names the fork itself,
	// "fork:<source run>@<generation>" in this namespace on this host.
	who := ledger.Container{Host: self.ID, Namespace: h.Namespace(), ID: fmt.Sprintf("fork:%s@%d", ref.Run, ref.Generation)}
	op := ledger.SuspendRequest{
		Run: req.Run, Generation: 1, Ref: digest.FromString("fork prediction"), Container: who, Created: t, RunUID: uid,
		ForkedFrom: &ledger.ForkedFrom{Run: from.Run, RunUID: from.RunUID, Generation: from.Generation, Ref: from.Ref},
	}
	rec, err := l.Get(ctx, req.Run)
	var cur *ledger.Record
	switch {
	case errors.Is(err, ledger.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("%s: read the ledger's record of run %q: %w", CheckFork, req.Run, err)
	default:
		cur = &rec
	}
	if _, _, err := ledger.Apply(cur, op, t); err != nil {
		return nil, refuse(CheckFork, ClassClaimConflict, err)
	}

	next := &snapshot.Ref{
		Schema: snapshot.RefSchemaV3, Run: req.Run, Generation: 1,
		Manifest: ref.Manifest, Core: ref.Core, Pinned: ref.Pinned, Policy: ref.Policy, Lockfile: ref.Lockfile,
		Host: self, Base: ref.Base, Layers: ref.Layers, Spec: ref.Spec, Runtime: ref.Runtime,
		Created: t.Format(time.RFC3339), RunUID: uid, ForkedFrom: from,
	}
	if next.Policy == nil {
		next.Policy = []string{}
	}
	if res.Memory {
		next.Memory = ref.Memory
	}
	file, err := snapshot.SignRef(next, req.Keys...)
	if err != nil {
		return nil, fmt.Errorf("%s: sign generation 1 of run %q: %w", CheckFork, req.Run, err)
	}
	op.Ref = digest.FromBytes(file)
	if err := h.StoreRef(ctx, req.Run, file); err != nil {
		return nil, fmt.Errorf("%s: store the ref blob %s under the run lease %s: %w", CheckFork, op.Ref, res.Lease, err)
	}
	if err := h.AddToLease(ctx, res.Lease, blobs...); err != nil {
		return nil, fmt.Errorf("%s: hold the shared blobs under the run lease %s: %w", CheckFork, res.Lease, err)
	}
	if err := h.HoldBase(ctx, res.Lease, ref.Base); err != nil {
		return nil, fmt.Errorf("%s: hold the base %s under the run lease %s: %w", CheckFork, ref.Base.Name, res.Lease, err)
	}
	if res.Record, err = l.Suspended(ctx, op); err != nil {
		if errdef.Class(err) != nil {
			return nil, refuse(CheckFork, ClassClaimConflict, err)
		}
		return nil, fmt.Errorf("%s: record generation 1 of run %q in the ledger: %w", CheckFork, req.Run, err)
	}
	res.Ref, res.File, res.Digest = next, file, op.Ref
	return res, nil
}

// forkContent is check 9 over the source generation for a fork: every
// layer blob (and memory blob when memory is copied) present with its
// recorded size, the spec blob read and verified. It returns the blobs
// the new run's lease must hold, in ref order (layers, spec, memory).
func forkContent(ctx context.Context, h ForkHost, ref *snapshot.Ref, memory bool) ([]digest.Digest, error) {
	var out []digest.Digest
	check := func(ptr string, d digest.Digest, size int64) error {
		got, err := h.BlobSize(ctx, d)
		switch {
		case errdefs.IsNotFound(err):
			return refuse(CheckFork, ClassSnapshotMissing, fmt.Errorf("%s: blob %s is not in the content store: %w", ptr, d, err))
		case err != nil:
			return fmt.Errorf("%s: %s: blob %s: %w", CheckFork, ptr, d, err)
		case got != size:
			return refusef(CheckFork, ClassSnapshotMissing, "%s: blob %s is %d bytes in the content store, the ref records %d", ptr, d, got, size)
		}
		out = append(out, d)
		return nil
	}
	for i, l := range ref.Layers {
		if err := check(fmt.Sprintf("/ref/layers/%d", i), l.Digest, l.Size); err != nil {
			return nil, err
		}
	}
	if d := ref.Spec; d != nil {
		_, err := h.ReadSpec(ctx, *d)
		switch {
		case errdefs.IsNotFound(err), errors.Is(err, snapshot.ErrBlobCorrupt):
			return nil, refuse(CheckFork, ClassSnapshotMissing, fmt.Errorf("/ref/spec: %w", err))
		case err != nil:
			return nil, fmt.Errorf("%s: /ref/spec: blob %s: %w", CheckFork, d.Digest, err)
		}
		out = append(out, d.Digest)
	}
	if memory && ref.Memory != nil {
		for i, b := range ref.Memory.Blobs {
			if err := check(fmt.Sprintf("/ref/memory/blobs/%d", i), b.Digest, b.Size); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
