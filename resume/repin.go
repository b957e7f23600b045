package resume

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// The Check of the *CheckError values Repin and Fork return.
const (
	CheckRepin = "repin"
	CheckFork  = "fork"
)

// RepinHost is what Repin needs of the host it runs on, as host's roles:
// its identity (Info.Host: the new generation's host), the ref blob of a
// repin recorded before (Content.ReadBlob), and the run lease, which keeps
// the new ref blob (Leases.StoreRef; docs/design.md "Repin and fork":
// nothing in containerd changes but that blob). runtime/containerd
// implements it against a daemon and host/memhost in memory.
type RepinHost interface {
	host.Info
	host.Content
	host.Leases
}

// RepinRequest is the input of Repin (docs/design.md "Repin and fork").
//
// RefFile holds the bytes of generation N's ref file as read; RefSource
// names it in messages. Trust holds the keys its signatures must verify
// against. Config holds the offered, pinned devcontainer.json; ConfigPath
// is its path (lockfile discovery, "./" features); Lockfile an explicit
// lockfile path ("" discovers one). Keys sign generation N+1 (at least
// one Ed25519 crypto.Signer). Now is the clock (time.Now when nil): it
// sets Created.
type RepinRequest struct {
	RefFile    []byte
	RefSource  string
	Trust      *envelope.KeyRing
	Config     []byte
	ConfigPath string
	Lockfile   string
	Keys       []crypto.Signer
	Now        func() time.Time
}

// RepinResult is what Repin wrote: generation N+1 (Ref) and its file
// bytes (File, digest Digest: the ledger's ref, stored under the run
// lease), the ledger's record after Repinned, and the manifest address it
// replaced (From). Finished is true when an earlier repin of the same
// generation with the same declaration had been recorded already: File is
// then that repin's ref, read back from the content store.
type RepinResult struct {
	Ref      *snapshot.Ref
	File     []byte
	Digest   digest.Digest
	Record   ledger.Record
	From     string
	Finished bool
}

// Repin writes the pinned generation N+1 of a run suspended at generation
// N with an unpinned declaration, so that it may resume on another host
// (docs/design.md "Repin and fork"). In order, each refusal a *CheckError
// (Check CheckRepin) with its class:
//
//  1. the ref opens with snapshot.OpenRef against Trust (bad-input,
//     untrusted, tampered as resume's checks 1–4); it must be a
//     sandbox.snapshot-ref/3 ref (a /1 or /2 ref has no run UID to carry:
//     bad-input, resume and suspend it once more) and unpinned (bad-input:
//     nothing to repin); every recorded feature must be addressed by
//     digest (manifest-mismatch naming it: a feature by tag cannot be
//     repinned, its digest was never recorded);
//  2. the offered declaration ingests with the ref's policy and lockfile
//     rules (an *envmanifest.RefusedError inside bad-input); it must be
//     pinned and its core must equal the recorded core but for "image",
//     which must be the recorded name with base.indexDigest (else
//     base.manifestDigest): manifest-mismatch naming each member that
//     differs (RepinMismatch, DiffCores' pointers);
//  3. the ledger's record must be suspended at generation N with this ref
//     and run UID (predicted with ledger.Apply before anything is stored;
//     claim-conflict, the ledger's *ledger.Error inside) — unless it is
//     suspended at N+1 with a ref whose blob (RepinHost.ReadBlob) verifies
//     against Trust, has this parent and run UID, repinnedFrom this ref's
//     address and the offered manifest: a rerun of a repin whose ref file
//     was not written, which returns that ref (Finished) and changes
//     nothing.
//
// Then it signs generation N+1 — the offered core, manifest and pinned;
// the ref's base, layers, spec, runtime, memory, policy and run UID;
// parent N, ancestors extended (snapshot.NextAncestors), repinnedFrom the
// old manifest address, this host, the record's fence (at least 1: a ref
// of generation ≥ 2 records one), keptRunning false — stores it under the
// run lease (RepinHost.StoreRef) and records Repinned(run, N+1, ref): the
// old generation is superseded. The caller writes File (the CLI's --out).
func Repin(ctx context.Context, h RepinHost, l ledger.Ledger, req RepinRequest) (*RepinResult, error) {
	ref, err := openForOperator(CheckRepin, req.RefFile, req.RefSource, req.Trust)
	if err != nil {
		return nil, err
	}
	if !ref.IsV3() {
		return nil, refusef(CheckRepin, ClassBadInput, "%s is a %s ref: only a %s ref carries a run UID to repin (resume it and suspend it once more)", sourceName(req.RefSource), ref.Schema, snapshot.RefSchemaV3)
	}
	if ref.Pinned {
		return nil, refusef(CheckRepin, ClassBadInput, "%s: generation %d of run %q is pinned already (%s): nothing to repin", sourceName(req.RefSource), ref.Generation, ref.Run, ref.Manifest)
	}
	for i, f := range ref.Core.Features {
		if !f.IsPinned() {
			return nil, refusef(CheckRepin, ClassManifestMismatch, "/ref/core/features/%d: feature %q is not addressed by digest: the ref records no digest for it, so the run cannot be repinned", i, f.ID)
		}
	}
	want, err := repinnedCore(ref)
	if err != nil {
		return nil, err
	}
	m, err := envmanifest.Ingest(req.Config, envmanifest.Options{
		Path:            req.ConfigPath,
		Lockfile:        req.Lockfile,
		RequireLockfile: ref.Lockfile != "",
		Reserved:        ref.Policy,
	})
	if err != nil {
		var re *envmanifest.RefusedError
		if errors.As(err, &re) && re.Source == "" {
			re.Source = req.ConfigPath
		}
		return nil, refuse(CheckRepin, ClassBadInput, err)
	}
	if d := DiffCores(&want, &m.Core); len(d) > 0 {
		return nil, refuse(CheckRepin, ClassManifestMismatch, &RepinMismatch{Drift: d, Want: want.Image})
	}
	if !m.IsPinned() { // equal to want, which is pinned: never, but fail closed
		return nil, refusef(CheckRepin, ClassManifestMismatch, "/image: the offered declaration is not pinned (%s)", m.Core.Image)
	}

	parent := digest.FromBytes(req.RefFile)
	gen := ref.Generation + 1
	now := time.Now
	if req.Now != nil {
		now = req.Now
	}
	t := now().UTC()
	op := ledger.RepinRequest{Run: ref.Run, Generation: gen, Parent: parent, RunUID: ref.RunUID}
	rec, err := l.Get(ctx, ref.Run)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		_, _, err = ledger.Apply(nil, withRef(op), t)
		return nil, refuse(CheckRepin, ClassClaimConflict, err)
	case err != nil:
		return nil, fmt.Errorf("%s: read the ledger's record of run %q: %w", CheckRepin, ref.Run, err)
	}
	if _, _, err := ledger.Apply(&rec, withRef(op), t); err != nil {
		if done := recordedRepin(ctx, h, req.Trust, rec, op, ref.Manifest, m.Address); done != nil {
			return done, nil
		}
		return nil, refuse(CheckRepin, ClassClaimConflict, err)
	}
	self, err := h.Host(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: host identity: %w", CheckRepin, err)
	}

	next := *ref
	next.Generation, next.Parent = gen, parent
	next.Ancestors = snapshot.NextAncestors(ref, parent)
	next.Core, next.Manifest, next.Pinned, next.Lockfile = m.Core, m.Address, true, m.Lockfile
	next.Host = self
	next.Fence = max(rec.Fence, 1)
	next.KeptRunning = false
	next.Created = t.Format(time.RFC3339)
	next.RepinnedFrom = ref.Manifest
	next.ForkedFrom = nil
	file, err := snapshot.SignRef(&next, req.Keys...)
	if err != nil {
		return nil, fmt.Errorf("%s: sign generation %d of run %q: %w", CheckRepin, gen, ref.Run, err)
	}
	op.Ref = digest.FromBytes(file)
	if err := h.StoreRef(ctx, ref.Run, file); err != nil {
		return nil, fmt.Errorf("%s: store the ref blob %s under the run lease of %q: %w", CheckRepin, op.Ref, ref.Run, err)
	}
	rec, err = l.Repinned(ctx, op)
	if err != nil {
		if errdef.Class(err) != nil {
			return nil, refuse(CheckRepin, ClassClaimConflict, err)
		}
		return nil, fmt.Errorf("%s: record generation %d of run %q in the ledger: %w", CheckRepin, gen, ref.Run, err)
	}
	return &RepinResult{Ref: &next, File: file, Digest: op.Ref, Record: rec, From: ref.Manifest}, nil
}

// withRef fills a prediction's Ref with a placeholder digest: the new
// ref is signed only after the prediction passed, and Apply checks only
// its syntax.
func withRef(op ledger.RepinRequest) ledger.RepinRequest {
	op.Ref = digest.FromString("repin prediction")
	return op
}

// repinnedCore is the core a repin of ref accepts: the recorded core with
// "image" the recorded name carrying base.indexDigest, else
// base.manifestDigest (docs/design.md "Repin and fork"). A recorded image
// that carries a digest already keeps it.
func repinnedCore(ref *snapshot.Ref) (envmanifest.Core, error) {
	c := ref.Core
	named, err := reference.ParseNormalizedNamed(c.Image)
	if err != nil {
		return c, refusef(CheckRepin, ClassBadInput, "/ref/core/image: %q is not an image reference: %v", c.Image, err)
	}
	if _, ok := named.(reference.Digested); ok {
		return c, nil
	}
	d := ref.Base.Target()
	pinned, err := reference.WithDigest(named, d)
	if err != nil {
		return c, refusef(CheckRepin, ClassBadInput, "/ref/base: digest %q: %v", d, err)
	}
	c.Image = pinned.String()
	return c, nil
}

// RepinMismatch is the offered declaration of a repin differing from what
// the ref allows (docs/design.md "Repin and fork": only the image may
// change, to the recorded digest): Drift lists the members (pointers into
// the allowed core), Want the image reference it must name.
type RepinMismatch struct {
	Drift []DriftEntry
	Want  string
}

// Error names every member that differs: "/image: offered X, the ref
// records Y (base.indexDigest); /containerEnv/A: …".
func (e *RepinMismatch) Error() string {
	parts := make([]string, 0, len(e.Drift))
	for _, d := range e.Drift {
		switch {
		case d.Pointer == "/image":
			parts = append(parts, fmt.Sprintf("/image: offered %s, a repin must name %s (the digest the ref recorded)", d.Offered, e.Want))
		case d.Offered == nil:
			parts = append(parts, fmt.Sprintf("%s: recorded %s is missing (only the image may change)", d.Pointer, d.Recorded))
		case d.Recorded == nil:
			parts = append(parts, fmt.Sprintf("%s: offered %s is not recorded (only the image may change)", d.Pointer, d.Offered))
		default:
			parts = append(parts, fmt.Sprintf("%s: offered %s, recorded %s (only the image may change)", d.Pointer, d.Offered, d.Recorded))
		}
	}
	return "the offered declaration is not the recorded one pinned: " + strings.Join(parts, "; ")
}

// openForOperator opens a ref file for repin or fork with snapshot.OpenRef
// and classifies a failure as resume's checks 1–4 do: a file that does not
// parse or has the wrong members is bad-input, an untrusted signature
// untrusted, a manifest that is not its core's address tampered.
func openForOperator(check string, file []byte, source string, trust *envelope.KeyRing) (*snapshot.Ref, error) {
	ref, err := snapshot.OpenRef(file, trust)
	if err == nil {
		return ref, nil
	}
	err = fmt.Errorf("%s: %w", sourceName(source), err)
	class := ClassBadInput
	var oe *snapshot.OpenError
	if errors.As(err, &oe) {
		switch oe.Step {
		case snapshot.StepSignature:
			class = ClassUntrusted
		case snapshot.StepIntegrity:
			class = ClassTampered
		}
	}
	return nil, refuse(check, class, err)
}

func sourceName(source string) string {
	if source == "" {
		return "ref file"
	}
	return source
}

// recordedRepin returns the repin rec records when it is the one this
// request would write — suspended at op.Generation, its ref blob readable
// here and verified against trust, with op's parent and run UID,
// repinnedFrom from and manifest address — else nil.
func recordedRepin(ctx context.Context, h RepinHost, trust *envelope.KeyRing, rec ledger.Record, op ledger.RepinRequest, from, address string) *RepinResult {
	if rec.State != ledger.StateSuspended || rec.Generation != op.Generation || rec.RunUID != op.RunUID {
		return nil
	}
	file, err := h.ReadBlob(ctx, rec.Ref)
	if err != nil {
		return nil
	}
	r, err := snapshot.OpenRef(file, trust)
	if err != nil || r.Run != op.Run || r.Generation != op.Generation || r.Parent != op.Parent || r.RunUID != op.RunUID ||
		r.RepinnedFrom != from || r.Manifest != address {
		return nil
	}
	return &RepinResult{Ref: r, File: file, Digest: rec.Ref, Record: rec, From: from, Finished: true}
}
