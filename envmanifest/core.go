package envmanifest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gowebpki/jcs"
	"github.com/zeebo/blake3"
)

// CoreSchema is the value of Core.Schema for the v1 manifest core
// (seed 000, "Environment manifest"). A change to the canonical form is a new
// schema string, never a silent change of addresses.
const CoreSchema = "sandbox.env-manifest/1"

// AddressPrefix starts every manifest address: "blake3:" + 64 lowercase hex.
const AddressPrefix = "blake3:"

// Core is the normalized manifest core (DESIGN "Normalization → manifest
// core"). Absent members are omitted, never null or empty. Its canonical
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
// digest (DESIGN "Pinned").
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
	cc, copied := *c, false
	for i := range cc.Features {
		if len(cc.Features[i].Options) == 0 {
			// Options is always present: an empty one is {}, never null.
			if !copied {
				cc.Features, copied = append([]Feature(nil), c.Features...), true
			}
			cc.Features[i].Options = json.RawMessage("{}")
		}
	}
	raw, err := json.Marshal(&cc)
	if err != nil {
		return nil, fmt.Errorf("marshal manifest core: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalize manifest core: %w", err)
	}
	return out, nil
}

// Address returns "blake3:" + the lowercase hex of the 32-byte BLAKE3 hash
// of canonical (DESIGN "Canonical bytes, address, signature").
func Address(canonical []byte) string {
	sum := blake3.Sum256(canonical)
	return AddressPrefix + hex.EncodeToString(sum[:])
}
