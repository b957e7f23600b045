// Package ledger is the run ledger of docs/design.md "The run ledger": one
// record per durable run naming its latest generation, that generation's
// ref and the current holder, changed only by compare-and-swap transitions.
// It decides who may resume a run and who may record its next generation;
// containerd leases only protect content from garbage collection.
//
// # Records and states
//
// A Record is in one of six states: suspended (the latest generation is
// recorded and nobody holds the run), resuming (a resumer claimed it and is
// materializing an incarnation), live (a container holds the run),
// discarded (a tombstone keeping generation, ref, run UID and fence, so the
// run can never be resumed again), purged (the run id, fence, last
// generation, ref and run UID are kept; the run id is free again for a new
// generation 1 with another run UID, from that fence on) and handed-off (a
// tombstone of a run handed over, signed, to another host: docs/design.md
// "Exactly once across hosts").
//
// # Transitions
//
// The rows of the design's transition table are the methods Suspended
// (two rows: generation 1 and generation N+1), Claim, Live, Release,
// Discard, Purge, HandedOff, Received, Recalled, Unwound and Repinned of
// Ledger. The table itself lives in one place, Apply, a pure
// function over the current record; backends only provide atomic
// compare-and-swap storage around it:
//
//	cur := read(run)                        // nil: no record
//	next, changed, err := ledger.Apply(cur, op, now)
//	if err == nil && changed { write-if-unchanged(run, cur, next) }
//
// # Fencing
//
// A record's Fence only grows: every transition that hands the run to a new
// holder writes fence + 1 (Claim, Suspended with keep at generation 1, and
// Recalled); Received writes the larger of the record's and the handoff
// statement's; no transition lowers it, Discard and Purge keep it.
//
// # Exactly once across hosts
//
// A record carries the run's UID (RunUID): a Claim, or a later generation,
// of another run's ref is refused, and a purged run is never claimed again.
// A Claim more than the recorded generation ahead must continue its chain
// (ClaimRequest.Parent, Ancestors), and a generation this ledger never
// recorded is claimed only as a copy (ClaimRequest.Copy): without it the
// refusal is errdef.ErrSuperseded with Code ReasonNotHandedOff. HandedOff,
// Received and Recalled move a run between per-host ledgers with a signed
// handoff (docs/design.md "The run ledger"). A holder names its
// fence in every later transition, so a resumer or container that lost the
// run can never record a generation.
//
// # Errors
//
// Refusals are *Error values carrying a Class (errdef.ErrClaimConflict,
// errdef.ErrSuperseded, errdef.ErrForked, errdef.ErrBadInput — the class names the CLI
// prints), a finer Code for some (ReasonNotHandedOff, …) and the record as
// found. They match errdef.ErrClaimConflict, errdef.ErrSuperseded, errdef.ErrForked and
// errdef.ErrBadInput with errors.Is. A malformed request matches ErrInvalid (and
// errdefs.ErrInvalidArgument); Get of a run without a record matches
// ErrNotFound (and errdefs.ErrNotFound). Any other error is a storage error
// (unreachable, locked, corrupt): the caller fails closed.
//
// Implementations: ledger/fake (in memory), ledger/bolt (the default, one
// file per host), ledger/etcd (a fleet). All of them pass the conformance
// suite in ledger/ledgertest.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
)

// State is the state of a run's record (docs/design.md "The run ledger").
type State string

// The states of a record.
const (
	// StateSuspended: the latest generation is recorded and nobody holds
	// the run; it may be claimed.
	StateSuspended State = "suspended"
	// StateResuming: a resumer claimed the run and is materializing an
	// incarnation; Holder is the resumer process and the container it will
	// create.
	StateResuming State = "resuming"
	// StateLive: a container holds the run (an incarnation, or a runtime
	// container kept running); Holder names it.
	StateLive State = "live"
	// StateDiscarded: a tombstone keeping generation, ref and fence; the
	// run is never resumed again.
	StateDiscarded State = "discarded"
	// StatePurged: the run id, the fence, the last generation, its ref and
	// the run UID are kept. Only Suspended of generation 1 with another run
	// UID accepts it (continuing from its fence); Claim of a purged run is
	// always refused, so an old generation never replays.
	StatePurged State = "purged"
	// StateHandedOff: a tombstone of a run handed over to another host
	// (HandedOff names it), keeping generation, ref, run UID and fence; no
	// generation up to it is claimed here again.
	StateHandedOff State = "handed-off"
)

// Valid reports whether s is one of the six states.
func (s State) Valid() bool {
	switch s {
	case StateSuspended, StateResuming, StateLive, StateDiscarded, StatePurged, StateHandedOff:
		return true
	}
	return false
}

// Container names one container: host id, containerd namespace and
// container id together ("the container" of docs/design.md "The run
// ledger"). Two containers are the same when all three are equal.
type Container struct {
	// Host is the host id (introspected or overridden with --host-id).
	Host string `json:"host"`
	// Namespace is the containerd namespace.
	Namespace string `json:"namespace"`
	// ID is the container id.
	ID string `json:"container"`
}

// String renders the container for messages: container "ID" in namespace
// "NS" on host "HOST".
func (c Container) String() string {
	return fmt.Sprintf("container %q in namespace %q on host %q", c.ID, c.Namespace, c.Host)
}

// Holder is who holds a run. While resuming: the resumer process (PID,
// Start, Boot) and the container it will create; while live: the container
// holding the run, with PID, Start and Boot empty.
type Holder struct {
	Container
	// PID is the resumer's process id; 0 (absent) while live.
	PID int `json:"pid,omitempty"`
	// Start is the resumer process's start time as the resumer reads it
	// (opaque: compared for equality only); empty while live.
	Start string `json:"start,omitempty"`
	// Boot is the resumer host's boot id (opaque); empty while live.
	Boot string `json:"boot,omitempty"`
}

// String renders the holder for messages: the container, and the resumer
// process when there is one.
func (h Holder) String() string {
	if h.PID == 0 && h.Start == "" && h.Boot == "" {
		return h.Container.String()
	}
	return fmt.Sprintf("%s (resumer pid %d, start %q, boot %q)", h.Container, h.PID, h.Start, h.Boot)
}

// SuspendedBy names the container whose suspend wrote the record's latest
// generation.
type SuspendedBy struct {
	Container
	// Created is the container's creation time: a container re-created
	// under the same id is another container.
	Created time.Time `json:"created"`
	// Fence is the fence the container held when it suspended; 0 (absent)
	// at generation 1, when it held none.
	Fence uint64 `json:"fence,omitempty"`
	// Generation is the generation that suspend wrote.
	Generation uint64 `json:"generation"`
}

// HandedOff says to which host a handed-off record's generation was handed
// over, and when (the handoff statement's "created").
type HandedOff struct {
	// To is the host id the run was handed to.
	To string `json:"to"`
	// At is when HandedOff ran (UTC).
	At time.Time `json:"at"`
}

// Received says from which host the record's generation arrived with a
// handoff statement, and when.
type Received struct {
	// From is the host id that handed the run over.
	From string `json:"from"`
	// At is when Received ran (UTC).
	At time.Time `json:"at"`
}

// ForkedFrom is the lineage of a run made by a fork (docs/design.md "Repin
// and fork"): the source run, its run UID, and the generation and ref the
// fork copied.
type ForkedFrom struct {
	// Run is the source run id.
	Run string `json:"run"`
	// RunUID is the source run's UID.
	RunUID string `json:"runUID"`
	// Generation is the source generation.
	Generation uint64 `json:"generation"`
	// Ref is the digest of the source generation's ref file bytes.
	Ref digest.Digest `json:"ref"`
}

// Record is one run's record, exactly as docs/design.md "The run ledger"
// shows it; its JSON form (encoding/json) is the stored form of ledger/bolt
// and ledger/etcd and the record printed by `runs --output json`.
type Record struct {
	// Run is the run id, the record's key.
	Run string `json:"run"`
	// Generation is the latest generation recorded (1 is the first
	// suspend). 0 (absent) only for a tombstone of a run this ledger never
	// recorded and for a purged record.
	Generation uint64 `json:"generation,omitzero"`
	// Ref is the digest of that generation's ref file bytes; empty (absent)
	// when Generation is 0.
	Ref digest.Digest `json:"ref,omitzero"`
	// RunUID is the run's UID (`ruid:<32 hex>`, minted by the suspend of
	// generation 1 and carried by every `/3` ref of the run); empty
	// (absent) while the run's refs are `/2`.
	RunUID string `json:"runUID,omitempty"`
	// State is the record's state.
	State State `json:"state"`
	// HandedOff is set while the record is handed-off.
	HandedOff *HandedOff `json:"handedOff,omitempty"`
	// Received is set when the record's generation arrived by Received.
	Received *Received `json:"received,omitempty"`
	// ForkedFrom is the lineage of a run made by a fork.
	ForkedFrom *ForkedFrom `json:"forkedFrom,omitempty"`
	// Holder is set while resuming or live, nil otherwise.
	Holder *Holder `json:"holder,omitempty"`
	// SuspendedBy names the container whose suspend wrote Generation, when
	// that suspend went through this ledger.
	SuspendedBy *SuspendedBy `json:"suspendedBy,omitempty"`
	// Fence is the fencing token; it only grows.
	Fence uint64 `json:"fence"`
	// Updated is when the last transition that changed the record ran
	// (UTC).
	Updated time.Time `json:"updated"`
}

// Clone returns a deep copy of r (no pointer member is shared).
func (r Record) Clone() Record {
	if r.HandedOff != nil {
		v := *r.HandedOff
		r.HandedOff = &v
	}
	if r.Received != nil {
		v := *r.Received
		r.Received = &v
	}
	if r.ForkedFrom != nil {
		v := *r.ForkedFrom
		r.ForkedFrom = &v
	}
	if r.Holder != nil {
		h := *r.Holder
		r.Holder = &h
	}
	if r.SuspendedBy != nil {
		s := *r.SuspendedBy
		r.SuspendedBy = &s
	}
	return r
}

// SuspendRequest is the Suspended transition: the container Container
// suspended run Run and wrote generation Generation, whose ref file bytes
// have digest Ref.
type SuspendRequest struct {
	// Run is the run id.
	Run string
	// Generation is the generation written: 1 for the first suspend (the
	// run id must be free: no record, or purged), N+1 when the container
	// holds generation N live with fence Fence.
	Generation uint64
	// Ref is the digest of the new generation's ref file bytes.
	Ref digest.Digest
	// Container is the suspended container (host, namespace, id).
	Container Container
	// Created is the container's creation time (recorded in SuspendedBy).
	Created time.Time
	// Fence is the fence the container holds (its fence label); 0 at
	// generation 1.
	Fence uint64
	// Keep is --keep-running: the container stays live and holds the run
	// (at generation 1 it becomes the holder with fence + 1).
	Keep bool
	// RunUID is the new generation's run UID (a `/3` ref's runUID); empty
	// for a `/2` ref. At generation 1 after a purge it must differ from the
	// purged run's; at N+1 it must equal the record's, unless the record
	// has none (a `/3` child of a `/2` parent minted it: it is stored).
	RunUID string
	// ForkedFrom is the lineage of a fork's generation 1; nil otherwise.
	ForkedFrom *ForkedFrom
}

// ClaimRequest is the Claim transition: Holder claims run Run to resume
// generation Generation, whose ref file bytes have digest Ref.
//
// The ledger never looks at processes or containers. A resuming record's
// holder is gone when the backend says so: ledger/bolt and ledger/fake take
// the caller's judgement — GoneHolder is the holder the caller judged gone,
// and the claim passes only if the record still names exactly that holder
// (every field equal, compared inside the transaction); ledger/etcd judges
// by the expiry of the claim's lease and ignores GoneHolder.
type ClaimRequest struct {
	// Run is the run id.
	Run string
	// Generation is the generation to resume (≥ 1).
	Generation uint64
	// Ref is the digest of that generation's ref file bytes.
	Ref digest.Digest
	// Holder is the resumer: its process (PID, Start, Boot) and the
	// container it will create.
	Holder Holder
	// GoneHolder is the resuming holder the caller judged gone (bolt,
	// fake); nil when the caller judged none.
	GoneHolder *Holder
	// TakeOver is --take-over: a live record is taken from its holder (an
	// operator's decision), fencing that holder out.
	TakeOver bool
	// RunUID is the ref's run UID (a `/3` ref); empty for a `/2` ref, which
	// is claimable only over a record without a UID (or no record).
	RunUID string
	// Parent is the ref's parent (the digest of generation N−1's ref file
	// bytes); empty at generation 1. A claim of N over a record at N−1
	// needs Parent = the record's ref (chain continuity).
	Parent digest.Digest
	// Ancestors are the ref's ancestors (a `/3` member: every earlier ref
	// of the run, oldest first). A claim more than one generation ahead of
	// the record needs the record's ref among them.
	Ancestors []digest.Digest
	// Copy accepts a generation this ledger never recorded with this ref
	// (no record, or a lower generation): a copy the source can still
	// resume, on purpose. Without it such a claim is refused as
	// superseded with Code ReasonNotHandedOff.
	Copy bool
}

// HandOffRequest is the HandedOff transition: generation Generation of run
// Run (ref Ref, run UID RunUID) is handed over to host To by this host,
// Host (docs/design.md "Exactly once across hosts").
type HandOffRequest struct {
	// Run is the run id.
	Run string
	// Generation is the generation handed over; the record must be
	// suspended at it.
	Generation uint64
	// Ref is the digest of that generation's ref file bytes.
	Ref digest.Digest
	// RunUID is the ref's run UID; empty (a `/2` ref) is refused as bad
	// input: only a `/3` ref is handed over.
	RunUID string
	// To is the host the run is handed to.
	To string
	// Host is this host's id: To = Host is refused as bad input.
	Host string
}

// ReceiveRequest is the Received transition: a verified handoff statement
// hands generation Generation of run Run from host From to host To (this
// host).
type ReceiveRequest struct {
	// Run is the run id.
	Run string
	// Generation is the generation received.
	Generation uint64
	// Ref is the digest of that generation's ref file bytes.
	Ref digest.Digest
	// RunUID is the statement's (and the ref's) run UID.
	RunUID string
	// Parent is the ref's parent; empty at generation 1.
	Parent digest.Digest
	// Ancestors are the ref's ancestors, oldest first.
	Ancestors []digest.Digest
	// From is the host that handed the run over.
	From string
	// To is the host the statement names: this host.
	To string
	// Fence is the statement's fence: the record's fence becomes the
	// larger of the two.
	Fence uint64
}

// RecallRequest is the Recalled transition: a handoff of generation
// Generation (ref Ref) that the named host never took up is undone by the
// operator.
type RecallRequest struct {
	// Run is the run id.
	Run string
	// Generation is the generation handed off.
	Generation uint64
	// Ref is the digest of its ref file bytes.
	Ref digest.Digest
}

// UnwindRequest is the Unwound transition: the live holder with fence
// Fence, Container, has no task (a memory restore that failed after Live)
// and gives the run back.
type UnwindRequest struct {
	// Run is the run id.
	Run string
	// Fence is the holder's fence.
	Fence uint64
	// Container is the live holder.
	Container Container
}

// RepinRequest is the Repinned transition: a repin wrote generation
// Generation (ref Ref) over the suspended generation Generation−1, its
// parent.
type RepinRequest struct {
	// Run is the run id.
	Run string
	// Generation is the generation the repin wrote (≥ 2).
	Generation uint64
	// Ref is the digest of its ref file bytes.
	Ref digest.Digest
	// Parent is the new ref's parent: the record's ref.
	Parent digest.Digest
	// RunUID is the new ref's run UID: the record's.
	RunUID string
}

// Ledger is the run ledger of docs/design.md "The run ledger". Every
// transition is one atomic compare-and-swap on one run's record; nothing
// is held between calls. Implementations are safe for concurrent use.
//
// Refusals are *Error values matching errdef.ErrClaimConflict, errdef.ErrSuperseded or
// errdef.ErrForked; invalid requests match ErrInvalid; other errors are storage
// errors naming the file or endpoints.
type Ledger interface {
	// Get returns run's record, a purged one included. A run without a
	// record is an error matching ErrNotFound.
	Get(ctx context.Context, run string) (Record, error)

	// List returns every record, purged ones included, sorted by run id
	// (the CLI's `runs` leaves purged ones out).
	List(ctx context.Context) ([]Record, error)

	// Suspended records a new generation written by a suspend and returns
	// the record written. Generation 1: from no record or purged to
	// suspended (Keep: live, holder = the container, fence + 1); any other
	// record is errdef.ErrClaimConflict (the run id is taken). Generation N+1:
	// from live at generation N with this fence and holder = the container,
	// to suspended at N+1 (holder removed, fence kept; Keep: stays live,
	// same holder and fence); anything else is errdef.ErrClaimConflict (this
	// container no longer holds the run). The *Error carries the record as
	// found, whose SuspendedBy lets a rerun recognise its own suspend.
	Suspended(ctx context.Context, req SuspendRequest) (Record, error)

	// Claim moves the run to resuming at req.Generation with req.Ref,
	// req.RunUID and req.Holder, fence + 1, and returns the claim.
	// Refusals, in this order: the record's run UID differs from the
	// ref's, or the run was purged: errdef.ErrSuperseded; a newer generation
	// recorded, the run discarded, or handed off at or above this
	// generation: errdef.ErrSuperseded; this generation recorded with another
	// ref, or a broken chain (req.Parent, req.Ancestors): errdef.ErrForked; a
	// generation this ledger never recorded with this ref, without
	// req.Copy: errdef.ErrSuperseded with Code ReasonNotHandedOff; live (without
	// TakeOver), or resuming with a holder that is not gone:
	// errdef.ErrClaimConflict naming the holder and its host.
	Claim(ctx context.Context, req ClaimRequest) (Claim, error)

	// Live moves a resuming record with this fence to live with holder =
	// container and returns it. Already live with this fence and this
	// container: no change (a retried Live). Anything else — another fence,
	// or no longer resuming — is errdef.ErrClaimConflict: the caller deletes its
	// container. The container is not compared with the one the claim's
	// holder named: the fence alone identifies the claim.
	Live(ctx context.Context, run string, fence uint64, container Container) (Record, error)

	// Release moves a resuming record with this fence back to suspended at
	// its generation and ref, holder removed, fence kept. Otherwise nothing
	// changes and Release returns no error. The record returned is the
	// record after the call (the zero Record when there is none).
	Release(ctx context.Context, run string, fence uint64) (Record, error)

	// Discard turns the record into a discarded tombstone keeping
	// generation, ref and fence, and returns it: from suspended, from no
	// record or purged (a tombstone at generation 0 with no ref), from
	// discarded (no change), and from any state with force. Live or
	// resuming without force is errdef.ErrClaimConflict.
	Discard(ctx context.Context, run string, force bool) (Record, error)

	// Purge turns a discarded record into a purged one keeping the run id,
	// the fence, the last generation, its ref and the run UID, and returns
	// it. Any other record, or none, is errdef.ErrClaimConflict.
	Purge(ctx context.Context, run string) (Record, error)

	// HandedOff turns a suspended record at req.Generation with req.Ref
	// into a handed-off tombstone naming req.To, and returns it; a record
	// already handed off at that generation and ref to req.To is returned
	// unchanged (a retried export). Refusals, in this order: handed off to
	// another host, or live: errdef.ErrClaimConflict; req.To = req.Host, or a ref
	// without a run UID: errdef.ErrBadInput; anything else: errdef.ErrClaimConflict.
	HandedOff(ctx context.Context, req HandOffRequest) (Record, error)

	// Received records a generation handed to this host by a verified
	// handoff statement: suspended at req.Generation with req.Ref and
	// req.RunUID, Received = req.From, fence = max(record, req.Fence). A
	// retried import is no change. Refusals, in this order: another run
	// UID, or purged of this UID: errdef.ErrSuperseded; a newer generation,
	// discarded, or handed off at this generation to a third host:
	// errdef.ErrSuperseded; this generation with another ref, or a broken chain:
	// errdef.ErrForked; live, resuming or any other record: errdef.ErrClaimConflict.
	Received(ctx context.Context, req ReceiveRequest) (Record, error)

	// Recalled turns a handed-off record at req.Generation with req.Ref
	// back into suspended, fence + 1; anything else is errdef.ErrClaimConflict.
	Recalled(ctx context.Context, req RecallRequest) (Record, error)

	// Unwound moves a live record held by req.Container with req.Fence
	// back to suspended at its generation and ref, holder removed, fence
	// kept; anything else is errdef.ErrClaimConflict.
	Unwound(ctx context.Context, req UnwindRequest) (Record, error)

	// Repinned moves a suspended record at req.Generation−1 whose ref is
	// req.Parent and whose run UID is req.RunUID to suspended at
	// req.Generation with req.Ref, fence kept, no holder; anything else is
	// errdef.ErrClaimConflict.
	Repinned(ctx context.Context, req RepinRequest) (Record, error)

	// Close releases what the ledger holds open (a client connection);
	// calls after Close fail.
	Close() error
}

// HolderJudge is implemented by a backend that judges by itself whether a
// resuming record's holder is gone (ledger/etcd: the claim's lease
// expired), so that the caller does not judge processes and containers,
// which it can see only on its own host (docs/design.md "The run ledger",
// a holder that is gone). ledger/bolt and ledger/fake do not implement it:
// their callers judge and pass ClaimRequest.GoneHolder.
type HolderJudge interface {
	// HolderGone reports whether the resuming holder of rec — a record as
	// Get returned it — is gone by the backend's own judgement. It only
	// reads; the Claim transition judges again, atomically.
	HolderGone(ctx context.Context, rec Record) (bool, error)
}

// Claim is a claim on a run returned by Ledger.Claim: the record is
// resuming with the claim's fence. The caller must end every claim with
// Live or Release: a live resumer is never judged gone.
type Claim interface {
	// Record returns the resuming record the claim wrote.
	Record() Record

	// Fence returns the claim's fence token (Record().Fence): the value of
	// the incarnation's fence label and of the verdict's fence.
	Fence() uint64

	// Replaced returns the holder this claim fenced out: a resuming holder
	// that was gone, or a live holder taken over with TakeOver; nil when
	// there was none. The claimer deletes that holder's container.
	Replaced() *Holder

	// Live is Ledger.Live with the claim's run and fence: container, the
	// incarnation created, now holds the run. It may be retried.
	Live(ctx context.Context, container Container) (Record, error)

	// Release is Ledger.Release with the claim's run and fence.
	Release(ctx context.Context) error

	// Lost returns a channel closed when the backend knows the claim is
	// lost before Live or Release (ledger/etcd: its lease expired;
	// ledger/fake: another transition changed the fence or state). A
	// backend that cannot observe a loss (ledger/bolt) never closes it; Live
	// then reports the loss as errdef.ErrClaimConflict.
	Lost() <-chan struct{}
}

// The finer reasons of a refusal (Error.Code): what docs/design.md
// "Hardening" calls `reason` beside `class`.
const (
	// ReasonAnotherRun: the record's run UID is not the ref's.
	ReasonAnotherRun = "another-run"
	// ReasonPurged: the run was purged.
	ReasonPurged = "purged"
	// ReasonDiscarded: the run was discarded.
	ReasonDiscarded = "discarded"
	// ReasonNewerGeneration: a newer generation is recorded.
	ReasonNewerGeneration = "newer-generation"
	// ReasonHandedOff: the generation was handed off to another host.
	ReasonHandedOff = "handed-off"
	// ReasonNotHandedOff: this ledger never recorded the generation with
	// this ref, and the claim is no copy.
	ReasonNotHandedOff = "not-handed-off"
	// ReasonBrokenChain: the ref's parent or ancestors do not reach the
	// record's ref.
	ReasonBrokenChain = "broken-chain"
)

// Sentinel errors of the ledger beside its refusals (every *Error matches
// the errdef class of its Class with errors.Is).
var (
	// ErrNotFound is returned (wrapped) by Get for a run without a record;
	// it also matches errdefs.ErrNotFound.
	ErrNotFound = fmt.Errorf("no ledger record: %w", errdefs.ErrNotFound)
	// ErrInvalid is returned (wrapped) for a malformed request (empty run
	// id, generation 0, ...); it also matches errdefs.ErrInvalidArgument.
	ErrInvalid = fmt.Errorf("invalid ledger request: %w", errdefs.ErrInvalidArgument)
)

// Error is a refused transition: the class, the transition, the run and the
// record as found, and why. It matches the sentinel of its Class with
// errors.Is; use errors.As to read the record.
type Error struct {
	// Class is the refusal class: errdef.ErrClaimConflict,
	// errdef.ErrSuperseded, errdef.ErrForked or errdef.ErrBadInput.
	Class error
	// Code is the finer reason (ReasonNotHandedOff, …); empty when the
	// class says all.
	Code string
	// Op is the transition refused: "suspended", "claim", "live",
	// "release", "discard", "purge", "handed-off", "received", "recalled",
	// "unwound" or "repinned".
	Op string
	// Run is the run id.
	Run string
	// Generation is the generation the request named, 0 when it named
	// none.
	Generation uint64
	// Record is the record as found; nil when there was none.
	Record *Record
	// Reason says what refused, in words (e.g. `generation 3 is recorded`,
	// `the run is live`); Error adds the record and its holder.
	Reason string
}

var _ error = (*Error)(nil)

// Error renders the refusal with the record found, naming its holder and
// the holder's host: `ledger: claim of run "demo-1" generation 2:
// claim-conflict: the run is live (record: live, generation 2, fence 3, held
// by container "c" in namespace "ns" on host "h")`.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ledger: %s of run %q", e.Op, e.Run)
	if e.Generation != 0 {
		fmt.Fprintf(&b, " generation %d", e.Generation)
	}
	fmt.Fprintf(&b, ": %s: %s", e.Class, e.Reason)
	if e.Record != nil {
		fmt.Fprintf(&b, " (record: %s", e.Record.State)
		if e.Record.Generation != 0 {
			fmt.Fprintf(&b, ", generation %d", e.Record.Generation)
		}
		if e.Record.RunUID != "" {
			fmt.Fprintf(&b, ", run UID %s", e.Record.RunUID)
		}
		fmt.Fprintf(&b, ", fence %d", e.Record.Fence)
		if h := e.Record.HandedOff; h != nil {
			fmt.Fprintf(&b, ", handed off to %q at %s", h.To, h.At.Format(time.RFC3339))
		}
		if h := e.Record.Holder; h != nil {
			fmt.Fprintf(&b, ", held by %s", h)
		}
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns e's class; a bad-input refusal also matches
// errdefs.ErrInvalidArgument.
func (e *Error) Unwrap() []error {
	if errors.Is(e.Class, errdef.ErrBadInput) {
		return []error{e.Class, errdefs.ErrInvalidArgument}
	}
	return []error{e.Class}
}

// CodeOf returns the finer reason of a ledger refusal (Error.Code; "" when
// err is none or has none).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// DefaultPath is the default file of the bolt ledger (the global --ledger
// flag and $SANDBOX_RESUME_LEDGER override it).
const DefaultPath = "/var/lib/sandbox-resume/ledger.db"

// DefaultTimeout is how long a transition waits for the ledger (the bolt
// file lock, an etcd quorum) by default: the global --ledger-timeout.
const DefaultTimeout = 10 * time.Second
