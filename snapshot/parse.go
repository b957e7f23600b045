package snapshot

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/gowebpki/jcs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// ErrTampered is wrapped by OpenRef when a signed ref's recorded manifest
// address or pinned flag disagrees with its core (docs/design.md "Resume
// decision", check 4 "ref-integrity"). Class "tampered"
// (internal/exitcode).
var ErrTampered = errdef.New(errdef.ErrTampered, "snapshot ref tampered")

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

// refMember describes one member of the ref object (docs/design.md
// "SnapshotRef").
type refMember struct {
	name     string
	optional bool
}

var (
	// refMembersV1 are the members of a RefSchemaV1 ref.
	refMembersV1 = []refMember{
		{"schema", false}, {"run", false}, {"manifest", false}, {"core", false},
		{"pinned", false}, {"policy", false}, {"lockfile", true}, {"host", false},
		{"base", false}, {"rootfsDiff", false}, {"keptRunning", false}, {"created", false},
	}
	// refMembersV2 are the members of a RefSchemaV2 ref; "parent" and
	// "fence" are required exactly when generation ≥ 2 (checked apart).
	refMembersV2 = []refMember{
		{"schema", false}, {"run", false}, {"generation", false}, {"parent", true},
		{"manifest", false}, {"core", false}, {"pinned", false}, {"policy", false},
		{"lockfile", true}, {"host", false}, {"base", false}, {"layers", false},
		{"spec", false}, {"runtime", false}, {"fence", true}, {"keptRunning", false},
		{"created", false},
	}
	hostMembers = []refMember{
		{"id", false}, {"idSource", false}, {"containerdVersion", false},
		{"snapshotter", false}, {"platform", false},
	}
	baseMembers = []refMember{
		{"name", false}, {"indexDigest", true}, {"manifestDigest", false},
		{"configDigest", false}, {"platform", false}, {"diffIDs", false},
	}
	layerMembers = []refMember{
		{"mediaType", false}, {"digest", false}, {"size", false},
		{"diffID", false}, {"uncompressedSize", false},
	}
	descriptorMembers = []refMember{
		{"mediaType", false}, {"digest", false}, {"size", false},
	}
	runtimeMembers = []refMember{
		{"name", false}, {"options", true},
	}
	runtimeOptionsMembers = []refMember{
		{"typeUrl", false}, {"value", false},
	}
	// The regexps are compiled on first use, not at process start (every
	// command links this package; most never read a ref).
	envNameRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	addressRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^blake3:[0-9a-f]{64}$`) })
	sha256HexRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })
)

// refDecoder collects refusals while decoding a ref object.
type refDecoder struct {
	rs     []envmanifest.Refusal
	schema string // the ref's schema string, once known
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
				"unknown member %q in %s (%s has no such member; a new member means a new schema)", m.Name, what, d.schema)
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

// size decodes the number node n (member name) as a whole number of
// bytes ≥ 0 (at most 2^53−1).
func (d *refDecoder) size(n *strictjson.Node, name string) int64 {
	v, _ := d.whole(n, name, "bytes", 0)
	return int64(v)
}

// whole decodes the number node n (member name) as a whole number
// ≥ lo and at most 2^53−1 (RFC 7493 §2.2); unit names what it counts in
// messages. The number's text is n.Raw, the token as written, so "1.0"
// and "1e0" are read as written.
func (d *refDecoder) whole(n *strictjson.Node, name, unit string, lo uint64) (uint64, bool) {
	if n == nil {
		return 0, false
	}
	if n.Kind != strictjson.KindNumber {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%q must be a number of %s, not %s", name, unit, n.Kind)
		return 0, false
	}
	// n.Raw is the number token exactly as written (the decoder keeps
	// it), so "1.0" and "1e0" are read as written.
	tok := string(n.Raw)
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil || f < float64(lo) || f != math.Trunc(f) || f > 1<<53-1 {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%q must be a whole number of %s ≥ %d, not %s", name, unit, lo, tok)
		return 0, false
	}
	return uint64(f), true
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
	// A sha256 digest that digest.Parse accepts is "sha256:" and 64
	// lowercase hex already (go-digest validates the encoded part against
	// ^[a-f0-9]{64}$): no second check here.
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

// parseCore reads the ref's core: with coreCanonical (its JCS, known) by
// envmanifest.ParseCoreWithCanonical, else by envmanifest.ParseCoreCanonical.
func parseCore(c *strictjson.Node, coreCanonical []byte) (envmanifest.Core, []byte, error) {
	if coreCanonical != nil {
		return envmanifest.ParseCoreWithCanonical(c, coreCanonical)
	}
	return envmanifest.ParseCoreCanonical(c)
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
// (docs/design.md "Resume decision", check 3 "ref-schema").
//
// The schema is read first: RefSchemaV1, RefSchemaV2 and RefSchemaV3 are read with
// exactly their members (docs/design.md "SnapshotRef"); any other value —
// a newer "sandbox.snapshot-ref/N" (refused with a message saying which
// versions this tool reads), another string, another type, or none — is
// refused alone, at /ref/schema.
//
// Then every member is checked: run a valid run id (ValidRunID), manifest
// a "blake3:<64 hex>" address, digests valid (sha256 ones 64 lowercase
// hex), platforms os/arch[/variant], policy a sorted list of distinct
// environment names, lockfile "sha256:<64 hex>", created RFC 3339, core a
// manifest core (envmanifest.ParseCore). For RefSchemaV2 also: generation
// a whole number ≥ 1; parent ("sha256:<64 hex>") and fence (a whole number
// ≥ 1) present exactly when generation ≥ 2; 1 to MaxLayers layers, each
// with an OCI layer media type (tar, tar+gzip, tar+zstd); spec with media
// type MediaTypeSpec; runtime with a name and, optionally, options with a
// type URL and a base64 value. For RefSchemaV3 also: runUID a run UID
// (ValidRunUID); ancestors (1 to MaxAncestors "sha256:<64 hex>") present
// exactly when generation ≥ 2; memory with a known format, 1 to
// MaxMemoryBlobs blobs of that format's media types, the format's tool,
// a version, a binary digest, a platform exactly for runsc, a kernel and
// a CPU whose flags are sorted and distinct; repinnedFrom a manifest
// address; forkedFrom a run id, run UID, generation and ref digest; then,
// once all of that is well formed, the rules across members
// (lineageRefusals: the last ancestor is parent, at most generation − 1
// of them, repinnedFrom and forkedFrom at the generations they belong
// to). A RefSchemaV1 ref's one "rootfsDiff" is read as Layers[0], with
// Generation 1.
//
// Every problem is reported at its JSON Pointer into the file (the nodes'
// pointers: "/ref/run", "/ref/layers/0/digest") in one
// *envmanifest.RefusedError (exit 2). It does not check the signatures
// (check 2) or that manifest and pinned agree with core (check 4:
// checkIntegrity).
func decodeRef(inner *strictjson.Node) (*Ref, error) {
	return decodeRefCanonical(inner, nil)
}

// decodeRefCanonical is decodeRef given coreCanonical, the RFC 8785 JCS
// of inner's "core" as gowebpki/jcs wrote it (taken from the JCS of the
// whole ref the signatures cover: envelope.Document.CanonicalMember), so
// the core is not canonicalized again (envmanifest.ParseCoreWithCanonical).
// nil means not known: the core is canonicalized from its own text.
func decodeRefCanonical(inner *strictjson.Node, coreCanonical []byte) (*Ref, error) {
	d := &refDecoder{}
	if inner == nil {
		d.refuse("", envmanifest.ClassMissing, "no ref object")
		return nil, &envmanifest.RefusedError{Refusals: d.rs}
	}
	if inner.Kind != strictjson.KindObject {
		d.refuse(inner.Pointer, envmanifest.ClassInvalidValue, "the ref must be an object, not %s", inner.Kind)
		return nil, &envmanifest.RefusedError{Refusals: d.rs}
	}
	// The schema first: it decides which members a ref has.
	want, ok := d.schemaOf(inner)
	if !ok {
		return nil, &envmanifest.RefusedError{Refusals: d.rs}
	}
	r := &Ref{Schema: d.schema}
	top, _ := d.members(inner, "the ref", want)
	if s, ok := d.str(top["run"], "run"); ok {
		if !ValidRunID(s) {
			d.refuse(top["run"].Pointer, envmanifest.ClassInvalidValue, "run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", s, MaxRunIDLen)
		}
		r.Run = s
	}
	if s, ok := d.str(top["manifest"], "manifest"); ok {
		if !addressRE().MatchString(s) {
			d.refuse(top["manifest"].Pointer, envmanifest.ClassInvalidValue, "manifest must be blake3: and 64 lowercase hex, not %q", s)
		}
		r.Manifest = s
	}
	if c := top["core"]; c != nil {
		if c.Kind != strictjson.KindObject {
			d.refuse(c.Pointer, envmanifest.ClassInvalidValue, "core must be an object, not %s", c.Kind)
		} else if core, canonical, err := parseCore(c, coreCanonical); err != nil {
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
			if !sha256HexRE().MatchString(s) {
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
	if r.IsV1() {
		r.Generation = 1
		if m, ok := d.members(top["rootfsDiff"], "rootfsDiff", layerMembers); ok {
			r.Layers = []Layer{d.layer(m)}
		}
	} else {
		d.v2(inner, top, r)
		if r.IsV3() {
			d.v3(top, r)
		}
	}
	r.KeptRunning = d.boolean(top["keptRunning"], "keptRunning")
	if s, ok := d.str(top["created"], "created"); ok {
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			d.refuse(top["created"].Pointer, envmanifest.ClassInvalidValue, "created must be an RFC 3339 time, not %q", s)
		}
		r.Created = s
	}
	if r.IsV3() && len(d.rs) == 0 {
		// The rules across the /3 members, once every member is well formed.
		d.rs = lineageRefusals(r, inner.Pointer)
	}
	if len(d.rs) > 0 {
		envmanifest.SortRefusals(d.rs)
		return nil, &envmanifest.RefusedError{Refusals: d.rs}
	}
	return r, nil
}

// schemaOf reads the ref's "schema" member and returns the members of that
// schema; ok is false, with one refusal at /ref/schema, when the schema is
// not one this tool reads.
func (d *refDecoder) schemaOf(inner *strictjson.Node) ([]refMember, bool) {
	ptr := strictjson.Pointer(inner.Pointer, "schema")
	n := inner.Get("schema")
	switch {
	case n == nil:
		d.refuse(ptr, envmanifest.ClassMissing, "the ref needs member \"schema\" (%s)", readSchemas)
		return nil, false
	case n.Kind != strictjson.KindString:
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "schema must be a string, not %s", n.Kind)
		return nil, false
	case n.Str == RefSchemaV3:
		d.schema = RefSchemaV3
		return refMembersV3, true
	case n.Str == RefSchemaV2:
		d.schema = RefSchemaV2
		return refMembersV2, true
	case n.Str == RefSchemaV1:
		d.schema = RefSchemaV1
		return refMembersV1, true
	}
	if v, ok := strings.CutPrefix(n.Str, refSchemaPrefix); ok {
		if k, err := strconv.Atoi(v); err == nil && k > 3 {
			d.refuse(n.Pointer, envmanifest.ClassInvalidValue,
				"schema %q is newer than this tool reads (%s); upgrade sandbox-resume to read it", n.Str, readSchemas)
			return nil, false
		}
	}
	d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "schema must be %s, not %q", readSchemas, n.Str)
	return nil, false
}

// readSchemas names the schemas this tool reads, for messages.
const readSchemas = `"` + RefSchemaV3 + `", "` + RefSchemaV2 + `" or "` + RefSchemaV1 + `"`

// v2 decodes the members only a RefSchemaV2 ref has: generation, parent,
// layers, spec, runtime and fence.
func (d *refDecoder) v2(inner *strictjson.Node, top map[string]*strictjson.Node, r *Ref) {
	gen, genOK := d.whole(top["generation"], "generation", "generations", 1)
	r.Generation = gen
	if genOK {
		laterOnly := []string{"parent", "fence"}
		if r.IsV3() {
			laterOnly = append(laterOnly, "ancestors")
		}
		for _, name := range laterOnly {
			switch n := top[name]; {
			case gen >= 2 && n == nil:
				d.refuse(strictjson.Pointer(inner.Pointer, name), envmanifest.ClassMissing,
					"generation %d needs member %q (present exactly when generation ≥ 2)", gen, name)
			case gen == 1 && n != nil:
				d.refuse(n.Pointer, envmanifest.ClassInvalidValue,
					"generation 1 has no %q (present exactly when generation ≥ 2)", name)
			}
		}
	}
	if n := top["parent"]; n != nil {
		if s, ok := d.str(n, "parent"); ok {
			if !sha256HexRE().MatchString(s) {
				d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "parent must be sha256: and 64 lowercase hex (the parent ref file's digest), not %q", s)
			} else {
				r.Parent = digest.Digest(s)
			}
		}
	}
	if n := top["fence"]; n != nil {
		r.Fence, _ = d.whole(n, "fence", "fencing tokens", 1)
	}
	if n := top["layers"]; n != nil {
		switch {
		case n.Kind != strictjson.KindArray:
			d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "layers must be an array of layer descriptors, not %s", n.Kind)
		case len(n.Elems) == 0 || len(n.Elems) > MaxLayers:
			d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "layers must hold 1 to %d layers, not %d", MaxLayers, len(n.Elems))
		default:
			r.Layers = make([]Layer, 0, len(n.Elems))
			for i, e := range n.Elems {
				if m, ok := d.members(e, fmt.Sprintf("layer %d", i), layerMembers); ok {
					r.Layers = append(r.Layers, d.layer(m))
				}
			}
		}
	}
	if m, ok := d.members(top["spec"], "spec", descriptorMembers); ok {
		spec := &Descriptor{}
		if s, ok := d.str(m["mediaType"], "mediaType"); ok {
			if s != MediaTypeSpec {
				d.refuse(m["mediaType"].Pointer, envmanifest.ClassInvalidValue, "spec mediaType must be %q, not %q", MediaTypeSpec, s)
			}
			spec.MediaType = s
		}
		spec.Digest = d.digest(m["digest"], "digest")
		spec.Size = d.size(m["size"], "size")
		if spec.Size > MaxSpecSize {
			d.refuse(m["size"].Pointer, envmanifest.ClassInvalidValue, "spec size %d is more than %d bytes: a runtime spec is never that large (docs/design.md \"Hardening\", \"Bounded reads\")", spec.Size, MaxSpecSize)
		}
		r.Spec = spec
	}
	if m, ok := d.members(top["runtime"], "runtime", runtimeMembers); ok {
		rt := &Runtime{}
		if s, ok := d.str(m["name"], "name"); ok {
			if s == "" {
				d.refuse(m["name"].Pointer, envmanifest.ClassInvalidValue, "runtime name must not be empty")
			}
			rt.Name = s
		}
		if om, ok := d.members(m["options"], "runtime options", runtimeOptionsMembers); ok {
			opts := &RuntimeOptions{}
			if s, ok := d.str(om["typeUrl"], "typeUrl"); ok {
				if s == "" {
					d.refuse(om["typeUrl"].Pointer, envmanifest.ClassInvalidValue, "typeUrl must not be empty")
				}
				opts.TypeURL = s
			}
			if s, ok := d.str(om["value"], "value"); ok {
				v, err := base64.StdEncoding.Strict().DecodeString(s)
				if err != nil {
					d.refuse(om["value"].Pointer, envmanifest.ClassInvalidValue, "value must be standard base64 with padding (RFC 4648 §4): %v", err)
				}
				opts.Value = v
			}
			rt.Options = opts
		}
		r.Runtime = rt
	}
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
		case !envNameRE().MatchString(s):
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

// LayerMediaTypes are the media types a SnapshotRef layer may have: the
// OCI layer media types (image-spec v1.1 "Image Layer Filesystem
// Changeset"): tar, tar+gzip and tar+zstd.
var LayerMediaTypes = []string{
	ocispec.MediaTypeImageLayer, ocispec.MediaTypeImageLayerGzip, ocispec.MediaTypeImageLayerZstd,
}

func (d *refDecoder) layer(m map[string]*strictjson.Node) Layer {
	var l Layer
	if s, ok := d.str(m["mediaType"], "mediaType"); ok {
		if !slices.Contains(LayerMediaTypes, s) {
			d.refuse(m["mediaType"].Pointer, envmanifest.ClassInvalidValue, "mediaType must be an OCI layer media type (%s), not %q", strings.Join(LayerMediaTypes, ", "), s)
		}
		l.MediaType = s
	}
	l.Digest = d.digest(m["digest"], "digest")
	l.Size = d.size(m["size"], "size")
	l.DiffID = d.digest(m["diffID"], "diffID")
	l.UncompressedSize = d.size(m["uncompressedSize"], "uncompressedSize")
	return l
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

// refWireV1 is the JSON form of a RefSchemaV1 ref.
type refWireV1 struct {
	Schema      string           `json:"schema"`
	Run         string           `json:"run"`
	Manifest    string           `json:"manifest"`
	Core        envmanifest.Core `json:"core"`
	Pinned      bool             `json:"pinned"`
	Policy      []string         `json:"policy"`
	Lockfile    string           `json:"lockfile,omitempty"`
	Host        Host             `json:"host"`
	Base        Base             `json:"base"`
	RootfsDiff  Layer            `json:"rootfsDiff"`
	KeptRunning bool             `json:"keptRunning"`
	Created     string           `json:"created"`
}

// refWireV2 is the JSON form of a RefSchemaV2 ref.
type refWireV2 struct {
	Schema      string           `json:"schema"`
	Run         string           `json:"run"`
	Generation  uint64           `json:"generation"`
	Parent      digest.Digest    `json:"parent,omitempty"`
	Manifest    string           `json:"manifest"`
	Core        envmanifest.Core `json:"core"`
	Pinned      bool             `json:"pinned"`
	Policy      []string         `json:"policy"`
	Lockfile    string           `json:"lockfile,omitempty"`
	Host        Host             `json:"host"`
	Base        Base             `json:"base"`
	Layers      []Layer          `json:"layers"`
	Spec        Descriptor       `json:"spec"`
	Runtime     Runtime          `json:"runtime"`
	Fence       *uint64          `json:"fence,omitempty"`
	KeptRunning bool             `json:"keptRunning"`
	Created     string           `json:"created"`
}

// MarshalJSON writes the ref in the wire form of its Schema
// (docs/design.md "SnapshotRef"): a RefSchemaV1 ref with its one layer as
// "rootfsDiff" and no generation, parent, spec, runtime or fence; a
// RefSchemaV2 ref with every member, "parent" and "fence" exactly when
// Generation ≥ 2; a RefSchemaV3 ref as /2 plus "runUID", "ancestors"
// (Generation ≥ 2) and the optional "memory", "repinnedFrom" and
// "forkedFrom". Policy and Base.DiffIDs nil are written as []. A ref that
// its schema cannot express — another schema, a V1 ref without exactly
// one layer or at a generation other than 1, a V1 or V2 ref with a /3
// member, a V2 or V3 ref without Spec or Runtime, a V3 ref that breaks
// check 3's rules across members (lineageRefusals, wrapped as a
// *envmanifest.RefusedError) — is an error naming what is wrong.
func (r Ref) MarshalJSON() ([]byte, error) {
	policy := r.Policy
	if policy == nil {
		policy = []string{}
	}
	base := r.Base
	if base.DiffIDs == nil {
		base.DiffIDs = []digest.Digest{}
	}
	if r.Schema != RefSchemaV3 && r.hasV3Members() {
		return nil, fmt.Errorf("snapshot ref of run %q: a %s ref has no runUID, ancestors, memory, repinnedFrom or forkedFrom (%s members)", r.Run, r.Schema, RefSchemaV3)
	}
	switch r.Schema {
	case RefSchemaV1:
		if len(r.Layers) != 1 || r.Generation > 1 || r.Parent != "" || r.Spec != nil || r.Runtime != nil || r.Fence != 0 {
			return nil, fmt.Errorf("snapshot ref of run %q: a %s ref records generation 1 with exactly one layer and no parent, spec, runtime or fence (has generation %d, %d layers)",
				r.Run, RefSchemaV1, r.Generation, len(r.Layers))
		}
		return json.Marshal(refWireV1{
			Schema: r.Schema, Run: r.Run, Manifest: r.Manifest, Core: r.Core, Pinned: r.Pinned, Policy: policy,
			Lockfile: r.Lockfile, Host: r.Host, Base: base, RootfsDiff: r.Layers[0], KeptRunning: r.KeptRunning, Created: r.Created,
		})
	case RefSchemaV2, RefSchemaV3:
		if r.Spec == nil || r.Runtime == nil {
			return nil, fmt.Errorf("snapshot ref of run %q generation %d: a %s ref needs a spec and a runtime", r.Run, r.Generation, r.Schema)
		}
		if r.Generation == 0 {
			return nil, fmt.Errorf("snapshot ref of run %q: generation 0 (generations start at 1)", r.Run)
		}
		w := refWireV2{
			Schema: r.Schema, Run: r.Run, Generation: r.Generation, Manifest: r.Manifest, Core: r.Core, Pinned: r.Pinned,
			Policy: policy, Lockfile: r.Lockfile, Host: r.Host, Base: base, Layers: r.Layers, Spec: *r.Spec,
			Runtime: *r.Runtime, KeptRunning: r.KeptRunning, Created: r.Created,
		}
		if w.Layers == nil {
			w.Layers = []Layer{}
		}
		if r.Generation >= 2 {
			fence := r.Fence
			w.Parent, w.Fence = r.Parent, &fence
		} else if r.Parent != "" || r.Fence != 0 {
			return nil, fmt.Errorf("snapshot ref of run %q: generation 1 has no parent or fence", r.Run)
		}
		if r.Schema == RefSchemaV2 {
			return json.Marshal(w)
		}
		if rs := lineageRefusals(&r, ""); len(rs) > 0 {
			return nil, fmt.Errorf("snapshot ref of run %q generation %d: %w", r.Run, r.Generation, &envmanifest.RefusedError{Refusals: rs})
		}
		return json.Marshal(refWireV3{refWireV2: w, RunUID: r.RunUID, Ancestors: r.Ancestors, Memory: r.Memory,
			RepinnedFrom: r.RepinnedFrom, ForkedFrom: r.ForkedFrom})
	}
	return nil, fmt.Errorf("snapshot ref of run %q: schema %q is not %s", r.Run, r.Schema, readSchemas)
}

// Canonical returns the RFC 8785 JCS bytes of the ref's JSON form
// (MarshalJSON): the bytes its signatures cover.
func (r *Ref) Canonical() ([]byte, error) {
	raw, err := json.Marshal(r)
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
// a signer does not sign with Ed25519, and (fail closed) when the ref's
// bytes would not pass check 3 when read back (decodeRef: a
// *envmanifest.RefusedError naming each member), so no ref is signed that
// its readers refuse.
func SignRef(r *Ref, signers ...crypto.Signer) ([]byte, error) {
	canonical, err := r.Canonical()
	if err != nil {
		return nil, err
	}
	wrapped := append(append([]byte(`{"ref":`), canonical...), `,"signatures":[]}`...)
	doc, err := envmanifest.ParseSigned(wrapped, envelope.MemberRef)
	if err == nil {
		_, err = decodeRef(doc.Inner)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot ref of run %q generation %d would not be read back: %w", r.Run, r.Generation, err)
	}
	return envelope.Sign(envelope.MemberRef, canonical, signers...)
}
