package resume

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/runspec"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Request is the input of the resume decision (docs/design.md "Resume decision").
//
// RefFile holds the SnapshotRef file's bytes exactly as read; RefSource names
// it in messages (a path). Config holds the offered devcontainer.json bytes;
// ConfigPath is its path, used for lockfile discovery and "./" features
// (envmanifest.Options.Path). Lockfile is an explicit lockfile path
// (--lockfile), "" to discover one beside ConfigPath. Trust holds the
// trusted public keys (--trust). The host identity, and any --host-id
// override, come from Facts.Host. TakeOver is --take-over: the claim takes a
// live run from its holder, fencing it out (an operator's decision,
// docs/design.md "The run ledger"). Spec holds the bytes of an offered OCI
// runtime spec (--spec), nil when none is offered; SpecSource names it in
// messages (a path). Check 10 compares it with the recorded spec and,
// when it passes, the incarnation is created from it (docs/design.md
// "Spec validation"). TrustRecordedSpec accepts a recorded spec and runtime
// from another host without judging them (runspec.JudgeRecorded; an
// operator's decision, docs/design.md "Hardening"). Force lets a take-over
// delete a live holder whose container has a running task on this host
// (docs/design.md "Hardening": the holder-deletion guard). Copy is --copy: the
// claim accepts a generation this ledger never recorded (a copy the source
// can still resume; without it that is superseded, reason not-handed-off:
// docs/design.md "The run ledger"), and the verdict says "copy": true.
type Request struct {
	RefFile    []byte
	RefSource  string
	Config     []byte
	ConfigPath string
	Lockfile   string
	Trust      *envelope.KeyRing
	TakeOver   bool
	Force      bool
	Copy       bool
	Spec       []byte
	SpecSource string

	TrustRecordedSpec bool
	// NoMemory is --no-memory: a generation with memory resumes its
	// filesystem and restarts its process (check 12 says so; its memory
	// blobs are not required).
	NoMemory bool
	// DuplicateProcess is --duplicate-process: with Copy or TakeOver, a
	// generation with memory is restored although the process may then
	// run twice (two copies of one memory image); without it, or
	// NoMemory, that is a usage error (64) at check 12.
	DuplicateProcess bool
}

// InputError is an input file of the decision that cannot be read (it
// does not exist, is unreadable, or, for the trusted keys, holds no usable
// public key): class "bad-input" (internal/exitcode; a config file that
// does not exist is refused input). Path names the file; Err is the cause.
type InputError struct {
	Path string
	Err  error
}

// Error renders "<path>: <cause>".
func (e *InputError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause (an *fs.PathError, an envelope.LoadTrust
// error, …).
func (e *InputError) Unwrap() error { return e.Err }

// LoadRequest reads the files of `resume --ref REF --config CONFIG --trust
// TRUST [--lockfile LOCKFILE]` into a Request: the ref file and the config
// file as bytes, the trusted keys with envelope.LoadTrust (a PKIX PEM
// file or a directory of them). The lockfile is not read here: ingestion
// reads it (check 5), so that a missing lockfile is a refusal in the
// verdict. Errors are *InputError naming the file.
func LoadRequest(refPath, configPath, lockfilePath, trustPath string) (Request, error) {
	ref, err := inputfile.Read(refPath, inputfile.MaxJSON)
	if err != nil {
		return Request{}, &InputError{Path: refPath, Err: err}
	}
	cfg, err := inputfile.Read(configPath, inputfile.MaxJSON)
	if err != nil {
		return Request{}, &InputError{Path: configPath, Err: err}
	}
	trust, err := envelope.LoadTrust(trustPath)
	if err != nil {
		return Request{}, &InputError{Path: trustPath, Err: err}
	}
	return Request{
		RefFile:    ref,
		RefSource:  refPath,
		Config:     cfg,
		ConfigPath: configPath,
		Lockfile:   lockfilePath,
		Trust:      trust,
	}, nil
}

// Decide runs the checks of docs/design.md "Resume decision" in order and
// returns the verdict; it changes nothing (the `resume --check` decision):
// the claim check reads the run's record from l (Get) and predicts the
// Claim transition with ledger.Apply, judging a resuming holder of this
// host through facts; it never writes to the ledger. It checks the
// container id DefaultContainerID(run, generation).
//
// Check 9 finds every layer blob (Facts.BlobSize) and reads the spec blob
// (Facts.ReadSpec: size and digest verified as it is read; another blob
// is snapshot-missing). Check 10 ("spec") takes the recorded spec — for a
// `/1` ref the spec Facts.BuildSpec builds as the previous release did —
// and, without Request.Spec, requires that it decodes (a recorded spec
// that does not is snapshot-missing; a built one that does not is
// internal); with Request.Spec it runs runspec.Compare(recorded, offered) with
// the offered core's containerEnv and Facts.HostNamespace: an offered spec
// that does not decode is bad-input, a recorded one snapshot-missing, and
// a drift that runspec.Refused is spec-drift (exit 3); the verdict's
// SpecDrift holds the comparison.
//
// Every check is reported: "pass", "fail", or "skipped" after the first
// failure, which decides Class and ExitCode. Refusals holds check 5's
// ingestion refusals, or check 8's image-metadata refusals; Drift compares
// the recorded and the offered core whenever check 5 produced an offered
// core (see DiffCores).
//
// Check 8 runs in docs/design.md's order: the host platform must match
// base.platform (else image-unresolved); base.manifestDigest with its
// config and every layer must be present (Facts.MissingContent empty, else
// image-unresolved); then a digest in core.image must be base.indexDigest
// or base.manifestDigest (else image-drifted), or, without a digest, the
// name must resolve through Facts.ResolveImage to the recorded index and
// manifest digests (not found: image-unresolved; other digests:
// image-drifted); last, the devcontainer.metadata label of base.configDigest
// (Facts.ImageLabels) must pass envmanifest.CheckImageMetadata (no label
// passes; docs/design.md "Image metadata"), else image-metadata with the
// label's refusals in Refusals.
//
// A fact that cannot be established (a Facts or ledger error other than
// errdefs.ErrNotFound where "not found" is a refusal; an unreachable or
// locked ledger) fails its check with ClassInternal (exit 1). Decide never
// returns nil.
//
// facts must not be nil. Once check 4 has verified the ref, the read-only
// lookups of checks 7–9 (Host, ResolveImage, MissingContent, ImageLabels,
// BlobSize) are issued concurrently, so facts must be safe for concurrent
// use; their results are still evaluated in check order.
func Decide(ctx context.Context, facts Facts, l ledger.Ledger, req Request) *Verdict {
	s := &state{req: req, facts: facts, ledger: l}
	return s.run(ctx)
}

// run runs the twelve checks in order and builds the verdict.
func (s *state) run(ctx context.Context) *Verdict {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // abandons the lookups of checks skipped after a failure
	v := &Verdict{Checks: make([]CheckResult, 0, len(steps))}
	failed := ""
	for _, st := range steps {
		if failed != "" {
			v.Checks = append(v.Checks, CheckResult{Name: st.name, Result: ResultSkipped, Detail: "not run: " + failed + " failed"})
			continue
		}
		detail, err := st.run(s, ctx)
		if err == nil {
			v.Checks = append(v.Checks, CheckResult{Name: st.name, Result: ResultPass, Detail: detail})
			continue
		}
		failed = st.name
		class := ClassInternal
		if ce := checkError(err); ce != nil {
			class = ce.Class
		}
		v.Class = class
		v.ExitCode = class.Code()
		v.Reason = Reason(err)
		v.Checks = append(v.Checks, CheckResult{Name: st.name, Result: ResultFail, Detail: failDetail(err)})
	}
	if failed != "" {
		s.precedence(ctx, v, failed)
	}
	v.Refusals = s.refusals
	if s.offered != nil && s.ref != nil {
		v.Drift = DiffCores(&s.ref.Core, &s.offered.Core)
	}
	if v.Refusals == nil {
		v.Refusals = []envmanifest.Refusal{}
	}
	if v.Drift == nil {
		v.Drift = []DriftEntry{}
	}
	if s.ref != nil {
		v.Run, v.Generation = s.ref.Run, s.ref.Gen()
	}
	v.SpecDrift = s.specDrift
	if s.cc != nil {
		v.Fence = s.cc.fence
		v.Copy = s.cc.copied
		if h := s.cc.takenOver; h != nil {
			// Claim writes the fence + 1: the holder fenced out held the
			// one before.
			v.TakenOver = &TakenOver{Host: h.Host, Namespace: h.Namespace, Container: h.ID, Fence: s.cc.fence - 1}
		}
	}
	if failed == "" {
		v.Accepted = true
		v.ExitCode = exitcode.OK
	}
	return v
}

// failDetail renders a failed check's cause for the verdict: the cause
// without the "<check>: <class>: " prefix a *CheckError adds.
func failDetail(err error) string {
	if ce := checkError(err); ce != nil && ce.Err != nil {
		return ce.Err.Error()
	}
	return err.Error()
}

// state carries what earlier checks established to later ones.
type state struct {
	req    Request
	facts  Facts
	ledger ledger.Ledger

	opened   bool                // checks 1–4 ran (snapshot.OpenRef)
	openErr  *snapshot.OpenError // the step that failed, or nil
	ref      *snapshot.Ref
	offered  *envmanifest.Manifest
	refusals []envmanifest.Refusal
	look     *lookups // started when check 4 passes

	hostID string      // this host's id (check 7)
	cc     *claimCheck // what the claim check established and did

	spec       []byte              // the recorded spec's bytes, read by check 9 (nil for a /1 ref)
	createSpec []byte              // the spec check 10 let the incarnation be created from
	offerSpec  bool                // createSpec is the offered --spec
	specEdits  []string            // what runspec.Patch changed (notApplied)
	specDrift  []runspec.SpecDrift // check 10's comparison; nil when none ran

	// Set by Resume only: the claim check then runs Claim.
	mat         Materializer
	containerID string
}

// lookups are the daemon facts checks 7–9 need. They depend only on the
// verified ref and change nothing, so they start together as soon as check
// 4 passes: the decision then waits for the slowest lookup rather than for
// their sum. Each check still evaluates its facts in docs/design.md order, and a
// check skipped after a failure ignores what was looked up (run cancels the
// outstanding calls when it returns).
type lookups struct {
	host    *future[snapshot.Host]
	resolve *future[snapshot.Base] // nil when core.image carries a digest
	labels  *future[map[string]string]
	missing *future[[]digest.Digest]
	blobs   []*future[int64]     // the sizes of snapshotBlobs(ref), in that order
	memory  *future[memoryFacts] // this host's memory facts; nil for a ref without memory or under NoMemory
	spec    *future[[]byte]      // the recorded spec's bytes; nil for a /1 ref
}

// future is the result of one lookup running in its own goroutine.
type future[T any] struct {
	done chan struct{}
	val  T
	err  error
}

func lookup[T any](f func() (T, error)) *future[T] {
	fu := &future[T]{done: make(chan struct{})}
	go func() {
		fu.val, fu.err = f()
		close(fu.done)
	}()
	return fu
}

func (f *future[T]) get() (T, error) {
	<-f.done
	return f.val, f.err
}

// startLookups starts the lookups of checks 7–9 for the verified ref.
func (s *state) startLookups(ctx context.Context) {
	ref := s.ref
	l := &lookups{
		host:    lookup(func() (snapshot.Host, error) { return s.facts.Host(ctx) }),
		missing: lookup(func() ([]digest.Digest, error) { return s.facts.MissingContent(ctx, ref.Base.ManifestDigest) }),
		labels:  lookup(func() (map[string]string, error) { return s.facts.ImageLabels(ctx, ref.Base.ConfigDigest) }),
	}
	for _, b := range s.snapshotBlobs(ref) {
		l.blobs = append(l.blobs, lookup(func() (int64, error) { return s.facts.BlobSize(ctx, b.digest) }))
	}
	if m := ref.Memory; m != nil && !s.req.NoMemory {
		l.memory = lookup(func() (memoryFacts, error) {
			rt, mh, err := s.facts.MemoryFacts(ctx, m.Format)
			return memoryFacts{rt, mh}, err
		})
	}
	if d := ref.Spec; d != nil {
		l.spec = lookup(func() ([]byte, error) { return s.facts.ReadSpec(ctx, *d) })
	}
	if named, err := reference.ParseNormalizedNamed(ref.Core.Image); err == nil {
		if _, digested := named.(reference.Digested); !digested {
			l.resolve = lookup(func() (snapshot.Base, error) { return s.facts.ResolveImage(ctx, ref.Core.Image) })
		}
	}
	s.look = l
}

// steps are the twelve checks in docs/design.md order. Each returns a detail on pass,
// or an error: a *CheckError for a refusal, anything else is internal.
var steps = []struct {
	name string
	run  func(*state, context.Context) (string, error)
}{
	{CheckRefParse, (*state).refParse},
	{CheckSignature, (*state).signature},
	{CheckRefSchema, (*state).refSchema},
	{CheckRefIntegrity, (*state).refIntegrity},
	{CheckOfferedIngest, (*state).offeredIngest},
	{CheckManifest, (*state).manifest},
	{CheckHost, (*state).host},
	{CheckImage, (*state).image},
	{CheckSnapshot, (*state).snapshot},
	{CheckMemory, (*state).memoryCheck},
	{CheckSpec, (*state).specCheck},
	{CheckClaim, (*state).claim},
}

func refuse(check string, class Class, err error) error {
	return &CheckError{Check: check, Class: class, Err: err}
}

func refusef(check string, class Class, format string, args ...any) error {
	return &CheckError{Check: check, Class: class, Err: fmt.Errorf(format, args...)}
}

// internal wraps a fact that could not be established.
func internal(check string, err error) error {
	return &CheckError{Check: check, Class: ClassInternal, Err: err}
}

func (s *state) source() string {
	if s.req.RefSource != "" {
		return s.req.RefSource
	}
	return "ref file"
}

// open runs checks 1–4 once, with snapshot.OpenRef: the one way to open
// a ref. Each of the four checks then reports its own step.
func (s *state) open() {
	if s.opened {
		return
	}
	s.opened = true
	ref, err := snapshot.OpenRef(s.req.RefFile, s.req.Trust)
	if err != nil {
		var oe *snapshot.OpenError
		if !errors.As(err, &oe) {
			oe = &snapshot.OpenError{Step: snapshot.StepParse, Err: err}
		}
		var re *envmanifest.RefusedError
		if errors.As(oe.Err, &re) && re.Source == "" {
			re.Source = s.source()
		}
		s.openErr = oe
		return
	}
	s.ref = ref
}

// stepFailed returns the cause when check step of OpenRef failed.
func (s *state) stepFailed(step string) error {
	s.open()
	if s.openErr != nil && s.openErr.Step == step {
		return s.openErr.Err
	}
	return nil
}

// provenance is what OpenRef established about the signatures, whether or
// not a later step failed.
func (s *state) provenance() snapshot.Provenance {
	if s.ref != nil {
		return s.ref.Provenance()
	}
	return s.openErr.Provenance
}

// 1 ref-parse: the strict decoder; a JSON object with an object "ref".
func (s *state) refParse(context.Context) (string, error) {
	if err := s.stepFailed(snapshot.StepParse); err != nil {
		return "", refuse(CheckRefParse, ClassBadInput, err)
	}
	return fmt.Sprintf("%s: a signed %q wrapper, signatures: %d, %d bytes",
		s.source(), envelope.MemberRef, s.provenance().Signatures, len(s.req.RefFile)), nil
}

// 2 signature: docs/design.md "Signed documents" over the JCS of "ref" as
// parsed.
func (s *state) signature(context.Context) (string, error) {
	if err := s.stepFailed(snapshot.StepSignature); err != nil {
		return "", refuse(CheckSignature, ClassUntrusted, err)
	}
	return "verified by " + strings.Join(s.provenance().SignedBy, ", "), nil
}

// 3 ref-schema: exactly the SnapshotRef members with the right types.
func (s *state) refSchema(context.Context) (string, error) {
	if err := s.stepFailed(snapshot.StepSchema); err != nil {
		return "", refuse(CheckRefSchema, ClassBadInput, err)
	}
	if s.ref == nil { // a later step failed: the schema was read
		return "the ref has exactly the SnapshotRef members and types", nil
	}
	return fmt.Sprintf("%s, run %q, suspended %s", s.ref.Schema, s.ref.Run, s.ref.Created), nil
}

// 4 ref-integrity: manifest = address(core), pinned = IsPinned(core).
func (s *state) refIntegrity(ctx context.Context) (string, error) {
	if err := s.stepFailed(snapshot.StepIntegrity); err != nil {
		return "", refuse(CheckRefIntegrity, ClassTampered, err)
	}
	if s.facts != nil {
		s.startLookups(ctx)
	}
	return fmt.Sprintf("manifest %s is the address of core; pinned %t", s.ref.Manifest, s.ref.Pinned), nil
}

// 5 offered-ingest: the recorded policy list, the same lockfile rules.
func (s *state) offeredIngest(context.Context) (string, error) {
	m, err := envmanifest.Ingest(s.req.Config, envmanifest.Options{
		Path:            s.req.ConfigPath,
		Lockfile:        s.req.Lockfile,
		RequireLockfile: s.ref.Lockfile != "",
		Reserved:        s.ref.Policy,
	})
	if err != nil {
		var re *envmanifest.RefusedError
		if errors.As(err, &re) {
			s.refusals = append([]envmanifest.Refusal(nil), re.Refusals...)
			envmanifest.SortRefusals(s.refusals)
		}
		return "", refuse(CheckOfferedIngest, ClassBadInput, err)
	}
	s.offered = m
	detail := fmt.Sprintf("%s ingested with the recorded policy (%d names): %s", s.configName(), len(s.ref.Policy), m.Address)
	if m.LockfilePath != "" {
		detail += ", lockfile " + m.LockfilePath
	}
	return detail, nil
}

func (s *state) configName() string {
	if s.req.ConfigPath != "" {
		return s.req.ConfigPath
	}
	return "offered config"
}

// 6 manifest: offered address = ref.manifest.
func (s *state) manifest(context.Context) (string, error) {
	if s.offered.Address != s.ref.Manifest {
		return "", refusef(CheckManifest, ClassManifestMismatch,
			"offered %s is not the recorded %s (see drift)", s.offered.Address, s.ref.Manifest)
	}
	return "offered address = recorded " + s.ref.Manifest, nil
}

// 7 host: same host (host.id and host.idSource both equal), or pinned.
func (s *state) host(ctx context.Context) (string, error) {
	h, err := s.look.host.get()
	if err != nil {
		return "", internal(CheckHost, fmt.Errorf("host identity: %w", err))
	}
	s.hostID = h.ID
	rec := s.ref.Host
	if h.ID == rec.ID && h.IDSource == rec.IDSource {
		return fmt.Sprintf("same host %s (%s)", h.ID, h.IDSource), nil
	}
	if s.ref.Pinned {
		return fmt.Sprintf("another host %s (%s), suspended on %s (%s); the manifest is pinned", h.ID, h.IDSource, rec.ID, rec.IDSource), nil
	}
	return "", refusef(CheckHost, ClassUnpinnedCrossHost,
		"this host is %s (%s), the run was suspended on %s (%s), and the manifest is unpinned (image and every feature need an @sha256: digest to move)",
		h.ID, h.IDSource, rec.ID, rec.IDSource)
}

// 8 image: platform, the base content is present, the reference still
// names the recorded digests.
func (s *state) image(ctx context.Context) (string, error) {
	base := s.ref.Base
	image := s.ref.Core.Image
	if !s.facts.PlatformMatches(base.Platform) {
		return "", refusef(CheckImage, ClassImageUnresolved,
			"the recorded platform %s of %s does not match this host's platform", base.Platform, base.ManifestDigest)
	}
	missing, err := s.look.missing.get()
	if err != nil {
		return "", internal(CheckImage, fmt.Errorf("content of %s: %w", base.ManifestDigest, err))
	}
	if len(missing) > 0 {
		return "", refusef(CheckImage, ClassImageUnresolved,
			"%s (%s): %d blobs missing from the content store: %s", image, base.ManifestDigest, len(missing), joinDigests(missing))
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		// Checks 3 and 5 ingested this reference; this cannot happen for a
		// verified ref.
		return "", refusef(CheckImage, ClassImageUnresolved, "/core/image %q: %v", image, err)
	}
	how := ""
	if dg, ok := named.(reference.Digested); ok {
		d := dg.Digest()
		if d != base.ManifestDigest && (base.IndexDigest == "" || d != base.IndexDigest) {
			return "", refusef(CheckImage, ClassImageDrifted,
				"/core/image %s names digest %s, not the recorded %s", image, d, recordedDigests(base))
		}
		how = "pinned by digest " + d.String()
	} else {
		got, err := s.look.resolve.get()
		switch {
		case errdefs.IsNotFound(err):
			return "", refuse(CheckImage, ClassImageUnresolved, fmt.Errorf("%s does not resolve through the content store: %w", image, err))
		case err != nil:
			return "", internal(CheckImage, fmt.Errorf("resolve %s: %w", image, err))
		}
		if got.IndexDigest != base.IndexDigest || got.ManifestDigest != base.ManifestDigest {
			return "", refusef(CheckImage, ClassImageDrifted,
				"%s now resolves to %s, not the recorded %s", image, recordedDigests(got), recordedDigests(base))
		}
		how = "resolves to " + recordedDigests(base)
	}
	meta, err := s.imageMetadata()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s; manifest, config and layers present (%s); %s", image, how, base.Platform, meta), nil
}

// imageMetadata is check 8's last condition: the devcontainer.metadata
// label of the recorded config (docs/design.md "Image metadata") passes
// envmanifest.CheckImageMetadata; no label passes. A refused label fails
// the check with ClassImageMetadata, its refusals in the verdict's
// refusals.
func (s *state) imageMetadata() (string, error) {
	cfg := s.ref.Base.ConfigDigest
	labels, err := s.look.labels.get()
	switch {
	case errdefs.IsNotFound(err):
		return "", refuse(CheckImage, ClassImageUnresolved, fmt.Errorf("config %s of %s is not in the content store: %w", cfg, s.ref.Core.Image, err))
	case err != nil:
		return "", internal(CheckImage, fmt.Errorf("labels of config %s: %w", cfg, err))
	}
	rs, found := envmanifest.CheckImageLabelsPolicy(labels, s.ref.Policy)
	if !found {
		return "no " + envmanifest.ImageMetadataLabel + " label", nil
	}
	if len(rs) == 0 {
		return "its " + envmanifest.ImageMetadataLabel + " label passes", nil
	}
	s.refusals = rs
	where := make([]string, len(rs))
	for i, r := range rs {
		where[i] = fmt.Sprintf("%s (%s)", r.Pointer, r.Class)
	}
	return "", refusef(CheckImage, ClassImageMetadata, "%s (config %s): its %s label is refused at %s (see refusals)",
		s.ref.Core.Image, cfg, envmanifest.ImageMetadataLabel, strings.Join(where, ", "))
}

func recordedDigests(b snapshot.Base) string {
	if b.IndexDigest != "" {
		return fmt.Sprintf("index %s / manifest %s", b.IndexDigest, b.ManifestDigest)
	}
	return "manifest " + b.ManifestDigest.String()
}

func joinDigests(ds []digest.Digest) string {
	ss := make([]string, len(ds))
	for i, d := range ds {
		ss[i] = d.String()
	}
	return strings.Join(ss, ", ")
}

// refBlob is one layer blob a ref records: where it is named (a JSON
// Pointer into the ref), its digest and its size in bytes.
type refBlob struct {
	pointer string
	digest  digest.Digest
	size    int64
}

// layerBlobs lists the layer blobs check 9 looks for, in order (a /1
// ref's one layer is its "rootfsDiff"); the spec blob is read apart.
func layerBlobs(ref *snapshot.Ref) []refBlob {
	var out []refBlob
	for i, l := range ref.Layers {
		out = append(out, refBlob{fmt.Sprintf("/ref/layers/%d", i), l.Digest, l.Size})
	}
	if ref.IsV1() && len(out) == 1 {
		out[0].pointer = "/ref/rootfsDiff"
	}
	return out
}

// 9 snapshot: every layer blob is present with its digest and size, and
// the spec blob is read with its size and digest verified as it is read.
func (s *state) snapshot(ctx context.Context) (string, error) {
	var present []string
	for i, b := range s.snapshotBlobs(s.ref) {
		size, err := s.look.blobs[i].get()
		switch {
		case errdefs.IsNotFound(err):
			return "", refuse(CheckSnapshot, ClassSnapshotMissing, fmt.Errorf("%s: blob %s is not in the content store: %w", b.pointer, b.digest, err))
		case err != nil:
			return "", internal(CheckSnapshot, fmt.Errorf("%s: blob %s: %w", b.pointer, b.digest, err))
		case size != b.size:
			return "", refusef(CheckSnapshot, ClassSnapshotMissing,
				"%s: blob %s is %d bytes in the content store, the ref records %d", b.pointer, b.digest, size, b.size)
		}
		present = append(present, fmt.Sprintf("%s %s (%d bytes)", b.pointer, b.digest, size))
	}
	if d := s.ref.Spec; d != nil {
		spec, err := s.look.spec.get()
		switch {
		case errdefs.IsNotFound(err), errors.Is(err, snapshot.ErrBlobCorrupt):
			return "", refuse(CheckSnapshot, ClassSnapshotMissing, fmt.Errorf("/ref/spec: %w", err))
		case err != nil:
			return "", internal(CheckSnapshot, fmt.Errorf("/ref/spec: blob %s: %w", d.Digest, err))
		}
		s.spec = spec
		present = append(present, fmt.Sprintf("/ref/spec %s (%d bytes, read and verified)", d.Digest, d.Size))
	}
	return strings.Join(present, ", ") + " present", nil
}
