package resume

import (
	"bytes"
	"encoding/json"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"github.com/gowebpki/jcs"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// DriftEntry is one member that differs between the recorded manifest core
// (SnapshotRef.core) and the offered one (docs/design.md "Resume decision": drift).
//
// Pointer is an RFC 6901 JSON Pointer into the recorded core when the member
// exists there, else into the offered core. OfferedPointer is set only when
// the member exists on both sides at different array indices (a feature or
// mount that moved because another one was added or removed before it).
// Recorded and Offered are the member's JSON values on each side; an absent
// side is omitted.
type DriftEntry struct {
	Pointer        string          `json:"pointer"`
	OfferedPointer string          `json:"offeredPointer,omitempty"`
	Recorded       json.RawMessage `json:"recorded,omitempty"`
	Offered        json.RawMessage `json:"offered,omitempty"`
}

// DiffCores compares two manifest cores member by member (docs/design.md "Resume
// decision": drift): "image", "remoteUser" and "schema" as wholes,
// "containerEnv" by key, "features" by identifier without tag or digest
// (ghcr.io/devcontainers/features/node:1 and …/node@sha256:… are one
// feature whose version changed; tarball and local identifiers are keys as
// written), "mounts" by target (compared after path.Clean). Features or
// mounts sharing a key on one side are paired in array order. Unchanged
// members are not reported, even when their index moved.
//
// The result is sorted by Pointer in UTF-8 byte order, entries pointing into
// the recorded core before those pointing into the offered core at the same
// pointer; it is empty (non-nil) when the cores are equal.
func DiffCores(recorded, offered *envmanifest.Core) []DriftEntry {
	var d differ
	d.scalar("/schema", recorded.Schema, offered.Schema)
	d.scalar("/image", recorded.Image, offered.Image)
	d.scalar("/remoteUser", recorded.RemoteUser, offered.RemoteUser)

	keys := make(map[string]struct{}, len(recorded.ContainerEnv)+len(offered.ContainerEnv))
	for k := range recorded.ContainerEnv {
		keys[k] = struct{}{}
	}
	for k := range offered.ContainerEnv {
		keys[k] = struct{}{}
	}
	for k := range keys {
		rv, rok := recorded.ContainerEnv[k]
		ov, ook := offered.ContainerEnv[k]
		if rok && ook && rv == ov {
			continue
		}
		e := sided{entry: DriftEntry{Pointer: strictjson.Pointer("/containerEnv", k)}}
		if rok {
			e.entry.Recorded = mustJSON(rv)
		} else {
			e.offeredSide = true
		}
		if ook {
			e.entry.Offered = mustJSON(ov)
		}
		d.entries = append(d.entries, e)
	}

	d.array("/features", len(recorded.Features), len(offered.Features),
		func(i int) string { return featureKey(recorded.Features[i].ID) },
		func(i int) string { return featureKey(offered.Features[i].ID) },
		func(i, j int) bool { return featureEqual(recorded.Features[i], offered.Features[j]) },
		func(i int) json.RawMessage { return mustJSON(recorded.Features[i]) },
		func(j int) json.RawMessage { return mustJSON(offered.Features[j]) })
	d.array("/mounts", len(recorded.Mounts), len(offered.Mounts),
		func(i int) string { return path.Clean(recorded.Mounts[i].Target) },
		func(i int) string { return path.Clean(offered.Mounts[i].Target) },
		func(i, j int) bool { return recorded.Mounts[i] == offered.Mounts[j] },
		func(i int) json.RawMessage { return mustJSON(recorded.Mounts[i]) },
		func(j int) json.RawMessage { return mustJSON(offered.Mounts[j]) })

	sort.SliceStable(d.entries, func(a, b int) bool {
		ea, eb := d.entries[a], d.entries[b]
		if ea.entry.Pointer != eb.entry.Pointer {
			return ea.entry.Pointer < eb.entry.Pointer
		}
		if ea.offeredSide != eb.offeredSide {
			return !ea.offeredSide
		}
		return ea.entry.OfferedPointer < eb.entry.OfferedPointer
	})
	out := make([]DriftEntry, len(d.entries))
	for i, e := range d.entries {
		out[i] = e.entry
	}
	return out
}

// sided is a drift entry with the side its Pointer points into, for sorting.
type sided struct {
	entry       DriftEntry
	offeredSide bool
}

type differ struct {
	entries []sided
}

// scalar reports a string member that differs; "" is absent (docs/design.md:
// empty and absent are the same in the core).
func (d *differ) scalar(ptr, rv, ov string) {
	if rv == ov {
		return
	}
	e := sided{entry: DriftEntry{Pointer: ptr}}
	if rv != "" {
		e.entry.Recorded = mustJSON(rv)
	} else {
		e.offeredSide = true
	}
	if ov != "" {
		e.entry.Offered = mustJSON(ov)
	}
	d.entries = append(d.entries, e)
}

// array pairs the elements of a recorded and an offered array by key (the
// n-th recorded element with a key pairs with the n-th offered element with
// that key) and reports pairs that differ and unpaired elements.
func (d *differ) array(base string, nr, no int,
	rkey, okey func(int) string, equal func(i, j int) bool,
	rval, oval func(int) json.RawMessage) {
	byKey := make(map[string][]int, no)
	for j := 0; j < no; j++ {
		k := okey(j)
		byKey[k] = append(byKey[k], j)
	}
	paired := make([]bool, no)
	for i := 0; i < nr; i++ {
		k := rkey(i)
		ptr := base + "/" + strconv.Itoa(i)
		js := byKey[k]
		if len(js) == 0 {
			d.entries = append(d.entries, sided{entry: DriftEntry{Pointer: ptr, Recorded: rval(i)}})
			continue
		}
		j := js[0]
		byKey[k] = js[1:]
		paired[j] = true
		if equal(i, j) {
			continue
		}
		e := DriftEntry{Pointer: ptr, Recorded: rval(i), Offered: oval(j)}
		if i != j {
			e.OfferedPointer = base + "/" + strconv.Itoa(j)
		}
		d.entries = append(d.entries, sided{entry: e})
	}
	for j := 0; j < no; j++ {
		if !paired[j] {
			d.entries = append(d.entries, sided{
				entry:       DriftEntry{Pointer: base + "/" + strconv.Itoa(j), Offered: oval(j)},
				offeredSide: true,
			})
		}
	}
}

// featureKey is a feature identifier without its tag or digest, parsed with
// distribution/reference (docs/design.md: features by id without tag or digest).
// Tarball ("https://…") and local ("./…") identifiers, and anything that
// does not parse, are keys as written.
func featureKey(id string) string {
	if strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "./") {
		return id
	}
	named, err := reference.ParseNormalizedNamed(id)
	if err != nil {
		return id
	}
	return named.Name()
}

// featureEqual compares identifiers and the JCS bytes of the options.
func featureEqual(a, b envmanifest.Feature) bool {
	if a.ID != b.ID {
		return false
	}
	if bytes.Equal(a.Options, b.Options) {
		return true
	}
	ca, erra := jcs.Transform(a.Options)
	cb, errb := jcs.Transform(b.Options)
	if erra != nil || errb != nil {
		return false
	}
	return bytes.Equal(ca, cb)
}

// mustJSON marshals a value of the core (strings, Feature, Mount), which
// cannot fail for cores that were canonicalized; a failure is recorded as
// the JSON string of the error so the entry stays visible.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal("unencodable: " + err.Error())
	}
	return b
}
