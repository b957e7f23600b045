package snapshot

import (
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/gowebpki/jcs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// ErrTampered is wrapped by OpenRef when a signed ref's recorded manifest
// address or pinned flag disagrees with its core (docs/design.md "Resume
// decision", check 4 "ref-integrity"). Class "tampered"
// (internal/exitcode).
var ErrTampered = errors.New("snapshot ref tampered")

// refSchemaPrefix is the family of SnapshotRef schema strings; a newer
// version number than RefSchema's is refused with its own message.
const refSchemaPrefix = "sandbox.snapshot-ref/"

// parseRefFile parses a SnapshotRef file: the signed wrapper {"ref": {…},
// "signatures": […]} read with the strict decoder (check 1 "ref-parse"),
// as envmanifest.ParseSigned(data, "ref"): a *envmanifest.RefusedError when
// the file is not a JSON object with an object "ref" and well-formed
// signature entries. The signatures are not verified here.
func parseRefFile(data []byte) (*envelope.Document, error) {
	return envmanifest.ParseSigned(data, envelope.MemberRef)
}

// refMember describes one member of the ref object (docs/design.md "SnapshotRef").
type refMember struct {
	name     string
	optional bool
}

var (
	refMembers = []refMember{
		{"schema", false}, {"run", false}, {"manifest", false}, {"core", false},
		{"pinned", false}, {"policy", false}, {"lockfile", true}, {"host", false},
		{"base", false}, {"rootfsDiff", false}, {"keptRunning", false}, {"created", false},
	}
	hostMembers = []refMember{
		{"id", false}, {"idSource", false}, {"containerdVersion", false},
		{"snapshotter", false}, {"platform", false},
	}
	baseMembers = []refMember{
		{"name", false}, {"indexDigest", true}, {"manifestDigest", false},
		{"configDigest", false}, {"platform", false}, {"diffIDs", false},
	}
	diffMembers = []refMember{
		{"mediaType", false}, {"digest", false}, {"size", false},
		{"diffID", false}, {"uncompressedSize", false},
	}
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	addressRE   = regexp.MustCompile(`^blake3:[0-9a-f]{64}$`)
	sha256HexRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// refDecoder collects refusals while decoding a ref object.
type refDecoder struct {
	rs []envmanifest.Refusal
}

func (d *refDecoder) refuse(ptr string, class envmanifest.Class, format string, args ...any) {
	d.rs = append(d.rs, envmanifest.Refusal{Pointer: ptr, Class: class, Message: fmt.Sprintf(format, args...)})
}

// members checks that obj is an object holding exactly the listed
// members (the optional ones may be absent) and returns them by name.
func (d *refDecoder) members(obj *strictjson.Node, what string, want []refMember) (map[string]*strictjson.Node, bool) {
	if obj == nil {
		return nil, false
	}
	ptr := obj.Pointer
	if obj.Kind != strictjson.KindObject {
		d.refuse(ptr, envmanifest.ClassInvalidValue, "%s must be an object, not %s", what, obj.Kind)
		return nil, false
	}
	got := make(map[string]*strictjson.Node, len(obj.Members))
	for _, m := range obj.Members {
		if !slices.ContainsFunc(want, func(w refMember) bool { return w.name == m.Name }) {
			d.refuse(strictjson.Pointer(ptr, m.Name), envmanifest.ClassUnknownProperty,
				"unknown member %q in %s (a new member means a new schema, not %s)", m.Name, what, RefSchema)
			continue
		}
		if m.Duplicate {
			continue // the decoder already refused it
		}
		got[m.Name] = m.Value
	}
	for _, w := range want {
		if _, ok := got[w.name]; !ok && !w.optional {
			d.refuse(strictjson.Pointer(ptr, w.name), envmanifest.ClassMissing, "%s needs member %q", what, w.name)
		}
	}
	return got, true
}

func (d *refDecoder) str(n *strictjson.Node, name string) (string, bool) {
	if n == nil {
		return "", false
	}
	if n.Kind != strictjson.KindString {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%q must be a string, not %s", name, n.Kind)
		return "", false
	}
	return n.Str, true
}

func (d *refDecoder) boolean(n *strictjson.Node, name string) bool {
	if n == nil {
		return false
	}
	if n.Kind != strictjson.KindBool {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%q must be a boolean, not %s", name, n.Kind)
		return false
	}
	return n.Bool
}

// size decodes member name of obj as a non-negative whole number of bytes
// (at most 2^53−1). The number's text is taken from obj.Raw (the
// object's own JSON text) rather than from the member node.
func (d *refDecoder) size(obj *strictjson.Node, n *strictjson.Node, name string) int64 {
	if n == nil {
		return 0
	}
	if n.Kind != strictjson.KindNumber {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%q must be a number of bytes, not %s", name, n.Kind)
		return 0
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(obj.Raw, &members); err != nil {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%q: %v", name, err)
		return 0
	}
	tok := string(members[name])
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f > 1<<53-1 {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%q must be a whole number of bytes ≥ 0, not %s", name, tok)
		return 0
	}
	return int64(f)
}

func (d *refDecoder) digest(n *strictjson.Node, name string) digest.Digest {
	s, ok := d.str(n, name)
	if !ok {
		return ""
	}
	dg, err := digest.Parse(s)
	if err != nil {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%q is not a valid digest (%v): %q", name, err, s)
		return ""
	}
	if dg.Algorithm() == digest.SHA256 && !sha256HexRE.MatchString(s) {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%q must be sha256: and 64 lowercase hex: %q", name, s)
		return ""
	}
	return dg
}

func (d *refDecoder) platform(n *strictjson.Node, name string) string {
	s, ok := d.str(n, name)
	if !ok {
		return ""
	}
	if !validPlatform(s) {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%q must be os/arch[/variant] as platforms.Format writes it, not %q", name, s)
		return ""
	}
	return s
}

// validPlatform reports whether s is written os/arch[/variant] and is its
// own form after containerd's platforms.Parse then Format ("linux/amd64",
// "linux/arm64/v8"; not "Linux/x86_64").
func validPlatform(s string) bool {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
	}
	p, err := platforms.Parse(s)
	if err != nil {
		return false
	}
	return platforms.Format(p) == s
}

// decodeRef decodes the inner "ref" object of a parsed SnapshotRef file
// (docs/design.md "Resume decision", check 3 "ref-schema"): exactly the members of
// docs/design.md "SnapshotRef" with the right types, "lockfile" and
// "base.indexDigest" optional. It checks that schema is RefSchema (a newer
// "sandbox.snapshot-ref/N" is refused alone, with a message saying this
// tool reads version 1 only), that run is a valid run id (ValidRunID),
// manifest a "blake3:<64 hex>" address, digests valid (sha256 ones 64
// lowercase hex), platforms os/arch[/variant], policy a sorted list of
// distinct environment names, lockfile "sha256:<64 hex>", created RFC 3339,
// and that core decodes as a manifest core (envmanifest.ParseCore).
//
// Every problem is reported at its JSON Pointer into the file (the nodes'
// pointers: "/ref/run", "/ref/base/diffIDs/0") in one
// *envmanifest.RefusedError. It does not check the signatures (check 2) or
// that manifest and pinned agree with core (check 4: checkIntegrity).
func decodeRef(inner *strictjson.Node) (*Ref, error) {
	d := &refDecoder{}
	if inner == nil {
		d.refuse("", envmanifest.ClassMissing, "no ref object")
		return nil, &envmanifest.RefusedError{Refusals: d.rs}
	}
	// The schema first: a newer document is refused for that alone.
	if s := inner.Get("schema"); s != nil && s.Kind == strictjson.KindString && s.Str != RefSchema {
		if v, ok := strings.CutPrefix(s.Str, refSchemaPrefix); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 1 {
				d.refuse(s.Pointer, envmanifest.ClassInvalidValue,
					"schema %q is newer than this tool reads (%s); upgrade sandbox-resume to read it", s.Str, RefSchema)
				return nil, &envmanifest.RefusedError{Refusals: d.rs}
			}
		}
	}
	r := &Ref{}
	top, ok := d.members(inner, "the ref", refMembers)
	if !ok {
		return nil, &envmanifest.RefusedError{Refusals: d.rs}
	}
	if s, ok := d.str(top["schema"], "schema"); ok {
		if s != RefSchema {
			d.refuse(top["schema"].Pointer, envmanifest.ClassInvalidValue, "schema must be %q, not %q", RefSchema, s)
		}
		r.Schema = s
	}
	if s, ok := d.str(top["run"], "run"); ok {
		if !ValidRunID(s) {
			d.refuse(top["run"].Pointer, envmanifest.ClassInvalidValue, "run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", s, MaxRunIDLen)
		}
		r.Run = s
	}
	if s, ok := d.str(top["manifest"], "manifest"); ok {
		if !addressRE.MatchString(s) {
			d.refuse(top["manifest"].Pointer, envmanifest.ClassInvalidValue, "manifest must be blake3: and 64 lowercase hex, not %q", s)
		}
		r.Manifest = s
	}
	if c := top["core"]; c != nil {
		if c.Kind != strictjson.KindObject {
			d.refuse(c.Pointer, envmanifest.ClassInvalidValue, "core must be an object, not %s", c.Kind)
		} else if core, canonical, err := envmanifest.ParseCoreCanonical(c); err != nil {
			var re *envmanifest.RefusedError
			if errors.As(err, &re) {
				d.rs = append(d.rs, re.Refusals...)
			} else {
				d.refuse(c.Pointer, envmanifest.ClassInvalidValue, "core: %v", err)
			}
		} else {
			r.Core, r.coreCanonical = core, canonical
		}
	}
	r.Pinned = d.boolean(top["pinned"], "pinned")
	r.Policy = d.policy(top["policy"])
	if n := top["lockfile"]; n != nil {
		if s, ok := d.str(n, "lockfile"); ok {
			if !sha256HexRE.MatchString(s) {
				d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "lockfile must be sha256: and 64 lowercase hex, not %q", s)
			}
			r.Lockfile = s
		}
	}
	if m, ok := d.members(top["host"], "host", hostMembers); ok {
		r.Host = d.host(m)
	}
	if m, ok := d.members(top["base"], "base", baseMembers); ok {
		r.Base = d.base(m)
	}
	if m, ok := d.members(top["rootfsDiff"], "rootfsDiff", diffMembers); ok {
		r.RootfsDiff = d.diff(top["rootfsDiff"], m)
	}
	r.KeptRunning = d.boolean(top["keptRunning"], "keptRunning")
	if s, ok := d.str(top["created"], "created"); ok {
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			d.refuse(top["created"].Pointer, envmanifest.ClassInvalidValue, "created must be an RFC 3339 time, not %q", s)
		}
		r.Created = s
	}
	if len(d.rs) > 0 {
		envmanifest.SortRefusals(d.rs)
		return nil, &envmanifest.RefusedError{Refusals: d.rs}
	}
	return r, nil
}

func (d *refDecoder) policy(n *strictjson.Node) []string {
	if n == nil {
		return nil
	}
	if n.Kind != strictjson.KindArray {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "policy must be an array of environment names, not %s", n.Kind)
		return nil
	}
	out := make([]string, 0, len(n.Elems))
	for _, e := range n.Elems {
		s, ok := d.str(e, "policy entry")
		if !ok {
			continue
		}
		switch {
		case !envNameRE.MatchString(s):
			d.refuse(e.Pointer, envmanifest.ClassInvalidValue, "policy entry %q is not an environment variable name", s)
		case len(out) > 0 && s <= out[len(out)-1]:
			d.refuse(e.Pointer, envmanifest.ClassInvalidValue, "policy must be sorted without duplicates: %q after %q", s, out[len(out)-1])
		default:
			out = append(out, s)
		}
	}
	return out
}

func (d *refDecoder) host(m map[string]*strictjson.Node) Host {
	var h Host
	if s, ok := d.str(m["id"], "id"); ok {
		if s == "" {
			d.refuse(m["id"].Pointer, envmanifest.ClassInvalidValue, "host id must not be empty")
		}
		h.ID = s
	}
	if s, ok := d.str(m["idSource"], "idSource"); ok {
		if s != IDSourceIntrospection && s != IDSourceOverride {
			d.refuse(m["idSource"].Pointer, envmanifest.ClassInvalidValue, "idSource must be %q or %q, not %q", IDSourceIntrospection, IDSourceOverride, s)
		}
		h.IDSource = s
	}
	h.ContainerdVersion, _ = d.str(m["containerdVersion"], "containerdVersion")
	if s, ok := d.str(m["snapshotter"], "snapshotter"); ok {
		if s == "" {
			d.refuse(m["snapshotter"].Pointer, envmanifest.ClassInvalidValue, "snapshotter must not be empty")
		}
		h.Snapshotter = s
	}
	h.Platform = d.platform(m["platform"], "platform")
	return h
}

func (d *refDecoder) base(m map[string]*strictjson.Node) Base {
	var b Base
	if s, ok := d.str(m["name"], "name"); ok {
		named, err := reference.ParseNormalizedNamed(s)
		switch {
		case err != nil:
			d.refuse(m["name"].Pointer, envmanifest.ClassInvalidValue, "name %q is not an image reference: %v", s, err)
		case named.String() != s:
			d.refuse(m["name"].Pointer, envmanifest.ClassInvalidValue, "name %q is not in its normalized form %q", s, named.String())
		}
		b.Name = s
	}
	if m["indexDigest"] != nil {
		b.IndexDigest = d.digest(m["indexDigest"], "indexDigest")
	}
	b.ManifestDigest = d.digest(m["manifestDigest"], "manifestDigest")
	b.ConfigDigest = d.digest(m["configDigest"], "configDigest")
	b.Platform = d.platform(m["platform"], "platform")
	if n := m["diffIDs"]; n != nil {
		if n.Kind != strictjson.KindArray {
			d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "diffIDs must be an array of digests, not %s", n.Kind)
		} else {
			b.DiffIDs = make([]digest.Digest, 0, len(n.Elems))
			for _, e := range n.Elems {
				b.DiffIDs = append(b.DiffIDs, d.digest(e, "diffIDs entry"))
			}
		}
	}
	return b
}

// layerMediaTypes are the OCI layer media types a rootfs diff may have
// (image-spec v1.1 "Image Layer Filesystem Changeset").
var layerMediaTypes = []string{
	ocispec.MediaTypeImageLayer, ocispec.MediaTypeImageLayerGzip, ocispec.MediaTypeImageLayerZstd,
}

func (d *refDecoder) diff(obj *strictjson.Node, m map[string]*strictjson.Node) Diff {
	var df Diff
	if s, ok := d.str(m["mediaType"], "mediaType"); ok {
		if !slices.Contains(layerMediaTypes, s) {
			d.refuse(m["mediaType"].Pointer, envmanifest.ClassInvalidValue, "mediaType must be an OCI layer media type (%s), not %q", strings.Join(layerMediaTypes, ", "), s)
		}
		df.MediaType = s
	}
	df.Digest = d.digest(m["digest"], "digest")
	df.Size = d.size(obj, m["size"], "size")
	df.DiffID = d.digest(m["diffID"], "diffID")
	df.UncompressedSize = d.size(obj, m["uncompressedSize"], "uncompressedSize")
	return df
}

// checkIntegrity is check 4 "ref-integrity" of docs/design.md "Resume decision":
// r.Manifest must equal the address of the core exactly as parsed
// (envmanifest.Address of the RFC 8785 JCS of inner's "core" subtree, never
// of a re-marshalled Go value) and r.Pinned must equal r.Core.IsPinned().
// inner is the ref object r was decoded from (envelope.Document.Inner). A
// disagreement is an error wrapping ErrTampered that names the pointer and
// both values.
func checkIntegrity(r *Ref, inner *strictjson.Node) error {
	core := inner.Get("core")
	if core == nil {
		return fmt.Errorf("%s: no manifest core: %w", strictjson.Pointer(inner.Pointer, "core"), ErrTampered)
	}
	canonical := r.coreCanonical // decodeRef's JCS of this same subtree
	if canonical == nil {
		var err error
		if canonical, err = jcs.Transform(core.Raw); err != nil {
			return fmt.Errorf("%s: canonicalize (RFC 8785): %v: %w", core.Pointer, err, ErrTampered)
		}
	}
	if got := envmanifest.Address(canonical); got != r.Manifest {
		return fmt.Errorf("%s: recorded address %s, but the core's address is %s: %w", strictjson.Pointer(inner.Pointer, "manifest"), r.Manifest, got, ErrTampered)
	}
	if got := r.Core.IsPinned(); got != r.Pinned {
		return fmt.Errorf("%s: recorded %t, but the core is pinned=%t: %w", strictjson.Pointer(inner.Pointer, "pinned"), r.Pinned, got, ErrTampered)
	}
	return nil
}

// Canonical returns the RFC 8785 JCS bytes of the ref: the bytes its
// signatures cover. Policy nil is written as [] (docs/design.md "SnapshotRef":
// "[] when none"); optional members that are empty are omitted.
func (r *Ref) Canonical() ([]byte, error) {
	c := *r
	if c.Policy == nil {
		c.Policy = []string{}
	}
	if c.Base.DiffIDs == nil {
		c.Base.DiffIDs = []digest.Digest{}
	}
	raw, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("marshal snapshot ref: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalize snapshot ref: %w", err)
	}
	return out, nil
}

// SignRef signs the ref with each signer and returns the SnapshotRef
// file's bytes: envelope.Sign("ref", JCS(ref), signers...) (docs/design.md
// "Signed documents": keys sorted, 2-space indentation, final newline). A
// signer is any crypto.Signer holding an Ed25519 key (an
// ed25519.PrivateKey, a KMS, an HSM). It fails when no signer is given or
// a signer does not sign with Ed25519.
func SignRef(r *Ref, signers ...crypto.Signer) ([]byte, error) {
	canonical, err := r.Canonical()
	if err != nil {
		return nil, err
	}
	return envelope.Sign(envelope.MemberRef, canonical, signers...)
}
