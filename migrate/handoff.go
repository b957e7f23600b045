package migrate

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// The handoff statement (docs/design.md "Exactly once across hosts"): a
// signed document handing one generation of a run over to one named host.
const (
	// MediaTypeHandoff is the media type of the statement, the artifact's
	// last layer when there is one.
	MediaTypeHandoff = "application/vnd.sandbox-resume.handoff.v1+json"
	// MemberHandoff is the statement's inner member in its signed wrapper
	// {"handoff": {…}, "signatures": […]}.
	MemberHandoff = "handoff"
	// SchemaHandoff is the statement's "schema".
	SchemaHandoff = "sandbox.handoff/1"
)

// Statement is the inner document of a handoff statement: generation
// Generation of run Run (run UID RunUID, ref file digest Ref) is handed
// from host From to host To with fence Fence, at Created (the handing-off
// record's handedOff.at, RFC 3339 with nanoseconds, UTC), so that a
// retried export signs the same bytes.
type Statement struct {
	Schema     string        `json:"schema"`
	Run        string        `json:"run"`
	RunUID     string        `json:"runUID"`
	Generation uint64        `json:"generation"`
	Ref        digest.Digest `json:"ref"`
	From       string        `json:"from"`
	To         string        `json:"to"`
	Fence      uint64        `json:"fence"`
	Created    string        `json:"created"`
}

// ErrStatementRefused is wrapped when a handoff statement cannot be used
// whatever its signature says: it does not decode, or it names another run,
// run UID, generation or ref than the artifact's ref. It wraps
// ErrArtifactRefused (class "bad-input", exit 2).
var ErrStatementRefused = fmt.Errorf("handoff statement refused: %w", ErrArtifactRefused)

// SignStatement returns the signed statement file's bytes:
// envelope.Sign(MemberHandoff, JCS(st), key). Ed25519 is deterministic and
// every member of st is fixed by the ledger record, so the same statement
// and key always give the same bytes.
func SignStatement(st Statement, key crypto.Signer) ([]byte, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("handoff statement: %w", err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("handoff statement: %w", err)
	}
	return envelope.Sign(MemberHandoff, canon, key)
}

// OpenStatement parses a signed handoff statement and verifies it against
// trust before reading any of its fields: a wrapper that does not parse or
// a statement that does not decode strictly (unknown or missing members,
// another schema, empty fields, a created that is not RFC 3339) wraps
// ErrStatementRefused; a missing, invalid or untrusted signature wraps
// envelope.ErrSignature (class "untrusted").
func OpenStatement(data []byte, trust *envelope.KeyRing) (*Statement, error) {
	doc, err := envelope.Parse(data, MemberHandoff)
	if err != nil {
		return nil, fmt.Errorf("handoff statement: %v: %w", err, ErrStatementRefused)
	}
	if err := doc.Verify(trust); err != nil {
		return nil, fmt.Errorf("handoff statement: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc.Canonical))
	dec.DisallowUnknownFields()
	var st Statement
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("handoff statement: %v: %w", err, ErrStatementRefused)
	}
	var missing string
	switch {
	case st.Schema != SchemaHandoff:
		return nil, fmt.Errorf("handoff statement: /%s/schema %q, want %q: %w", MemberHandoff, st.Schema, SchemaHandoff, ErrStatementRefused)
	case !snapshot.ValidRunID(st.Run):
		missing = "run"
	case st.RunUID == "":
		missing = "runUID"
	case st.Generation == 0:
		missing = "generation"
	case st.Ref.Validate() != nil:
		missing = "ref"
	case st.From == "":
		missing = "from"
	case st.To == "":
		missing = "to"
	}
	if missing != "" {
		return nil, fmt.Errorf("handoff statement: /%s/%s is missing or invalid: %w", MemberHandoff, missing, ErrStatementRefused)
	}
	if _, err := time.Parse(time.RFC3339Nano, st.Created); err != nil {
		return nil, fmt.Errorf("handoff statement: /%s/created %q: %v: %w", MemberHandoff, st.Created, err, ErrStatementRefused)
	}
	return &st, nil
}

// checkStatement checks that a verified statement is about the artifact's
// verified ref (run, run UID, generation, ref file digest), else
// ErrStatementRefused naming both.
func checkStatement(st *Statement, ref *snapshot.Ref, refFile []byte) error {
	dg := digest.FromBytes(refFile)
	if st.Run != ref.Run || st.RunUID != ref.RunUID || st.Generation != uint64(generationOf(ref)) || st.Ref != dg {
		return fmt.Errorf("handoff statement names run %q (run UID %s) generation %d ref %s, the artifact's ref is run %q (run UID %q) generation %d ref %s: %w",
			st.Run, st.RunUID, st.Generation, st.Ref, ref.Run, ref.RunUID, generationOf(ref), dg, ErrStatementRefused)
	}
	return nil
}

// Handoff is what export and push need to hand a run over (WithHandoff):
// the run ledger of this host, this host's id, the host the run is handed
// to, and the key signing the statement.
type Handoff struct {
	Ledger ledger.Ledger
	Host   string
	To     string
	Key    crypto.Signer
}

// WithHandoff makes Export, ExportFile and Push hand the run over to h.To
// (docs/design.md "Exactly once across hosts"): HandedOff runs on h.Ledger
// first (a retried handoff to the same host is no change), then the signed
// statement goes in as the artifact's last layer.
func WithHandoff(h *Handoff) Option {
	return func(o *options) { o.handoff = h }
}

// Receiver is what import and pull need to take a handed-over run
// (WithReceiver): this host's run ledger and id, or, when Ledger is nil,
// Open, which returns both and is called only for an artifact that carries
// a statement (an import without one needs neither).
type Receiver struct {
	Ledger ledger.Ledger
	Host   string
	Open   func(ctx context.Context) (ledger.Ledger, string, error)
}

// resolve fills Ledger and Host through Open when they are not set.
func (r *Receiver) resolve(ctx context.Context) error {
	if r.Ledger != nil || r.Open == nil {
		return nil
	}
	l, host, err := r.Open(ctx)
	if err != nil {
		return err
	}
	r.Ledger, r.Host = l, host
	return nil
}

// WithReceiver gives Import, ImportFile and Pull this host's ledger and id:
// an artifact carrying a handoff statement that names this host then runs
// Received. Without it such an artifact is refused (an internal error: the
// caller must pass its ledger).
func WithReceiver(r *Receiver) Option {
	return func(o *options) { o.receiver = r }
}

// handOff runs HandedOff for the ref in refFile and returns the signed
// statement's bytes (nil without a handoff).
func handOff(ctx context.Context, s host.Content, h *Handoff, refFile []byte) ([]byte, *ledger.Record, error) {
	if h == nil {
		return nil, nil, nil
	}
	ref, err := snapshot.OpenRefUnsafe(refFile)
	if err != nil {
		return nil, nil, err
	}
	// Nothing is handed off that this host cannot send.
	if _, err := payloadPresent(ctx, s, ref); err != nil {
		return nil, nil, err
	}
	if h.Key == nil || h.Ledger == nil {
		return nil, nil, errors.New("handoff: a ledger and a signing key are needed")
	}
	gen := uint64(generationOf(ref))
	rec, err := h.Ledger.HandedOff(ctx, ledger.HandOffRequest{
		Run: ref.Run, Generation: gen, Ref: digest.FromBytes(refFile), RunUID: ref.RunUID, To: h.To, Host: h.Host,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("hand run %q generation %d over to %q: %w", ref.Run, gen, h.To, err)
	}
	if rec.HandedOff == nil {
		return nil, nil, fmt.Errorf("hand run %q over: the ledger returned a record without handedOff", ref.Run)
	}
	st := Statement{
		Schema: SchemaHandoff, Run: ref.Run, RunUID: ref.RunUID, Generation: gen, Ref: rec.Ref,
		From: h.Host, To: rec.HandedOff.To, Fence: rec.Fence,
		Created: rec.HandedOff.At.UTC().Format(time.RFC3339Nano),
	}
	b, err := SignStatement(st, h.Key)
	if err != nil {
		return nil, nil, err
	}
	return b, &rec, nil
}

// HandoffResult says what a handoff did (ExportResult.Handoff,
// PushResult.Handoff, ImportResult.Received, PullResult.Received).
type HandoffResult struct {
	// Statement is the statement's descriptor (media type
	// MediaTypeHandoff).
	Statement ocispec.Descriptor `json:"statement"`
	From      string             `json:"from"`
	To        string             `json:"to"`
	// At is the statement's created.
	At string `json:"at"`
	// State is the record's state after the transition ("handed-off" on
	// the sending host, "suspended" on the receiving one).
	State ledger.State `json:"state"`
	Fence uint64       `json:"fence"`
}

// artifactStatement finds the statement layer of an artifact manifest's
// layers: the last one when its media type is MediaTypeHandoff.
func artifactStatement(layers []ocispec.Descriptor) (ocispec.Descriptor, bool) {
	if n := len(layers); n > 0 && layers[n-1].MediaType == MediaTypeHandoff {
		return layers[n-1], true
	}
	return ocispec.Descriptor{}, false
}

// receive runs Received for the artifact's statement on this host (import
// and pull, after --out is written and before the run lease takes the
// content). No statement: nothing to do.
func receive(ctx context.Context, r *Receiver, art *Artifact) (*HandoffResult, error) {
	st := art.Statement
	if st == nil {
		return nil, nil
	}
	ref := art.Ref
	rec, err := r.Ledger.Received(ctx, ledger.ReceiveRequest{
		Run: st.Run, Generation: st.Generation, Ref: st.Ref, RunUID: st.RunUID,
		Parent: ref.Parent, Ancestors: ref.Ancestors, From: st.From, To: st.To, Fence: st.Fence,
	})
	if err != nil {
		return nil, fmt.Errorf("receive run %q generation %d from %q: %w", st.Run, st.Generation, st.From, err)
	}
	return &HandoffResult{Statement: art.StatementDesc, From: st.From, To: st.To, At: st.Created, State: rec.State, Fence: rec.Fence}, nil
}

// checkReceiver refuses, before anything is stored, an artifact whose
// statement names another host (superseded, reason handed-off) or that
// carries a statement without a Receiver.
func checkReceiver(ctx context.Context, r *Receiver, art *Artifact) error {
	st := art.Statement
	if st == nil {
		return nil
	}
	if r != nil {
		if err := r.resolve(ctx); err != nil {
			return err
		}
	}
	switch {
	case r == nil || r.Ledger == nil:
		return fmt.Errorf("run %q: the artifact carries a handoff statement, and no run ledger was given to receive it", st.Run)
	case st.To != r.Host:
		return &ledger.Error{Class: errdef.ErrSuperseded, Code: ledger.ReasonHandedOff, Op: "received", Run: st.Run, Generation: st.Generation,
			Reason: fmt.Sprintf("handed off to %q, not to this host %q (statement of %s from %q); nothing was stored", st.To, r.Host, st.Created, st.From)}
	}
	return nil
}

// Recall undoes a handoff the named host never took up (docs/design.md
// "Exactly once across hosts": `recall`): the run's handed-off record goes
// back to suspended, fence + 1. It returns the record before and after.
// A run that is not handed off, or has no record, is a refusal matching
// errdef.ErrClaimConflict.
func Recall(ctx context.Context, l ledger.Ledger, run string) (before, after ledger.Record, err error) {
	before, err = l.Get(ctx, run)
	if errors.Is(err, ledger.ErrNotFound) {
		err = &ledger.Error{Class: errdef.ErrClaimConflict, Op: "recalled", Run: run, Reason: "the run has no record here: only a handed-off generation is recalled"}
	}
	if err != nil {
		return before, after, fmt.Errorf("recall run %q: %w", run, err)
	}
	after, err = l.Recalled(ctx, ledger.RecallRequest{Run: run, Generation: before.Generation, Ref: before.Ref})
	if err != nil {
		return before, after, fmt.Errorf("recall run %q: %w", run, err)
	}
	return before, after, nil
}
