package envmanifest

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/distribution/reference"
	"github.com/gowebpki/jcs"

	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// Options control one ingestion (docs/design.md "Ingestion", "CLI contract").
type Options struct {
	// Path is the config file's path, used for lockfile discovery and the
	// `./` feature checks; "" means stdin: discovery is off and `./`
	// features are checked relative to the current directory.
	Path string
	// Lockfile is an explicit lockfile path (--lockfile); it overrides
	// discovery.
	Lockfile string
	// RequireLockfile says a lockfile was used at suspension: its absence
	// is a "lockfile" refusal at pointer "".
	RequireLockfile bool
	// Reserved lists reserved environment names; a containerEnv key equal
	// to one in any letter case is refused ("reserved-env"). nil = none.
	Reserved []string
}

// Manifest is the result of a successful ingestion: the normalized core,
// its canonical bytes and address, and what was left out of it.
type Manifest struct {
	// Core is the normalized manifest core (docs/design.md "Normalization").
	Core Core
	// Canonical is the RFC 8785 JCS serialization of Core.
	Canonical []byte
	// Address is "blake3:" + 64 lowercase hex of BLAKE3(Canonical).
	Address string
	// Excluded lists the top-level JSON Pointers of the cosmetic and
	// networking members present in the input, sorted.
	Excluded []string
	// Lockfile is "sha256:<hex>" of the lockfile bytes read, "" when none.
	Lockfile string
	// LockfilePath is the path of that lockfile, "" when none.
	LockfilePath string
}

// IsPinned reports whether the image and every feature are digest-addressed
// (docs/design.md "Pinned"; seed 002).
func (m *Manifest) IsPinned() bool { return m.Core.IsPinned() }

// ImagePinned reports whether the image carries an "@sha256:" digest.
func (m *Manifest) ImagePinned() bool { return m.Core.ImagePinned() }

// IngestFile reads the devcontainer.json at path and ingests it with
// opts.Path set to path. A file that cannot be read returns an error
// wrapping the fs error (fs.ErrNotExist for a missing file: class
// "bad-input"); a refused document returns a *RefusedError.
func IngestFile(path string, opts Options) (*Manifest, error) {
	data, err := inputfile.Read(path, inputfile.MaxJSON)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	opts.Path = path
	return Ingest(data, opts)
}

// Ingest turns devcontainer.json text into a manifest (docs/design.md "Ingestion",
// "Normalization", "Ingestion"). Every refusal of the
// document is collected; when there is any, Ingest returns a *RefusedError
// whose Source is opts.Path ("-" for stdin) and whose Refusals are sorted
// by pointer. Other errors (a lockfile that cannot be read for a reason
// other than absence) are returned wrapped, naming the file.
func Ingest(data []byte, opts Options) (*Manifest, error) {
	src := opts.Path
	if src == "" {
		src = "-"
	}
	root, refusals := decode(data, true)
	if root == nil {
		return nil, &RefusedError{Source: src, Refusals: refusals}
	}
	in := &ingester{opts: opts, refusals: refusals, m: &Manifest{Core: Core{Schema: CoreSchema}}}
	if err := in.run(root); err != nil {
		return nil, err
	}
	if len(in.refusals) > 0 {
		SortRefusals(in.refusals)
		return nil, &RefusedError{Source: src, Refusals: in.refusals}
	}
	m := in.m
	canonical, err := canonicalize(&m.Core)
	if err != nil {
		// Not reached for decoder-clean options; name the feature whose
		// options JCS refuses, as a refusal at its pointer, when it is.
		in.checkFeatureOptions(root.Get("features"))
		if len(in.refusals) > 0 {
			SortRefusals(in.refusals)
			return nil, &RefusedError{Source: src, Refusals: in.refusals}
		}
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	m.Canonical = canonical
	m.Address = Address(canonical)
	return m, nil
}

type ingester struct {
	opts     Options
	refusals []Refusal
	m        *Manifest
	sites    []MountSite // the mounts that ingested, with their pointers (Analyze)
}

func (in *ingester) refuse(ptr string, class Class, format string, args ...any) {
	in.refusals = append(in.refusals, Refusal{Pointer: ptr, Class: class, Message: fmt.Sprintf(format, args...)})
}

func (in *ingester) run(root *strictjson.Node) error {
	var features *strictjson.Node
	imagePresent := false
	for i, mem := range root.Members {
		name, v := mem.Name, mem.Value
		ptr := v.Pointer
		if mem.Duplicate && !firstOccurrence(root.Members, i) {
			continue // a duplicate: refused by Decode, reported once here
		}
		if name == "image" {
			imagePresent = true
		}
		info, known := classOf(name)
		if !known {
			in.refuse(ptr, ClassUnknownProperty, "unknown property %q (names are case-sensitive); remove it", name)
			continue
		}
		switch info.Class {
		case PropExecutesOrWidens:
			in.refuse(ptr, ClassExecutesOrWidens, "%s is refused: %s; move it out of the environment declaration", name, info.Note)
			continue
		case PropChangesWhatRuns:
			in.refuse(ptr, ClassChangesWhatRuns, "%s is refused: %s, which the v1 manifest cannot carry; remove it", name, info.Note)
			continue
		case PropCosmetic, PropNetworking:
			in.m.Excluded = append(in.m.Excluded, ptr)
			if name == "hostRequirements" && v.Kind == strictjson.KindObject {
				for _, hm := range v.Members {
					if hm.Name == "gpu" {
						in.refuse(hm.Value.Pointer, ClassExecutesOrWidens, "hostRequirements.gpu is refused whatever its value: it adds --gpus all")
						break
					}
				}
			}
			continue
		}
		if mem.Duplicate {
			continue // not interpreted further
		}
		if v.Kind == strictjson.KindNull {
			in.refuse(ptr, ClassInvalidValue, "%s must not be null (omit it instead)", name)
			continue
		}
		switch name {
		case "image":
			in.image(v)
		case "features":
			features = v
		case "containerEnv":
			in.containerEnv(v)
		case "mounts":
			in.mounts(v)
		case "remoteUser":
			if v.Kind != strictjson.KindString {
				in.refuse(ptr, ClassInvalidValue, "remoteUser must be a string, not %s", v.Kind)
			} else {
				in.m.Core.RemoteUser = v.Str
			}
		}
	}
	if !imagePresent {
		in.refuse("/image", ClassMissing, "image is required: an environment needs a base image")
	}
	// The lockfile is read even without features: a lockfile that does not
	// parse, or one required but absent, is refused.
	lock, err := in.lockfile()
	if err != nil {
		return err
	}
	if features != nil {
		in.features(features, lock)
	}
	sort.Strings(in.m.Excluded)
	return nil
}

// firstOccurrence reports whether members[i] is the first member of its
// name (Decode flags every occurrence of a repeated name Duplicate; only
// those need this scan).
func firstOccurrence(members []strictjson.Member, i int) bool {
	for j := range i {
		if members[j].Name == members[i].Name {
			return false
		}
	}
	return true
}

// image normalizes the image reference (docs/design.md "Normalization": image
// normalization, digests).
func (in *ingester) image(v *strictjson.Node) {
	if v.Kind != strictjson.KindString {
		in.refuse(v.Pointer, ClassInvalidValue, "image must be a string, not %s", v.Kind)
		return
	}
	named, err := reference.ParseNormalizedNamed(v.Str)
	if err != nil {
		in.refuse(v.Pointer, ClassInvalidValue, "image %q is not a valid image reference: %v", v.Str, err)
		return
	}
	in.m.Core.Image = reference.TagNameOnly(named).String()
}

// containerEnv copies the string → string object (docs/design.md "Normalization":
// containerEnv keys; "Reserved environment names").
func (in *ingester) containerEnv(v *strictjson.Node) {
	if v.Kind != strictjson.KindObject {
		in.refuse(v.Pointer, ClassInvalidValue, "containerEnv must be an object of strings, not %s", v.Kind)
		return
	}
	env := make(map[string]string, len(v.Members))
	for _, mem := range v.Members {
		if mem.Duplicate {
			continue
		}
		ptr := mem.Value.Pointer
		switch {
		case mem.Name == "":
			in.refuse(ptr, ClassInvalidValue, "an environment variable name must not be empty")
			continue
		case strings.Contains(mem.Name, "="):
			in.refuse(ptr, ClassInvalidValue, "environment variable name %q contains '='", mem.Name)
			continue
		}
		if r := in.reserved(mem.Name); r != "" {
			in.refuse(ptr, ClassReservedEnv, "%s is a reserved environment name (%s) and may not be set", mem.Name, r)
			continue
		}
		if mem.Value.Kind != strictjson.KindString {
			in.refuse(ptr, ClassInvalidValue, "containerEnv values must be strings, not %s", mem.Value.Kind)
			continue
		}
		env[mem.Name] = mem.Value.Str
	}
	if len(env) > 0 {
		in.m.Core.ContainerEnv = env
	}
}

func (in *ingester) reserved(name string) string {
	for _, r := range in.opts.Reserved {
		if strings.EqualFold(r, name) {
			return r
		}
	}
	return ""
}

// refusedWithin reports whether a refusal already points at ptr or inside it.
func (in *ingester) refusedWithin(ptr string) bool {
	for _, r := range in.refusals {
		if r.Pointer == ptr || strings.HasPrefix(r.Pointer, ptr+"/") {
			return true
		}
	}
	return false
}

// canonicalJSON returns the RFC 8785 JCS form of raw JSON text.
func canonicalJSON(raw []byte) ([]byte, error) {
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalize: %w", err)
	}
	return out, nil
}

// errNotExist reports whether err says a file does not exist.
func errNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
