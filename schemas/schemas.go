// Package schemas generates the JSON Schemas (Draft 2020-12) of the
// documents sandbox-resume reads and writes, so the sandbox runtime, custom
// runtimes and CI jobs can validate them with stock tooling
// (docs/design.md "Schemas").
//
// The schemas are generated from the Go types (envmanifest.Core,
// envelope.Signature, snapshot.Ref, resume.Verdict) and from the tables
// in the code (envmanifest.Properties, envmanifest.DefaultReservedEnv,
// resume.CheckNames, exitcode.Codes, the refusal and verdict classes):
// never hand-written. Each schema is self-contained (every definition it
// uses is in its own $defs; no cross-file $ref) and its bytes are
// deterministic: keys sorted, 2-space indentation, a final newline. The
// committed copies in this directory are byte-compared with Generate by
// TestSchemasGolden; `go test ./schemas -run TestSchemasGolden -update`
// rewrites them.
package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Dialect is the $schema of every generated schema: JSON Schema Draft
// 2020-12.
const Dialect = "https://json-schema.org/draft/2020-12/schema"

// IDBase prefixes the $id of every generated schema. The $id names the
// schema; it is not a fetch location (the repository serves the committed
// files at each tag).
const IDBase = "https://github.com/sandbox-resume/sandbox-resume/schemas/v1/"

// The generated file names, one per document.
const (
	FileDevcontainer   = "devcontainer.schema.json"    // the accepted devcontainer.json subset
	FileManifestCore   = "manifest-core.schema.json"   // a manifest core (sandbox.env-manifest/1)
	FileSignedManifest = "signed-manifest.schema.json" // {"manifest": core, "signatures": [...]}
	FileSnapshotRef    = "snapshot-ref.schema.json"    // the SnapshotRef file {"ref": …, "signatures": [...]}
	FileVerdict        = "verdict.schema.json"         // the resume verdict (--output json)
)

// File is one generated schema: its file name and its exact bytes.
type File struct {
	Name string
	Data []byte
}

// Generate builds every schema from the Go types and tables, in file-name
// order. The bytes are deterministic. It fails only when a table holds
// something the generator has no rule for (a property class it does not
// know, an identity property without an input shape).
func Generate() ([]File, error) {
	return generate(envmanifest.Properties(), envmanifest.DefaultReservedEnv())
}

func generate(props []envmanifest.PropertyInfo, reserved []envmanifest.ReservedEnv) ([]File, error) {
	dev, err := devcontainerSchema(props, reserved)
	if err != nil {
		return nil, err
	}
	docs := []struct {
		name string
		s    map[string]any
	}{
		{FileDevcontainer, dev},
		{FileHandoff, handoffSchema()},
		{FileManifestCore, manifestCoreSchema()},
		{FileSignedManifest, signedManifestSchema()},
		{FileSnapshotRef, snapshotRefSchema()},
		{FileVerdict, verdictSchema()},
	}
	var out []File
	for _, d := range docs {
		data, err := Marshal(d.s)
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", d.name, err)
		}
		out = append(out, File{Name: d.name, Data: data})
	}
	return out, nil
}

// Marshal encodes a schema object deterministically: object keys sorted
// (encoding/json sorts map keys), 2-space indentation, no HTML escaping,
// and a final newline.
func Marshal(s map[string]any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// root wraps a schema body as a self-contained document.
func root(file, title, description string, body map[string]any, defs map[string]any) map[string]any {
	s := with(body, map[string]any{
		"$schema":     Dialect,
		"$id":         IDBase + file,
		"title":       title,
		"description": description,
	})
	if len(defs) > 0 {
		s["$defs"] = defs
	}
	return s
}

// digestPattern matches the digests go-digest validates (sha256, sha384,
// sha512; lowercase hex of the algorithm's size), per OCI image-spec
// "Digests".
func digestPattern() string {
	var alts []string
	for _, a := range []digest.Algorithm{digest.SHA256, digest.SHA384, digest.SHA512} {
		alts = append(alts, fmt.Sprintf("%s:[0-9a-f]{%d}", a, a.Size()*2))
	}
	return "(?:" + strings.Join(alts, "|") + ")"
}

// imagePattern matches an image reference as distribution/reference's
// grammar writes it (name, optional tag, optional digest), with the digest
// restricted to what go-digest validates. Built from the library's exported
// expressions, which use only syntax ECMAScript regular expressions share.
func imagePattern() string {
	return "^" + reference.NameRegexp.String() +
		"(?::" + reference.TagRegexp.String() + ")?" +
		"(?:@" + digestPattern() + ")?$"
}

const sha256Pattern = "^sha256:[0-9a-f]{64}$"

// maxSafeInteger is 2^53−1 (RFC 7493 §2.2), the largest size a ref records.
const maxSafeInteger = 1<<53 - 1

// coreReflector knows the manifest core's constraints (docs/design.md
// "Normalization", "Ingestion").
func coreReflector() *reflector {
	r := newReflector()
	r.types[reflect.TypeFor[digest.Digest]()] = func() map[string]any {
		return map[string]any{"$ref": "#/$defs/digest"}
	}
	r.defs["digest"] = map[string]any{
		"description": "an OCI content digest (image-spec \"Digests\") as go-digest validates it",
		"type":        "string",
		"pattern":     "^" + digestPattern() + "$",
	}
	r.descrip["Core"] = "the manifest core (" + envmanifest.CoreSchema + "): absent members are omitted, never null or empty; canonical bytes are its RFC 8785 JCS form"
	r.fields["Core.schema"] = set(map[string]any{"const": envmanifest.CoreSchema})
	r.fields["Core.image"] = set(map[string]any{"pattern": imagePattern(), "description": "fully qualified normalized image reference (distribution/reference)"})
	r.fields["Core.features"] = set(map[string]any{"minItems": 1, "description": "features sorted by id (UTF-8 byte order)"})
	r.fields["Core.containerEnv"] = set(map[string]any{
		"minProperties": 1,
		"propertyNames": map[string]any{"pattern": "^[^=]+$"},
	})
	r.fields["Core.mounts"] = set(map[string]any{"minItems": 1, "description": "mounts sorted by target (UTF-8 byte order)"})
	r.fields["Core.remoteUser"] = set(map[string]any{"minLength": 1})
	r.descrip["Feature"] = "one feature: its normalized identifier (OCI reference, https tarball or ./ path) and its options"
	r.fields["Feature.id"] = set(map[string]any{"minLength": 1})
	r.fields["Feature.options"] = replace(map[string]any{"type": "object", "description": "the feature's options, {} when none"})
	r.descrip["Mount"] = "one normalized mount; source is omitted when not declared"
	r.fields["Mount.kind"] = set(map[string]any{"enum": []any{"bind", "volume", "tmpfs"}})
	r.fields["Mount.target"] = set(map[string]any{"minLength": 1})
	r.fields["Mount.source"] = set(map[string]any{"minLength": 1})
	r.descrip["Signature"] = "one signature entry: the key id and the Ed25519 signature (RFC 8032) over the JCS bytes of the inner document"
	r.fields["Signature.keyid"] = set(map[string]any{"pattern": "^ed25519:[0-9a-f]{64}$", "description": "ed25519: + lowercase hex SHA-256 of the public key's PKIX DER"})
	// 64 bytes in RFC 4648 standard base64 with padding, decoded strictly:
	// 85 free characters, then one whose low 4 bits are zero, then "==".
	r.fields["Signature.sig"] = set(map[string]any{"pattern": "^[A-Za-z0-9+/]{85}[AQgw]==$", "description": "the 64-byte signature in RFC 4648 standard base64 with padding"})
	return r
}

func manifestCoreSchema() map[string]any {
	r := coreReflector()
	ref := r.schemaFor(reflect.TypeFor[envmanifest.Core]())
	return root(FileManifestCore, "sandbox-resume manifest core",
		"The normalized environment manifest core "+envmanifest.CoreSchema+" (docs/design.md \"Normalization\"). Sorting, pinned-ness and the address are not expressed here.",
		ref, r.defs)
}

// signedManifest is the wire shape of a signed manifest file (docs/design.md
// "Signed documents").
type signedManifest struct {
	Manifest   envmanifest.Core     `json:"manifest"`
	Signatures []envelope.Signature `json:"signatures"`
}

// signedRef is the wire shape of a SnapshotRef file.
type signedRef struct {
	Ref        snapshot.Ref         `json:"ref"`
	Signatures []envelope.Signature `json:"signatures"`
}

func signatures() fieldOverlay {
	return set(map[string]any{"minItems": 1, "description": "at least one entry names a trusted key; every entry naming a trusted key must verify"})
}

func signedManifestSchema() map[string]any {
	r := coreReflector()
	r.fields["signedManifest.signatures"] = signatures()
	body := r.structSchema(reflect.TypeFor[signedManifest](), "signedManifest")
	return root(FileSignedManifest, "sandbox-resume signed manifest",
		"A signed manifest file (docs/design.md \"Signed documents\"): the manifest core under \"manifest\" and its signatures over the core's JCS bytes as parsed.",
		body, r.defs)
}

func snapshotRefSchema() map[string]any {
	r := coreReflector()
	r.fields["signedRef.signatures"] = signatures()
	// One Go type, snapshot.Ref, holds the three schemas; each is
	// reflected from it under its own name, with the members of the others
	// removed.
	r.types[reflect.TypeFor[snapshot.Ref]()] = func() map[string]any { return map[string]any{"$ref": "#/$defs/Ref"} }
	r.defs["Ref"] = map[string]any{
		"description": "the SnapshotRef: " + snapshot.RefSchemaV3 + ", written by every suspend, or " + snapshot.RefSchemaV2 + " or " + snapshot.RefSchemaV1 + ", still read; a new member means a new schema string",
		"oneOf":       []any{map[string]any{"$ref": "#/$defs/RefV3"}, map[string]any{"$ref": "#/$defs/RefV2"}, map[string]any{"$ref": "#/$defs/RefV1"}},
	}
	v3Only := []string{"runUID", "ancestors", "memory", "repinnedFrom", "forkedFrom"}
	for _, name := range []string{"RefV1", "RefV2", "RefV3"} {
		r.fields[name+".run"] = set(map[string]any{"pattern": "^[a-z0-9]+(?:[._-][a-z0-9]+)*$", "maxLength": snapshot.MaxRunIDLen})
		r.fields[name+".manifest"] = set(map[string]any{"pattern": "^" + envmanifest.AddressPrefix + "[0-9a-f]{64}$", "description": "the address of core: blake3: + 64 lowercase hex"})
		r.fields[name+".pinned"] = set(map[string]any{"description": "IsPinned(core)"})
		r.fields[name+".policy"] = set(map[string]any{
			"items":       map[string]any{"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
			"uniqueItems": true,
			"description": "the effective reserved environment names ingestion applied, sorted; [] when none",
		})
		r.fields[name+".lockfile"] = set(map[string]any{"pattern": sha256Pattern, "description": "sha256 of the lockfile bytes used; absent when none"})
		r.fields[name+".created"] = set(map[string]any{"format": "date-time", "description": "RFC 3339, UTC"})
	}
	r.descrip["RefV1"] = "a " + snapshot.RefSchemaV1 + " ref: generation 1, its one layer as rootfsDiff, no spec"
	r.fields["RefV1.schema"] = set(map[string]any{"const": snapshot.RefSchemaV1})
	for _, m := range append([]string{"generation", "parent", "layers", "spec", "runtime", "fence"}, v3Only...) {
		r.fields["RefV1."+m] = fieldOverlay{absent: true}
	}
	r.descrip["RefV2"] = "a " + snapshot.RefSchemaV2 + " ref: one generation of a run; parent and fence present exactly when generation ≥ 2"
	r.fields["RefV2.schema"] = set(map[string]any{"const": snapshot.RefSchemaV2})
	for _, m := range v3Only {
		r.fields["RefV2."+m] = fieldOverlay{absent: true}
	}
	r.descrip["RefV3"] = "a " + snapshot.RefSchemaV3 + " ref: " + snapshot.RefSchemaV2 + "'s members plus runUID, ancestors (present exactly when generation ≥ 2, the parent last, at most generation − 1: checked by the decoder), memory, repinnedFrom and forkedFrom"
	r.fields["RefV3.schema"] = set(map[string]any{"const": snapshot.RefSchemaV3})
	runUID := map[string]any{"type": "string", "pattern": "^" + snapshot.RunUIDPrefix + "[0-9a-f]{32}$", "description": "the run's UID: ruid: and 128 random bits in lowercase hex"}
	r.fields["RefV3.runUID"] = fieldOverlay{apply: func(map[string]any) map[string]any { return runUID }, required: true}
	r.fields["RefV3.ancestors"] = replace(map[string]any{"type": "array", "items": map[string]any{"type": "string", "pattern": sha256Pattern},
		"minItems": 1, "maxItems": snapshot.MaxAncestors, "uniqueItems": true,
		"description": "the digests of the run's earlier ref files, oldest first, the parent last; the latest 4096 past the cap"})
	r.fields["RefV3.repinnedFrom"] = set(map[string]any{"pattern": "^" + envmanifest.AddressPrefix + "[0-9a-f]{64}$", "description": "the manifest address a repin replaced (not this ref's own: checked by the decoder)"})
	for _, name := range []string{"RefV2", "RefV3"} {
		r.fields[name+".generation"] = set(map[string]any{"minimum": 1, "maximum": maxSafeInteger})
		r.fields[name+".parent"] = replace(map[string]any{"type": "string", "pattern": sha256Pattern, "description": "sha256 of the parent generation's ref file bytes"})
		r.fields[name+".layers"] = set(map[string]any{"minItems": 1, "maxItems": snapshot.MaxLayers, "description": "the rootfs diffs applied over base, oldest first"})
		r.fields[name+".spec"] = fieldOverlay{apply: func(map[string]any) map[string]any { return map[string]any{"$ref": "#/$defs/Spec"} }}
		r.fields[name+".fence"] = set(map[string]any{"minimum": 1, "maximum": maxSafeInteger, "description": "the fencing token of the container that was suspended"})
	}
	memoryByFormat := memorySchema(r)
	r.descrip["ForkedFrom"] = "the generation a fork started this run from"
	r.fields["ForkedFrom.run"] = set(map[string]any{"pattern": "^[a-z0-9]+(?:[._-][a-z0-9]+)*$", "maxLength": snapshot.MaxRunIDLen})
	r.fields["ForkedFrom.runUID"] = replace(runUID)
	r.fields["ForkedFrom.generation"] = set(map[string]any{"minimum": 1, "maximum": maxSafeInteger})
	r.fields["ForkedFrom.ref"] = replace(map[string]any{"type": "string", "pattern": sha256Pattern, "description": "sha256 of the source generation's ref file bytes"})
	r.descrip["Host"] = "the containerd daemon the run was suspended on"
	r.fields["Host.idSource"] = set(map[string]any{"enum": []any{snapshot.IDSourceIntrospection, snapshot.IDSourceOverride}})
	r.fields["Host.id"] = set(map[string]any{"minLength": 1})
	platform := map[string]any{"pattern": "^[^/]+/[^/]+(?:/[^/]+)?$", "description": "os/arch[/variant], normalized"}
	r.fields["Host.platform"] = set(platform)
	r.descrip["Base"] = "what the image reference resolved to through the content store for one platform"
	r.fields["Base.name"] = set(map[string]any{"pattern": imagePattern()})
	r.fields["Base.platform"] = set(platform)
	r.descrip["Layer"] = "one rootfs diff layer: the compressed blob and the uncompressed tar"
	size := map[string]any{"minimum": 0, "maximum": maxSafeInteger, "description": "bytes"}
	r.fields["Layer.size"] = set(size)
	r.fields["Layer.uncompressedSize"] = set(size)
	var layerTypes []any
	for _, mt := range snapshot.LayerMediaTypes {
		layerTypes = append(layerTypes, mt)
	}
	r.fields["Layer.mediaType"] = set(map[string]any{"enum": layerTypes})
	r.descrip["Descriptor"] = "a blob: media type, digest, size in bytes"
	r.fields["Descriptor.size"] = set(size)
	r.descrip["Runtime"] = "the container's runtime name and options (a protobuf Any)"
	r.fields["Runtime.name"] = set(map[string]any{"minLength": 1})
	r.descrip["RuntimeOptions"] = "the runtime options Any: its type URL and serialized value"
	r.fields["RuntimeOptions.typeUrl"] = set(map[string]any{"minLength": 1})
	r.fields["RuntimeOptions.value"] = replace(map[string]any{
		"type": "string", "pattern": "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
		"description": "the serialized message in RFC 4648 standard base64 with padding",
	})
	refType := reflect.TypeFor[snapshot.Ref]()
	r.defs["RefV1"] = nil // reserved against the reflection of its members
	v1 := r.structSchema(refType, "RefV1")
	v1["properties"].(map[string]any)["rootfsDiff"] = map[string]any{"$ref": "#/$defs/Layer"}
	v1["required"] = sortedStrings(append(v1["required"].([]string), "rootfsDiff"))
	r.defs["RefV1"] = v1
	// laterOnly: the members present exactly when generation ≥ 2 (later),
	// and those present only at generation 1 (first).
	laterOnly := func(later, first []string) []any {
		has := func(m string) any {
			return map[string]any{"type": "object", "properties": map[string]any{m: map[string]any{}}, "required": []any{m}}
		}
		var laterHas, notAtFirst, notLater []any
		for _, m := range later {
			laterHas = append(laterHas, m)
			notAtFirst = append(notAtFirst, has(m))
		}
		for _, m := range first {
			notLater = append(notLater, has(m))
		}
		then := map[string]any{"type": "object", "properties": map[string]any{}, "required": laterHas}
		for _, m := range later {
			then["properties"].(map[string]any)[m] = map[string]any{}
		}
		if len(notLater) > 0 {
			then["not"] = map[string]any{"anyOf": notLater}
		}
		return []any{map[string]any{
			"if":   map[string]any{"type": "object", "properties": map[string]any{"generation": map[string]any{"type": "integer", "minimum": 2}}, "required": []any{"generation"}},
			"then": then,
			"else": map[string]any{"type": "object", "not": map[string]any{"anyOf": notAtFirst}},
		}}
	}
	v2 := r.structSchema(refType, "RefV2")
	v2["allOf"] = laterOnly([]string{"parent", "fence"}, nil)
	r.defs["RefV2"] = v2
	v3 := r.structSchema(refType, "RefV3")
	// repinnedFrom: only at generation ≥ 2 (a member that is not required
	// there), on a pinned ref; forkedFrom only at generation 1.
	v3["allOf"] = append(laterOnly([]string{"parent", "fence", "ancestors"}, []string{"forkedFrom"}),
		map[string]any{
			"if":   map[string]any{"type": "object", "properties": map[string]any{"repinnedFrom": map[string]any{}}, "required": []any{"repinnedFrom"}},
			"then": map[string]any{"type": "object", "properties": map[string]any{"pinned": map[string]any{"const": true}, "generation": map[string]any{"type": "integer", "minimum": 2}}},
		})
	r.defs["RefV3"] = v3
	r.defs["Memory"].(map[string]any)["allOf"] = memoryByFormat
	r.defs["Spec"] = map[string]any{
		"description": "the recorded runtime spec blob: the exact bytes of the container's OCI runtime spec",
		"type":        "object",
		"allOf":       []any{map[string]any{"$ref": "#/$defs/Descriptor"}},
		"properties":  map[string]any{"mediaType": map[string]any{"type": "string", "const": snapshot.MediaTypeSpec}},
	}
	body := r.structSchema(reflect.TypeFor[signedRef](), "signedRef")
	return root(FileSnapshotRef, "sandbox-resume SnapshotRef file",
		"A SnapshotRef file (docs/design.md \"SnapshotRef\", \"Signed documents\"): the ref under \"ref\" and its signatures over the ref's JCS bytes as parsed. The inner document alone is #/$defs/Ref. That manifest is the address of core and pinned is IsPinned(core) is checked by resume (check 4), not here.",
		body, r.defs)
}

// memorySchema sets the overlays of a ref's memory member (docs/design.md
// "Memory"): each format's tool, blob media types and platform rule.
// It returns the rules by format, for the Memory definition's allOf.
func memorySchema(r *reflector) []any {
	var formats []any
	var byFormat []any
	for _, f := range []string{snapshot.MemoryFormatCRIU, snapshot.MemoryFormatRunsc} {
		mf, _ := snapshot.LookupMemoryFormat(f)
		formats = append(formats, f)
		var types []any
		for _, mt := range mf.MediaTypes {
			types = append(types, mt)
		}
		runtime := map[string]any{"type": "object", "properties": map[string]any{"tool": map[string]any{"const": mf.Tool}}}
		if mf.Platform {
			runtime["properties"].(map[string]any)["platform"] = map[string]any{}
			runtime["required"] = []any{"platform"}
		} else {
			runtime["not"] = map[string]any{"type": "object", "properties": map[string]any{"platform": map[string]any{}}, "required": []any{"platform"}}
		}
		byFormat = append(byFormat, map[string]any{
			"if": map[string]any{"type": "object", "properties": map[string]any{"format": map[string]any{"const": f}}, "required": []any{"format"}},
			"then": map[string]any{"type": "object", "properties": map[string]any{
				"runtime": runtime,
				"blobs":   map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{"mediaType": map[string]any{"enum": types}}}},
			}},
		})
	}
	r.descrip["Memory"] = "a generation's process memory image: its format, blobs, the checkpoint tool and the host it was taken on"
	r.fields["Memory.format"] = set(map[string]any{"enum": formats})
	r.fields["Memory.blobs"] = set(map[string]any{"minItems": 1, "maxItems": snapshot.MaxMemoryBlobs, "description": "the image's blobs, each with a media type of its format"})
	r.descrip["MemoryRuntime"] = "the checkpoint tool: the format's tool, its version, the digest of its binary, and runsc's platform"
	nonEmpty := set(map[string]any{"minLength": 1})
	r.fields["MemoryRuntime.version"] = nonEmpty
	r.fields["MemoryRuntime.platform"] = nonEmpty
	r.descrip["MemoryHost"] = "the kernel release and the CPU the image was taken on"
	r.fields["MemoryHost.kernel"] = nonEmpty
	r.descrip["CPU"] = "the processor as /proc/cpuinfo names it; flags sorted without duplicates"
	r.fields["CPU.vendor"] = nonEmpty
	r.fields["CPU.family"] = set(map[string]any{"minimum": 0, "maximum": maxSafeInteger})
	r.fields["CPU.model"] = set(map[string]any{"minimum": 0, "maximum": maxSafeInteger})
	r.fields["CPU.flags"] = set(map[string]any{"items": map[string]any{"type": "string", "pattern": "^[a-z0-9_]+$"}, "uniqueItems": true})
	return byFormat
}

// sortedStrings sorts ss in place and returns it.
func sortedStrings(ss []string) []string {
	sort.Strings(ss)
	return ss
}

// refusalClasses lists every envmanifest.Class (docs/design.md "Refusal classes").
var refusalClasses = []envmanifest.Class{
	envmanifest.ClassSyntax, envmanifest.ClassEncoding, envmanifest.ClassLimit,
	envmanifest.ClassNumber, envmanifest.ClassDuplicateKey, envmanifest.ClassExecutesOrWidens,
	envmanifest.ClassChangesWhatRuns, envmanifest.ClassUnknownProperty, envmanifest.ClassInvalidValue,
	envmanifest.ClassMissing, envmanifest.ClassConflict, envmanifest.ClassLockfile,
	envmanifest.ClassReservedEnv,
}

// verdictClasses lists every class a verdict can carry (internal/exitcode).
var verdictClasses = exitcode.VerdictClasses

func verdictSchema() map[string]any {
	r := coreReflector()
	r.descrip["Verdict"] = "the resume verdict: checks run in order; the first failure decides class and exitCode"
	classEnum := []any{nil}
	for _, c := range verdictClasses {
		classEnum = append(classEnum, string(c))
	}
	r.fields["Verdict.class"] = replace(map[string]any{"enum": classEnum, "description": "null when accepted"})
	var codes []any
	for _, e := range exitcode.Codes {
		codes = append(codes, e.Code)
	}
	r.fields["Verdict.exitCode"] = set(map[string]any{"enum": codes})
	var prefix []any
	for _, name := range resume.CheckNames {
		prefix = append(prefix, map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"const": name}}})
	}
	r.fields["Verdict.checks"] = fieldOverlay{apply: func(b map[string]any) map[string]any {
		items := b["items"]
		return map[string]any{
			"type":        "array",
			"prefixItems": prefix,
			"items":       false,
			"minItems":    len(prefix),
			"allOf":       []any{map[string]any{"items": items}},
			"description": "every check, in the order they run",
		}
	}}
	r.fields["Verdict.refusals"] = set(map[string]any{"description": "the ingestion refusals of check offered-ingest, or the devcontainer.metadata label refusals of check image (pointers under /config/Labels/devcontainer.metadata), sorted by pointer"})
	r.fields["Verdict.specDrift"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return with(b, map[string]any{"description": "check spec's comparison of the offered runtime spec (--spec) with the recorded one (a /1 ref: the one built from the image config), present exactly when a spec was offered and both decoded: every member that widens the recorded spec, and the bind mount sources that differ (allowed: true); [] when nothing differs"})
	}}
	r.descrip["SpecDrift"] = "one member of the offered runtime spec that differs from the recorded one: pointer into the recorded spec when the member is there, else into the offered one; an absent side is omitted; allowed for a difference the rules allow (a bind mount's source)"
	r.fields["SpecDrift.allowed"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return with(b, map[string]any{"const": true, "description": "present (true) for an allowed difference: a bind mount's source"})
	}}
	r.fields["Verdict.container"] = fieldOverlay{optional: true}
	r.fields["Verdict.notApplied"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return with(b, map[string]any{"description": "JSON Pointers of what the incarnation does not carry as recorded: the edits to its runtime spec (/process/terminal when it was true, /linux/namespaces/<i>/path for each recorded namespace path removed) and, for a /1 ref, pointers into the recorded core (mounts, remoteUser, containerEnv values holding ${…})"})
	}}
	r.fields["Verdict.pid"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return with(b, map[string]any{"description": "the started task's pid (resume --start)"})
	}}
	r.fields["Verdict.materialize"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return map[string]any{"allOf": []any{b}, "description": "materialization after check claim (resume without --check): name \"materialize\", pass or fail"}
	}}
	r.fields["Verdict.run"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return with(b, map[string]any{"description": "the verified ref's run id (once check ref-integrity passed)"})
	}}
	r.fields["Verdict.generation"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return with(b, map[string]any{"minimum": 1, "description": "the verified ref's generation (once check ref-integrity passed)"})
	}}
	r.fields["Verdict.fence"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return with(b, map[string]any{"minimum": 1, "description": "the fence token the ledger's Claim issued (resume without --check, once claimed)"})
	}}
	r.fields["Verdict.takenOver"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return map[string]any{"allOf": []any{b}, "description": "the live holder that --take-over fenced out (an operator's decision) and the fence it held"}
	}}
	r.fields["Verdict.copy"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return with(b, map[string]any{"const": true, "description": "present (true) when the claim accepted, as a copy (resume --copy), a generation this ledger never recorded with this ref"})
	}}
	var reasons []any
	for _, x := range exitcode.Reasons {
		reasons = append(reasons, x.Reason)
	}
	r.fields["Verdict.reason"] = fieldOverlay{optional: true, apply: func(b map[string]any) map[string]any {
		return with(b, map[string]any{"enum": reasons, "description": "the refusal's finer reason beside class (docs/exit-codes.md \"Reasons\"), when it has one"})
	}}
	r.descrip["TakenOver"] = "a holder fenced out by a take-over: host, namespace, container, and the fence it held"
	r.fields["CheckResult.result"] = set(map[string]any{"enum": []any{resume.ResultPass, resume.ResultFail, resume.ResultSkipped}})
	var rc []any
	for _, c := range refusalClasses {
		rc = append(rc, string(c))
	}
	r.fields["Refusal.class"] = set(map[string]any{"enum": rc})
	r.fields["Refusal.pointer"] = set(map[string]any{"description": "RFC 6901 JSON Pointer into the input; \"\" is the whole document"})
	r.descrip["DriftEntry"] = "one member that differs between the recorded and the offered core; an absent side is omitted"

	ref := r.schemaFor(reflect.TypeFor[resume.Verdict]())
	// Class ↔ exit code, from exitcode.Class.Code (the one table).
	rules := []any{map[string]any{
		"if":   map[string]any{"type": "object", "properties": map[string]any{"accepted": map[string]any{"const": true}}, "required": []any{"accepted"}},
		"then": map[string]any{"type": "object", "properties": map[string]any{"class": map[string]any{"const": nil}, "exitCode": map[string]any{"const": exitcode.OK}}},
		"else": map[string]any{"type": "object", "properties": map[string]any{"class": map[string]any{"type": "string"}}},
	}}
	for _, c := range verdictClasses {
		rules = append(rules, map[string]any{
			"if":   map[string]any{"type": "object", "properties": map[string]any{"class": map[string]any{"const": string(c)}}, "required": []any{"class"}},
			"then": map[string]any{"type": "object", "properties": map[string]any{"exitCode": map[string]any{"const": c.Code()}}},
		})
	}
	body := with(ref, map[string]any{"allOf": rules})
	return root(FileVerdict, "sandbox-resume resume verdict",
		"The resume verdict printed by `resume --output json` (docs/design.md \"Resume decision\"): exactly one object.",
		body, r.defs)
}
