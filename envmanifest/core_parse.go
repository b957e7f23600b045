package envmanifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/distribution/reference"
	"github.com/gowebpki/jcs"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// ParseCore reads a decoded manifest core (the "manifest" member of a signed
// manifest, the "core" member of a SnapshotRef) back into a Core, refusing
// anything that is not exactly a core as ingestion writes it (docs/design.md
// "Normalization"):
//
//   - members: "schema" (= CoreSchema) and "image" required; "features",
//     "containerEnv", "mounts", "remoteUser" optional; any other member is
//     "unknown-property";
//   - types: strings, an array of {"id": string, "options": object} sorted
//     by id, an object of string values, an array of {"source"?: string,
//     "target": string, "kind": "bind"|"volume"|"tmpfs"} sorted by target;
//   - normal form: image a fully-qualified normalized reference
//     (distribution/reference) with any sha256 digest in 64 lowercase hex;
//     no empty member (absent instead); no repeated feature id or mount
//     target; and the JCS of the resulting Core equals the JCS of n.Raw.
//
// Errors are a *RefusedError with one refusal per problem at its pointer
// (n.Pointer-based, so they point into the file).
func ParseCore(n *strictjson.Node) (Core, error) {
	c, _, err := parseCore(n, nil)
	return c, err
}

// ParseCoreCanonical is ParseCore that also returns the RFC 8785 JCS bytes
// of the core exactly as parsed (of n.Raw), which it computes anyway: the
// bytes whose BLAKE3 hash is the core's address.
func ParseCoreCanonical(n *strictjson.Node) (Core, []byte, error) {
	return parseCore(n, nil)
}

// ParseCoreWithCanonical is ParseCoreCanonical for a caller that already
// holds canonical, the RFC 8785 JCS of n.Raw as gowebpki/jcs wrote it (a
// signed manifest's envelope.Document.Canonical, or a SnapshotRef's "core"
// text inside the JCS of the ref: envelope.Document.CanonicalMember). No
// JCS pass runs over the core again; canonical is returned as it was given.
// Bytes that are not that JCS make the core refused as not in normal form
// (or as not canonicalizable), never accepted.
func ParseCoreWithCanonical(n *strictjson.Node, canonical []byte) (Core, []byte, error) {
	if canonical == nil {
		return Core{}, nil, errors.New("manifest core: no canonical bytes given")
	}
	return parseCore(n, canonical)
}

// parseCore is ParseCoreCanonical; canonical, when not nil, is the already
// computed JCS of n.Raw (an envelope.Document's Canonical), saving a JCS pass.
func parseCore(n *strictjson.Node, canonical []byte) (Core, []byte, error) {
	var c Core
	var rs []Refusal
	refuse := func(ptr string, class Class, format string, args ...any) {
		rs = append(rs, Refusal{Pointer: ptr, Class: class, Message: fmt.Sprintf(format, args...)})
	}
	if n == nil || n.Kind != strictjson.KindObject {
		p := ""
		if n != nil {
			p = n.Pointer
		}
		return c, nil, &RefusedError{Refusals: []Refusal{{Pointer: p, Class: ClassInvalidValue, Message: "a manifest core must be an object"}}}
	}
	str := func(v *strictjson.Node, name string) (string, bool) {
		if v.Kind != strictjson.KindString {
			refuse(v.Pointer, ClassInvalidValue, "%q must be a string, not %s", name, v.Kind)
			return "", false
		}
		return v.Str, true
	}
	for _, m := range n.Members {
		v := m.Value
		switch m.Name {
		case "schema":
			if s, ok := str(v, m.Name); ok && s != CoreSchema {
				refuse(v.Pointer, ClassInvalidValue, "schema %q, want %q", s, CoreSchema)
			}
			c.Schema = v.Str
		case "image":
			if s, ok := str(v, m.Name); ok {
				if msg := checkNormalizedImage(s); msg != "" {
					refuse(v.Pointer, ClassInvalidValue, "%s", msg)
				}
				c.Image = s
			}
		case "remoteUser":
			if s, ok := str(v, m.Name); ok {
				if s == "" {
					refuse(v.Pointer, ClassInvalidValue, "empty remoteUser is written as absent")
				}
				c.RemoteUser = s
			}
		case "containerEnv":
			c.ContainerEnv = parseCoreEnv(v, refuse)
		case "features":
			c.Features = parseCoreFeatures(v, refuse)
		case "mounts":
			c.Mounts = parseCoreMounts(v, refuse)
		default:
			refuse(v.Pointer, ClassUnknownProperty, "unknown member %q in a manifest core", m.Name)
		}
	}
	if n.Get("schema") == nil {
		refuse(strictjson.Pointer(n.Pointer, "schema"), ClassMissing, "a manifest core needs %q", "schema")
	}
	if n.Get("image") == nil {
		refuse(strictjson.Pointer(n.Pointer, "image"), ClassMissing, "a manifest core needs %q", "image")
	}
	if len(rs) == 0 {
		// The core must serialize back to the bytes it was read from, or
		// the address derived from the file would not be the address of
		// the Core the caller uses.
		var err error
		if canonical == nil {
			canonical, err = jcs.Transform(n.Raw)
		}
		if err != nil {
			refuse(n.Pointer, ClassInvalidValue, "%v", err)
		} else if same, err := c.canonicalIs(canonical); err != nil {
			refuse(n.Pointer, ClassInvalidValue, "%v", err)
		} else if !same {
			refuse(n.Pointer, ClassInvalidValue, "the manifest core is not in normal form")
		}
	}
	if len(rs) > 0 {
		SortRefusals(rs)
		return Core{}, nil, &RefusedError{Refusals: rs}
	}
	return c, canonical, nil
}

// checkNormalizedImage returns "" when s is a reference in the form
// ingestion writes: reference.ParseNormalizedNamed then TagNameOnly, the
// string unchanged, and a sha256 digest of 64 lowercase hex.
func checkNormalizedImage(s string) string {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return fmt.Sprintf("image %q is not a valid reference: %v", s, err)
	}
	if norm := reference.TagNameOnly(named).String(); norm != s {
		return fmt.Sprintf("image %q is not normalized (want %q)", s, norm)
	}
	if d, ok := named.(reference.Digested); ok {
		if err := d.Digest().Validate(); err != nil {
			return fmt.Sprintf("image %q: digest: %v", s, err)
		}
	}
	return ""
}

func parseCoreEnv(v *strictjson.Node, refuse func(string, Class, string, ...any)) map[string]string {
	if v.Kind != strictjson.KindObject {
		refuse(v.Pointer, ClassInvalidValue, "%q must be an object, not %s", "containerEnv", v.Kind)
		return nil
	}
	if len(v.Members) == 0 {
		refuse(v.Pointer, ClassInvalidValue, "empty containerEnv is written as absent")
		return nil
	}
	env := make(map[string]string, len(v.Members))
	for _, m := range v.Members {
		switch {
		case m.Value.Kind != strictjson.KindString:
			refuse(m.Value.Pointer, ClassInvalidValue, "containerEnv values must be strings, not %s", m.Value.Kind)
		case m.Name == "" || strings.Contains(m.Name, "="):
			refuse(m.Value.Pointer, ClassInvalidValue, "containerEnv name %q is empty or contains '='", m.Name)
		default:
			env[m.Name] = m.Value.Str
		}
	}
	return env
}

func parseCoreFeatures(v *strictjson.Node, refuse func(string, Class, string, ...any)) []Feature {
	if v.Kind != strictjson.KindArray {
		refuse(v.Pointer, ClassInvalidValue, "%q must be an array, not %s", "features", v.Kind)
		return nil
	}
	if len(v.Elems) == 0 {
		refuse(v.Pointer, ClassInvalidValue, "empty features are written as absent")
		return nil
	}
	var out []Feature
	prev := ""
	for i, e := range v.Elems {
		if e.Kind != strictjson.KindObject {
			refuse(e.Pointer, ClassInvalidValue, "a feature must be an object, not %s", e.Kind)
			continue
		}
		checkOnlyMembers(e, refuse, "feature", "id", "options")
		var f Feature
		id, opts := e.Get("id"), e.Get("options")
		switch {
		case id == nil:
			refuse(strictjson.Pointer(e.Pointer, "id"), ClassMissing, "a feature needs a string %q", "id")
		case id.Kind != strictjson.KindString:
			refuse(id.Pointer, ClassInvalidValue, "%q must be a string, not %s", "id", id.Kind)
		default:
			f.ID = id.Str
			if msg := checkFeatureID(id.Str); msg != "" {
				refuse(id.Pointer, ClassInvalidValue, "%s", msg)
			}
			if i > 0 && id.Str <= prev {
				refuse(id.Pointer, ClassInvalidValue, "features must be sorted by id without repeats (%q after %q)", id.Str, prev)
			}
			prev = id.Str
		}
		switch {
		case opts == nil:
			refuse(strictjson.Pointer(e.Pointer, "options"), ClassMissing, "a feature needs an object %q ({} when empty)", "options")
		case opts.Kind != strictjson.KindObject:
			refuse(opts.Pointer, ClassInvalidValue, "%q must be an object, not %s", "options", opts.Kind)
		default:
			// Each options object is canonicalized on its own here, and
			// again inside the core's JCS: measured, that is cheaper for
			// small options than reading them back out of the core's
			// canonical bytes (canonicalize), which Ingest does.
			canon, err := jcs.Transform(opts.Raw)
			if err != nil {
				refuse(opts.Pointer, ClassInvalidValue, "options: %v", err)
			}
			f.Options = json.RawMessage(canon)
		}
		out = append(out, f)
	}
	return out
}

// checkFeatureID accepts the three identifier forms a core can hold: an
// https:// tarball URL, a ./ local path, or a lower-case OCI reference with
// a registry domain.
func checkFeatureID(id string) string {
	switch {
	case strings.HasPrefix(id, "https://"):
		return ""
	case strings.HasPrefix(id, "./"):
		clean := path.Clean(id)
		if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || "./"+clean != id {
			return fmt.Sprintf("feature id %q is not a clean local path inside the config's folder", id)
		}
		return ""
	}
	if strings.ToLower(id) != id {
		return fmt.Sprintf("feature id %q is not lower-case", id)
	}
	named, err := reference.ParseNormalizedNamed(id)
	if err != nil {
		return fmt.Sprintf("feature id %q is not a valid reference: %v", id, err)
	}
	if d, ok := named.(reference.Digested); ok {
		if err := d.Digest().Validate(); err != nil {
			return fmt.Sprintf("feature id %q: digest: %v", id, err)
		}
	}
	return ""
}

func parseCoreMounts(v *strictjson.Node, refuse func(string, Class, string, ...any)) []Mount {
	if v.Kind != strictjson.KindArray {
		refuse(v.Pointer, ClassInvalidValue, "%q must be an array, not %s", "mounts", v.Kind)
		return nil
	}
	if len(v.Elems) == 0 {
		refuse(v.Pointer, ClassInvalidValue, "empty mounts are written as absent")
		return nil
	}
	var out []Mount
	prev := ""
	cleaned := map[string]string{}
	for i, e := range v.Elems {
		if e.Kind != strictjson.KindObject {
			refuse(e.Pointer, ClassInvalidValue, "a mount must be an object, not %s", e.Kind)
			continue
		}
		checkOnlyMembers(e, refuse, "mount", "source", "target", "kind")
		var m Mount
		if s := e.Get("source"); s != nil {
			if s.Kind != strictjson.KindString || s.Str == "" {
				refuse(s.Pointer, ClassInvalidValue, "%q must be a non-empty string", "source")
			}
			m.Source = s.Str
		}
		if k := e.Get("kind"); k == nil {
			refuse(strictjson.Pointer(e.Pointer, "kind"), ClassMissing, "a mount needs %q", "kind")
		} else if k.Kind != strictjson.KindString || (k.Str != "bind" && k.Str != "volume" && k.Str != "tmpfs") {
			refuse(k.Pointer, ClassInvalidValue, "%q must be \"bind\", \"volume\" or \"tmpfs\"", "kind")
		} else {
			m.Kind = k.Str
		}
		t := e.Get("target")
		switch {
		case t == nil:
			refuse(strictjson.Pointer(e.Pointer, "target"), ClassMissing, "a mount needs %q", "target")
		case t.Kind != strictjson.KindString || t.Str == "":
			refuse(t.Pointer, ClassInvalidValue, "%q must be a non-empty string", "target")
		default:
			m.Target = t.Str
			if i > 0 && t.Str <= prev {
				refuse(t.Pointer, ClassInvalidValue, "mounts must be sorted by target without repeats (%q after %q)", t.Str, prev)
			}
			prev = t.Str
			if other, dup := cleaned[path.Clean(t.Str)]; dup {
				refuse(t.Pointer, ClassConflict, "mount target %q is the same path as %q", t.Str, other)
			}
			cleaned[path.Clean(t.Str)] = t.Str
		}
		out = append(out, m)
	}
	return out
}

func checkOnlyMembers(e *strictjson.Node, refuse func(string, Class, string, ...any), what string, allowed ...string) {
	for _, m := range e.Members {
		known := false
		for _, a := range allowed {
			known = known || m.Name == a
		}
		if !known {
			refuse(m.Value.Pointer, ClassUnknownProperty, "unknown member %q in a %s (allowed: %s)", m.Name, what, strings.Join(allowed, ", "))
		}
	}
}

// VerifiedManifest is the result of verifying a signed manifest: the core
// read back, its canonical bytes (the signed bytes), the address derived
// from them, pinned-ness, and the keyids of the trusted entries that
// verified (file order).
type VerifiedManifest struct {
	Core        Core
	Canonical   []byte
	Address     string
	Pinned      bool
	ImagePinned bool
	KeyIDs      []string
}

// VerifySignedManifest checks a signed manifest file's bytes in the order
// of resume's checks 1–3 (docs/design.md "Signed documents", "Resume
// decision"): ParseSigned with member "manifest" (*RefusedError), Verify
// against trust (wrapping envelope.ErrSignature), then ParseCore
// (*RefusedError).
func VerifySignedManifest(data []byte, trust *envelope.KeyRing) (*VerifiedManifest, error) {
	doc, err := ParseSigned(data, envelope.MemberManifest)
	if err != nil {
		return nil, err
	}
	return verifyManifestDoc(doc, trust)
}

// VerifySignedManifestFile is VerifySignedManifest on the file at path;
// refusals carry path as their Source, and a missing file is refused.
func VerifySignedManifestFile(path string, trust *envelope.KeyRing) (*VerifiedManifest, error) {
	doc, err := ReadSigned(path, envelope.MemberManifest)
	if err != nil {
		return nil, err
	}
	vm, err := verifyManifestDoc(doc, trust)
	var re *RefusedError
	switch {
	case errors.As(err, &re):
		re.Source = path
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return vm, nil
}

func verifyManifestDoc(doc *envelope.Document, trust *envelope.KeyRing) (*VerifiedManifest, error) {
	ids, err := doc.VerifiedBy(trust)
	if err != nil {
		return nil, err
	}
	core, _, err := parseCore(doc.Inner, doc.Canonical)
	if err != nil {
		return nil, err
	}
	return &VerifiedManifest{
		Core:        core,
		Canonical:   doc.Canonical,
		Address:     Address(doc.Canonical),
		Pinned:      core.IsPinned(),
		ImagePinned: core.ImagePinned(),
		KeyIDs:      ids,
	}, nil
}
