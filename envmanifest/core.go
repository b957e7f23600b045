package envmanifest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"
	"github.com/zeebo/blake3"
)

// CoreSchema is the value of Core.Schema for the v1 manifest core
// (seed 000, "Environment manifest"). A change to the canonical form is a new
// schema string, never a silent change of addresses.
const CoreSchema = "sandbox.env-manifest/1"

// AddressPrefix starts every manifest address: "blake3:" + 64 lowercase hex.
const AddressPrefix = "blake3:"

// Core is the normalized manifest core (docs/design.md "Normalization").
// Absent members are omitted, never null or empty. Its canonical
// bytes are the RFC 8785 (JCS) serialization of this structure.
type Core struct {
	Schema       string            `json:"schema"`
	Image        string            `json:"image"`
	Features     []Feature         `json:"features,omitempty"`
	ContainerEnv map[string]string `json:"containerEnv,omitempty"`
	Mounts       []Mount           `json:"mounts,omitempty"`
	RemoteUser   string            `json:"remoteUser,omitempty"`
}

// Feature is one devcontainer feature in the core: its normalized identifier
// and its options. Options is always present ("{}" when empty) and holds the
// option object as JSON text, canonicalized by JCS.
type Feature struct {
	ID      string          `json:"id"`
	Options json.RawMessage `json:"options"`
}

// Mount is one normalized mount. Source is omitted when not declared; Kind is
// "bind", "volume" or "tmpfs".
type Mount struct {
	Source string `json:"source,omitempty"`
	Target string `json:"target"`
	Kind   string `json:"kind"`
}

// IsPinned reports whether the feature is digest-addressed: its OCI reference
// carries an "@sha256:" digest (seed 002). Tarball and local features are
// never pinned.
func (f Feature) IsPinned() bool {
	if strings.HasPrefix(f.ID, "https://") || strings.HasPrefix(f.ID, "./") {
		return false
	}
	return strings.Contains(f.ID, "@sha256:")
}

// ImagePinned reports whether the image reference carries an "@sha256:"
// digest (docs/design.md "Pinned").
func (c *Core) ImagePinned() bool {
	return strings.Contains(c.Image, "@sha256:")
}

// IsPinned reports whether the image and every feature are digest-addressed
// (seed 002: a pinned image beside a feature by tag is unpinned). Pinned-ness
// is derived, never stored in the core.
func (c *Core) IsPinned() bool {
	if !c.ImagePinned() {
		return false
	}
	for _, f := range c.Features {
		if !f.IsPinned() {
			return false
		}
	}
	return true
}

// Canonical returns the RFC 8785 JCS bytes of the core. It fails only when
// the core holds a value JCS cannot serialize (invalid option JSON).
func (c *Core) Canonical() ([]byte, error) {
	raw, err := c.appendJSON(nil)
	if err != nil {
		return nil, err
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalize manifest core: %w", err)
	}
	return out, nil
}

// canonicalIs reports whether canonical is the JCS of c, that is whether
// c.Canonical() would return exactly canonical; canonical must be output
// of gowebpki/jcs (the JCS of the text c was read from). When the text
// appendJSON writes is already byte for byte canonical, JCS is not run:
// JCS is idempotent on its own output, so the JCS of that text is
// canonical itself. Otherwise (a string appendJSON quotes differently from
// RFC 8785, containerEnv names whose UTF-8 and UTF-16 orders differ, a
// core that is not in normal form) the answer is c.Canonical()'s, compared
// as before. The error is Canonical's.
func (c *Core) canonicalIs(canonical []byte) (bool, error) {
	raw, err := c.appendJSON(nil)
	if err != nil {
		return false, err
	}
	if bytes.Equal(raw, canonical) {
		return true, nil
	}
	mine, err := jcs.Transform(raw)
	if err != nil {
		return false, fmt.Errorf("canonicalize manifest core: %w", err)
	}
	return bytes.Equal(mine, canonical), nil
}

// coreEncoderOptions match what encoding/json.Marshal let through before:
// invalid UTF-8 in a string becomes U+FFFD, and option text with a repeated
// name is passed on (JCS then refuses it).
var coreEncoderOptions = []jsontext.Options{
	jsontext.AllowInvalidUTF8(true),
	jsontext.AllowDuplicateNames(true),
}

// appendJSON appends the core as (not yet canonical) JSON text to dst: the
// members of the struct tags above, absent members omitted, an empty
// Options written as {}. Strings are quoted by jsontext.AppendQuote
// (invalid UTF-8 becomes U+FFFD, as the encoder below makes it) and option
// texts that are valid I-JSON (RFC 7493: valid UTF-8, no repeated name)
// are copied as they are; JCS then parses and canonicalizes the whole, so
// the way this text is laid out changes no canonical byte. A core holding
// any other option text is written by appendJSONEncoder, which reports or
// repairs it as before.
func (c *Core) appendJSON(dst []byte) ([]byte, error) {
	for i := range c.Features {
		if o := c.Features[i].Options; len(o) > 0 && !jsontext.Value(o).IsValid() {
			return c.appendJSONEncoder(dst)
		}
	}
	// The containerEnv members sorted by name, with their values: one
	// pass over the map, no lookups.
	env := make([]envVar, 0, len(c.ContainerEnv))
	size := 64 + len(c.Image) + len(c.RemoteUser) + len(c.Schema)
	for k, v := range c.ContainerEnv {
		env = append(env, envVar{k, v})
		size += len(k) + len(v) + 6
	}
	slices.SortFunc(env, func(x, y envVar) int { return strings.Compare(x.name, y.name) })
	for i := range c.Features {
		size += len(c.Features[i].ID) + len(c.Features[i].Options) + 24
	}
	for _, m := range c.Mounts {
		size += len(m.Source) + len(m.Target) + len(m.Kind) + 40
	}
	b := slices.Grow(dst, size)
	str := func(b []byte, s string) []byte {
		b, _ = jsontext.AppendQuote(b, s) // an error only says U+FFFD was written
		return b
	}
	// Members in the order JCS sorts them into (RFC 8785 §3.2.3), as in
	// appendJSONEncoder. "image" is always present: members before it end
	// in a comma, members after it start with one.
	b = append(b, '{')
	if len(env) > 0 {
		b = append(b, `"containerEnv":{`...)
		for i, e := range env {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(str(b, e.name), ':')
			b = str(b, e.value)
		}
		b = append(b, "},"...)
	}
	if len(c.Features) > 0 {
		b = append(b, `"features":[`...)
		for i := range c.Features {
			f := &c.Features[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = append(str(b, f.ID), `,"options":`...)
			if len(f.Options) == 0 {
				b = append(b, "{}"...) // always present: {}, never null
			} else {
				b = append(b, f.Options...)
			}
			b = append(b, '}')
		}
		b = append(b, "],"...)
	}
	b = str(append(b, `"image":`...), c.Image)
	if len(c.Mounts) > 0 {
		b = append(b, `,"mounts":[`...)
		for i, m := range c.Mounts {
			if i > 0 {
				b = append(b, ',')
			}
			b = str(append(b, `{"kind":`...), m.Kind)
			if m.Source != "" {
				b = str(append(b, `,"source":`...), m.Source)
			}
			b = str(append(b, `,"target":`...), m.Target)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if c.RemoteUser != "" {
		b = str(append(b, `,"remoteUser":`...), c.RemoteUser)
	}
	b = str(append(b, `,"schema":`...), c.Schema)
	return append(b, '}'), nil
}

// envVar is one containerEnv member.
type envVar struct{ name, value string }

// appendJSONEncoder is appendJSON with a jsontext.Encoder, for a core whose
// option text is not valid I-JSON: invalid UTF-8 becomes U+FFFD, a repeated
// name is passed on (JCS then refuses it), and text that is not one JSON
// value is an error naming the feature.
func (c *Core) appendJSONEncoder(dst []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	enc := jsontext.NewEncoder(buf, coreEncoderOptions...)
	str := func(name, v string) {
		enc.WriteToken(jsontext.String(name))
		enc.WriteToken(jsontext.String(v))
	}
	// Members are written in the order JCS sorts them into (RFC 8785
	// §3.2.3), containerEnv names too: JCS still sorts, but sorted input
	// is its cheap case. The order changes no output byte.
	enc.WriteToken(jsontext.BeginObject)
	if len(c.ContainerEnv) > 0 {
		enc.WriteToken(jsontext.String("containerEnv"))
		enc.WriteToken(jsontext.BeginObject)
		for _, k := range slices.Sorted(maps.Keys(c.ContainerEnv)) {
			str(k, c.ContainerEnv[k])
		}
		enc.WriteToken(jsontext.EndObject)
	}
	if len(c.Features) > 0 {
		enc.WriteToken(jsontext.String("features"))
		enc.WriteToken(jsontext.BeginArray)
		for i := range c.Features {
			f := &c.Features[i]
			enc.WriteToken(jsontext.BeginObject)
			str("id", f.ID)
			enc.WriteToken(jsontext.String("options"))
			opts := f.Options
			if len(opts) == 0 {
				// Options is always present: an empty one is {}, never null.
				opts = json.RawMessage("{}")
			}
			if err := enc.WriteValue(jsontext.Value(opts)); err != nil {
				return nil, fmt.Errorf("marshal manifest core: feature %s options: %w", f.ID, err)
			}
			enc.WriteToken(jsontext.EndObject)
		}
		enc.WriteToken(jsontext.EndArray)
	}
	str("image", c.Image)
	if len(c.Mounts) > 0 {
		enc.WriteToken(jsontext.String("mounts"))
		enc.WriteToken(jsontext.BeginArray)
		for _, m := range c.Mounts {
			enc.WriteToken(jsontext.BeginObject)
			str("kind", m.Kind)
			if m.Source != "" {
				str("source", m.Source)
			}
			str("target", m.Target)
			enc.WriteToken(jsontext.EndObject)
		}
		enc.WriteToken(jsontext.EndArray)
	}
	if c.RemoteUser != "" {
		str("remoteUser", c.RemoteUser)
	}
	str("schema", c.Schema)
	// Token writes of strings and delimiters in this fixed shape cannot
	// fail; the closing write reports any earlier error all the same.
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, fmt.Errorf("marshal manifest core: %w", err)
	}
	return buf.Bytes(), nil
}

// canonicalize returns the JCS bytes of c (Canonical) and replaces each
// feature's Options, which may be any JSON object text on entry, by its
// canonical text copied out of those bytes: the options are canonicalized
// once, as part of the core, not once more on their own. JCS is recursive,
// so a value's text inside the JCS of the core is the JCS of that value.
func canonicalize(c *Core) ([]byte, error) {
	canonical, err := c.Canonical()
	if err != nil {
		return nil, err
	}
	if len(c.Features) == 0 {
		return canonical, nil
	}
	opts, err := canonicalFeatureOptions(canonical, len(c.Features))
	if err != nil {
		return nil, fmt.Errorf("canonicalize manifest core: %w", err)
	}
	for i := range c.Features {
		c.Features[i].Options = opts[i]
	}
	return canonical, nil
}

// canonicalFeatureOptions reads the "options" text of the n elements of
// "features" in canonical (the JCS of a core) with a jsontext.Decoder and
// returns copies of them in one buffer of their total length.
func canonicalFeatureOptions(canonical []byte, n int) ([]json.RawMessage, error) {
	// JCS output has no repeated name and is valid UTF-8: the checks that
	// would find them are skipped (readBackOptions).
	pd := getDecoder(canonical)
	defer putDecoder(pd)
	dec := &pd.dec
	if _, err := dec.ReadToken(); err != nil { // {
		return nil, err
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if string(name) != `"features"` {
			if err := dec.SkipValue(); err != nil {
				return nil, err
			}
			continue
		}
		if _, err := dec.ReadToken(); err != nil { // [
			return nil, err
		}
		// Where each options text sits in canonical, as [start, end).
		spans := make([][2]int, n)
		total := 0
		for i := 0; i < n; i++ {
			if _, err := dec.ReadToken(); err != nil { // {
				return nil, err
			}
			for dec.PeekKind() == '"' {
				k, err := dec.ReadValue()
				if err != nil {
					return nil, err
				}
				if string(k) != `"options"` {
					if err := dec.SkipValue(); err != nil {
						return nil, err
					}
					continue
				}
				v, err := dec.ReadValue()
				if err != nil {
					return nil, err
				}
				end := int(dec.InputOffset())
				spans[i] = [2]int{end - len(v), end}
				total += len(v)
			}
			if _, err := dec.ReadToken(); err != nil { // }
				return nil, err
			}
		}
		out := make([]json.RawMessage, n)
		buf := make([]byte, 0, total)
		for i, sp := range spans {
			if sp[1] == 0 {
				return nil, fmt.Errorf("feature %d has no options in the canonical bytes", i)
			}
			start := len(buf)
			buf = append(buf, canonical[sp[0]:sp[1]]...)
			out[i] = json.RawMessage(buf[start:len(buf):len(buf)])
		}
		return out, nil
	}
	return nil, errors.New("no features in the canonical bytes")
}

// Address returns "blake3:" + the lowercase hex of the 32-byte BLAKE3 hash
// of canonical (docs/design.md "Canonical bytes and address").
func Address(canonical []byte) string {
	sum := blake3.Sum256(canonical)
	return AddressPrefix + hex.EncodeToString(sum[:])
}
