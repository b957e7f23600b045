package snapshot

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// This file holds the members sandbox.snapshot-ref/3 adds to /2
// (docs/design.md "SnapshotRef"): runUID and ancestors ("Exactly once
// across hosts"), memory ("Memory") and repinnedFrom and forkedFrom
// ("Repin and fork"), with the rules check 3 applies to them.

// RunUIDPrefix starts every run UID: "ruid:" and 32 lowercase hex digits
// (128 bits; docs/design.md "Exactly once across hosts").
const RunUIDPrefix = "ruid:"

// LabelRunUID is, on a run lease that generation 1's suspend created, the
// run UID it minted, so that a rerun of that suspend writes the same ref;
// and, while a later generation over a /1 or /2 parent is being
// suspended, on the container, the run UID that generation mints.
const LabelRunUID = "io.sandbox-resume.run-uid"

// MaxAncestors is the most entries a ref's ancestors list holds; past it
// the list keeps the latest MaxAncestors (docs/design.md "Exactly once
// across hosts").
const MaxAncestors = 4096

// MaxMemoryBlobs is the most blobs a ref's memory image records.
const MaxMemoryBlobs = 16

// The memory image formats a ref records (docs/design.md "Memory",
// member memory.format) and the checkpoint tool each is made by.
const (
	MemoryFormatCRIU  = "criu/1"  // CRIU's image directory, for runc
	MemoryFormatRunsc = "runsc/1" // gVisor's runsc checkpoint directory
	MemoryToolCRIU    = "criu"
	MemoryToolRunsc   = "runsc"
)

// The media types of a memory image's blobs: a tar of the checkpoint
// tool's image directory, plain or compressed with zstd (docs/design.md
// "Memory").
const (
	MediaTypeMemoryCRIU      = "application/vnd.sandbox-resume.memory.criu.v1.tar"
	MediaTypeMemoryCRIUZstd  = "application/vnd.sandbox-resume.memory.criu.v1.tar+zstd"
	MediaTypeMemoryRunsc     = "application/vnd.sandbox-resume.memory.runsc.v1.tar"
	MediaTypeMemoryRunscZstd = "application/vnd.sandbox-resume.memory.runsc.v1.tar+zstd"
)

// memoryFormats maps each memory format to what it implies.
var memoryFormats = map[string]MemoryFormat{
	MemoryFormatCRIU:  {Tool: MemoryToolCRIU, MediaTypes: []string{MediaTypeMemoryCRIU, MediaTypeMemoryCRIUZstd}},
	MemoryFormatRunsc: {Tool: MemoryToolRunsc, MediaTypes: []string{MediaTypeMemoryRunsc, MediaTypeMemoryRunscZstd}, Platform: true},
}

// LookupMemoryFormat returns what the memory format format
// (MemoryFormatCRIU, MemoryFormatRunsc) implies: its checkpoint tool, the
// media types its blobs may have, and whether a platform is recorded; ok
// is false for a format this version does not know. MediaTypes is a new
// slice.
func LookupMemoryFormat(format string) (f MemoryFormat, ok bool) {
	f, ok = memoryFormats[format]
	f.MediaTypes = slices.Clone(f.MediaTypes)
	return f, ok
}

// MemoryFormat is what a memory format implies: the tool that writes it,
// its blobs' media types, and whether memory.runtime.platform is recorded
// (runsc's platform: systrap, ptrace, kvm; CRIU has none).
type MemoryFormat struct {
	Tool       string
	MediaTypes []string
	Platform   bool
}

// Memory is a generation's process memory image (docs/design.md
// "Memory"): the checkpoint's format, its blobs (stored under the run
// lease like layers, verified by digest and size before any byte reaches
// the runtime), the checkpoint tool that wrote it and the host facts a
// restore must match.
type Memory struct {
	// Format is MemoryFormatCRIU or MemoryFormatRunsc.
	Format string `json:"format"`
	// Blobs are the image's blobs in order, 1 to MaxMemoryBlobs, each with
	// a media type of its format (LookupMemoryFormat).
	Blobs []Descriptor `json:"blobs"`
	// Runtime is the checkpoint tool.
	Runtime MemoryRuntime `json:"runtime"`
	// Host is the kernel and CPU the checkpoint was taken on.
	Host MemoryHost `json:"host"`
}

// MemoryRuntime is the checkpoint tool of a memory image: Tool the
// format's (LookupMemoryFormat), its Version string, BinaryDigest the digest
// of the binary that ran, and for runsc its Platform ("systrap"; empty,
// absent, for CRIU).
type MemoryRuntime struct {
	Tool         string        `json:"tool"`
	Version      string        `json:"version"`
	BinaryDigest digest.Digest `json:"binaryDigest"`
	Platform     string        `json:"platform,omitempty"`
}

// MemoryHost is the kernel release (uname -r) and the CPU a memory image
// was taken on.
type MemoryHost struct {
	Kernel string `json:"kernel"`
	CPU    CPU    `json:"cpu"`
}

// CPU identifies a processor as /proc/cpuinfo does: vendor_id, cpu family
// and model, and its flags sorted without duplicates (a restore needs
// them to be a subset of the restoring host's). Its JSON form writes nil
// Flags as [].
type CPU struct {
	Vendor string   `json:"vendor"`
	Family uint64   `json:"family"`
	Model  uint64   `json:"model"`
	Flags  []string `json:"flags"`
}

// MarshalJSON writes the CPU with nil Flags as [].
func (c CPU) MarshalJSON() ([]byte, error) {
	type plain CPU
	if c.Flags == nil {
		c.Flags = []string{}
	}
	return json.Marshal(plain(c))
}

// ForkedFrom is the generation a fork started its new run from
// (docs/design.md "Repin and fork"): the source run's id and run UID, the
// generation and the digest of its ref file.
type ForkedFrom struct {
	Run        string        `json:"run"`
	RunUID     string        `json:"runUID"`
	Generation uint64        `json:"generation"`
	Ref        digest.Digest `json:"ref"`
}

var (
	runUIDRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^ruid:[0-9a-f]{32}$`) })
	cpuFlagRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_]+$`) })
)

// ValidRunUID reports whether s is a run UID: RunUIDPrefix and 32
// lowercase hex digits.
func ValidRunUID(s string) bool { return runUIDRE().MatchString(s) }

// NewRunUID mints a run UID from 128 bits read from rnd
// (crypto/rand.Reader when rnd is nil): RunUIDPrefix and their 32
// lowercase hex digits (docs/design.md "Exactly once across hosts"). A
// short read is an error.
func NewRunUID(rnd io.Reader) (string, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var b [16]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", fmt.Errorf("mint a run UID: read 128 random bits: %w", err)
	}
	return RunUIDPrefix + hex.EncodeToString(b[:]), nil
}

// NextAncestors returns the ancestors list of the generation after parent,
// whose ref file has digest parentRef: parent's own ancestors followed by
// parentRef, keeping the latest MaxAncestors (docs/design.md "Exactly once
// across hosts"). A /1 or /2 parent has no list, so a /3 child's starts at
// it. The result is a new slice.
func NextAncestors(parent *Ref, parentRef digest.Digest) []digest.Digest {
	var prev []digest.Digest
	if parent != nil && parent.IsV3() {
		prev = parent.Ancestors
	}
	out := make([]digest.Digest, 0, min(len(prev)+1, MaxAncestors))
	if n := len(prev) + 1 - MaxAncestors; n > 0 {
		prev = prev[n:]
	}
	out = append(out, prev...)
	return append(out, parentRef)
}

var (
	// refMembersV3 are the members of a RefSchemaV3 ref: /2's and five
	// more; "ancestors" (like "parent" and "fence") is required exactly
	// when generation ≥ 2 (checked apart).
	refMembersV3 = append(slices.Clone(refMembersV2),
		refMember{"runUID", false}, refMember{"ancestors", true}, refMember{"memory", true},
		refMember{"repinnedFrom", true}, refMember{"forkedFrom", true})
	memoryMembers = []refMember{
		{"format", false}, {"blobs", false}, {"runtime", false}, {"host", false},
	}
	memoryRuntimeMembers = []refMember{
		{"tool", false}, {"version", false}, {"binaryDigest", false}, {"platform", true},
	}
	memoryHostMembers = []refMember{{"kernel", false}, {"cpu", false}}
	cpuMembers        = []refMember{{"vendor", false}, {"family", false}, {"model", false}, {"flags", false}}
	forkedFromMembers = []refMember{{"run", false}, {"runUID", false}, {"generation", false}, {"ref", false}}
)

// v3 decodes the members only a RefSchemaV3 ref has (after v2 decoded the
// rest): runUID, ancestors, memory, repinnedFrom and forkedFrom, each's
// own syntax (the rules across members are lineageRefusals').
func (d *refDecoder) v3(top map[string]*strictjson.Node, r *Ref) {
	if n := top["runUID"]; n != nil {
		r.RunUID = d.runUID(n, "runUID")
	}
	if n := top["ancestors"]; n != nil {
		switch {
		case n.Kind != strictjson.KindArray:
			d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "ancestors must be an array of ref digests, not %s", n.Kind)
		case len(n.Elems) == 0 || len(n.Elems) > MaxAncestors:
			d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "ancestors must hold 1 to %d ref digests, not %d", MaxAncestors, len(n.Elems))
		default:
			r.Ancestors = make([]digest.Digest, 0, len(n.Elems))
			for _, e := range n.Elems {
				if s, ok := d.str(e, "ancestors entry"); ok {
					if !sha256HexRE().MatchString(s) {
						d.refuse(e.Pointer, envmanifest.ClassInvalidValue, "ancestors entry must be sha256: and 64 lowercase hex (a ref file's digest), not %q", s)
					}
					r.Ancestors = append(r.Ancestors, digest.Digest(s))
				}
			}
		}
	}
	if m, ok := d.members(top["memory"], "memory", memoryMembers); ok {
		r.Memory = d.memory(m)
	}
	if n := top["repinnedFrom"]; n != nil {
		if s, ok := d.str(n, "repinnedFrom"); ok {
			if !addressRE().MatchString(s) {
				d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "repinnedFrom must be blake3: and 64 lowercase hex (the manifest address the repin replaced), not %q", s)
			}
			r.RepinnedFrom = s
		}
	}
	if m, ok := d.members(top["forkedFrom"], "forkedFrom", forkedFromMembers); ok {
		f := &ForkedFrom{}
		if s, ok := d.str(m["run"], "run"); ok {
			if !ValidRunID(s) {
				d.refuse(m["run"].Pointer, envmanifest.ClassInvalidValue, "forkedFrom run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", s, MaxRunIDLen)
			}
			f.Run = s
		}
		f.RunUID = d.runUID(m["runUID"], "runUID")
		f.Generation, _ = d.whole(m["generation"], "generation", "generations", 1)
		if s, ok := d.str(m["ref"], "ref"); ok {
			if !sha256HexRE().MatchString(s) {
				d.refuse(m["ref"].Pointer, envmanifest.ClassInvalidValue, "forkedFrom ref must be sha256: and 64 lowercase hex (the source ref file's digest), not %q", s)
			}
			f.Ref = digest.Digest(s)
		}
		r.ForkedFrom = f
	}
}

func (d *refDecoder) runUID(n *strictjson.Node, name string) string {
	s, ok := d.str(n, name)
	if !ok {
		return ""
	}
	if !ValidRunUID(s) {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%s must be %q and 32 lowercase hex (128 bits), not %q", name, RunUIDPrefix, s)
	}
	return s
}

func (d *refDecoder) memory(m map[string]*strictjson.Node) *Memory {
	mem := &Memory{}
	var format MemoryFormat
	known := false
	if s, ok := d.str(m["format"], "format"); ok {
		if format, known = LookupMemoryFormat(s); !known {
			d.refuse(m["format"].Pointer, envmanifest.ClassInvalidValue, "memory format must be %q or %q, not %q", MemoryFormatCRIU, MemoryFormatRunsc, s)
		}
		mem.Format = s
	}
	if n := m["blobs"]; n != nil {
		switch {
		case n.Kind != strictjson.KindArray:
			d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "memory blobs must be an array of blob descriptors, not %s", n.Kind)
		case len(n.Elems) == 0 || len(n.Elems) > MaxMemoryBlobs:
			d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "memory blobs must hold 1 to %d blobs, not %d", MaxMemoryBlobs, len(n.Elems))
		default:
			mem.Blobs = make([]Descriptor, 0, len(n.Elems))
			for i, e := range n.Elems {
				bm, ok := d.members(e, fmt.Sprintf("memory blob %d", i), descriptorMembers)
				if !ok {
					continue
				}
				var b Descriptor
				if s, ok := d.str(bm["mediaType"], "mediaType"); ok {
					if known && !slices.Contains(format.MediaTypes, s) {
						d.refuse(bm["mediaType"].Pointer, envmanifest.ClassInvalidValue, "a %s memory blob's mediaType must be one of %s, not %q", mem.Format, strings.Join(format.MediaTypes, ", "), s)
					}
					b.MediaType = s
				}
				b.Digest = d.digest(bm["digest"], "digest")
				b.Size = d.size(bm["size"], "size")
				mem.Blobs = append(mem.Blobs, b)
			}
		}
	}
	if rm, ok := d.members(m["runtime"], "memory runtime", memoryRuntimeMembers); ok {
		rt := &mem.Runtime
		if s, ok := d.str(rm["tool"], "tool"); ok {
			if known && s != format.Tool {
				d.refuse(rm["tool"].Pointer, envmanifest.ClassInvalidValue, "a %s memory image is written by %q, not %q", mem.Format, format.Tool, s)
			}
			rt.Tool = s
		}
		rt.Version = d.nonEmpty(rm["version"], "version")
		rt.BinaryDigest = d.digest(rm["binaryDigest"], "binaryDigest")
		switch n := rm["platform"]; {
		case n != nil:
			rt.Platform = d.nonEmpty(n, "platform")
			if known && !format.Platform {
				d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "a %s memory image records no platform (only %s does)", mem.Format, MemoryFormatRunsc)
			}
		case known && format.Platform:
			d.refuse(strictjson.Pointer(m["runtime"].Pointer, "platform"), envmanifest.ClassMissing, "a %s memory image needs member \"platform\" (the runsc platform it ran on)", mem.Format)
		}
	}
	if hm, ok := d.members(m["host"], "memory host", memoryHostMembers); ok {
		mem.Host.Kernel = d.nonEmpty(hm["kernel"], "kernel")
		if cm, ok := d.members(hm["cpu"], "cpu", cpuMembers); ok {
			c := &mem.Host.CPU
			c.Vendor = d.nonEmpty(cm["vendor"], "vendor")
			c.Family, _ = d.whole(cm["family"], "family", "cpuinfo's numbering", 0)
			c.Model, _ = d.whole(cm["model"], "model", "cpuinfo's numbering", 0)
			if n := cm["flags"]; n != nil {
				if n.Kind != strictjson.KindArray {
					d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "cpu flags must be an array of flag names, not %s", n.Kind)
				} else {
					c.Flags = make([]string, 0, len(n.Elems))
					for _, e := range n.Elems {
						s, ok := d.str(e, "cpu flag")
						switch {
						case !ok:
						case !cpuFlagRE().MatchString(s):
							d.refuse(e.Pointer, envmanifest.ClassInvalidValue, "cpu flag %q is not a flag name ([a-z0-9_]+)", s)
						case len(c.Flags) > 0 && s <= c.Flags[len(c.Flags)-1]:
							d.refuse(e.Pointer, envmanifest.ClassInvalidValue, "cpu flags must be sorted without duplicates: %q after %q", s, c.Flags[len(c.Flags)-1])
						default:
							c.Flags = append(c.Flags, s)
						}
					}
				}
			}
		}
	}
	return mem
}

// nonEmpty decodes the string node n (member name), which must not be
// empty.
func (d *refDecoder) nonEmpty(n *strictjson.Node, name string) string {
	s, ok := d.str(n, name)
	if ok && s == "" {
		d.refuse(n.Pointer, envmanifest.ClassInvalidValue, "%s must not be empty", name)
	}
	return s
}

// lineageRefusals are check 3's rules across the members of a /3 ref r
// whose members each are well formed (docs/design.md "SnapshotRef",
// "Exactly once across hosts", "Repin and fork"), at pointers under base
// ("/ref" in a file):
//
//   - ancestors (present exactly when generation ≥ 2) ends with parent,
//     holds no digest twice, and holds at most generation − 1 and at most
//     MaxAncestors entries. A run whose generation 1 was /3 has exactly
//     min(generation − 1, MaxAncestors); one whose /3 chain started at a
//     /2 parent has fewer, and a ref cannot tell the two apart, so a
//     shorter list is accepted (it can only make a claim further back
//     fail, never pass);
//   - repinnedFrom only at generation ≥ 2, on a pinned ref, and not its
//     own manifest address;
//   - forkedFrom only at generation 1, with a run UID other than the
//     ref's own (a fork mints its own).
func lineageRefusals(r *Ref, base string) []envmanifest.Refusal {
	var rs []envmanifest.Refusal
	refuse := func(at []string, class envmanifest.Class, format string, args ...any) {
		ptr := base
		for _, p := range at {
			ptr = strictjson.Pointer(ptr, p)
		}
		rs = append(rs, envmanifest.Refusal{Pointer: ptr, Class: class, Message: fmt.Sprintf(format, args...)})
	}
	at := func(p ...string) []string { return p }
	if r.RunUID == "" {
		refuse(at("runUID"), envmanifest.ClassMissing, "a %s ref needs member \"runUID\"", RefSchemaV3)
	}
	switch {
	case r.Generation >= 2 && len(r.Ancestors) == 0:
		refuse(at("ancestors"), envmanifest.ClassMissing, "generation %d needs member \"ancestors\" (present exactly when generation ≥ 2)", r.Generation)
	case r.Generation < 2 && len(r.Ancestors) > 0:
		refuse(at("ancestors"), envmanifest.ClassInvalidValue, "generation %d has no \"ancestors\" (present exactly when generation ≥ 2)", r.Generation)
	case len(r.Ancestors) > 0:
		limit := min(r.Generation-1, MaxAncestors)
		seen := make(map[digest.Digest]int, len(r.Ancestors))
		for i, a := range r.Ancestors {
			if j, dup := seen[a]; dup {
				refuse(at("ancestors", strconv.Itoa(i)), envmanifest.ClassInvalidValue, "ancestors entry %d is entry %d again (%s): a run's refs are all different", i, j, a)
			}
			seen[a] = i
		}
		switch last := r.Ancestors[len(r.Ancestors)-1]; {
		case uint64(len(r.Ancestors)) > limit:
			refuse(at("ancestors"), envmanifest.ClassInvalidValue, "generation %d has at most %d ancestors (generation − 1, at most %d), not %d", r.Generation, limit, MaxAncestors, len(r.Ancestors))
		case r.Parent != "" && last != r.Parent:
			refuse(at("ancestors", strconv.Itoa(len(r.Ancestors)-1)), envmanifest.ClassInvalidValue, "the last ancestor must be the parent %s, not %s", r.Parent, last)
		}
	}
	if r.RepinnedFrom != "" {
		switch {
		case r.Generation < 2:
			refuse(at("repinnedFrom"), envmanifest.ClassInvalidValue, "generation 1 has no \"repinnedFrom\" (a repin writes the generation after the one it repins)")
		case !r.Pinned:
			refuse(at("repinnedFrom"), envmanifest.ClassInvalidValue, "a repinned generation is pinned (pinned is false)")
		case r.RepinnedFrom == r.Manifest:
			refuse(at("repinnedFrom"), envmanifest.ClassInvalidValue, "repinnedFrom %s is this ref's own manifest address (a repin changes it)", r.RepinnedFrom)
		}
	}
	if f := r.ForkedFrom; f != nil {
		switch {
		case r.Generation != 1:
			refuse(at("forkedFrom"), envmanifest.ClassInvalidValue, "generation %d has no \"forkedFrom\" (a fork is generation 1 of its run)", r.Generation)
		case f.RunUID == r.RunUID:
			refuse(at("forkedFrom", "runUID"), envmanifest.ClassInvalidValue, "forkedFrom runUID %s is this ref's own (a fork mints its own run UID)", f.RunUID)
		}
	}
	return rs
}

// refWireV3 is the JSON form of a RefSchemaV3 ref.
type refWireV3 struct {
	refWireV2
	RunUID       string          `json:"runUID"`
	Ancestors    []digest.Digest `json:"ancestors,omitempty"`
	Memory       *Memory         `json:"memory,omitempty"`
	RepinnedFrom string          `json:"repinnedFrom,omitempty"`
	ForkedFrom   *ForkedFrom     `json:"forkedFrom,omitempty"`
}

// hasV3Members reports whether r sets a member only RefSchemaV3 has.
func (r *Ref) hasV3Members() bool {
	return r.RunUID != "" || len(r.Ancestors) > 0 || r.Memory != nil || r.RepinnedFrom != "" || r.ForkedFrom != nil
}
