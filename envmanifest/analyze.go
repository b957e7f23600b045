package envmanifest

import "github.com/sandbox-resume/sandbox-resume/internal/strictjson"

// Analysis is an ingestion that keeps, beside its outcome, what the
// adoption tools (envmanifest/adopt: lint, pin) need to advise on and
// patch the document: the partial manifest, the document's own /image
// text, the lockfile read and what ingestion makes of each feature key.
type Analysis struct {
	// Decoded is false after a whole-document refusal (syntax, encoding,
	// size, not an object): Manifest is then nil and Features empty.
	Decoded bool
	// Manifest is the partial manifest: Core.Image is set when /image is
	// valid, Excluded lists the cosmetic and networking members present.
	Manifest *Manifest
	// Refusals are every refusal of the document, sorted by pointer
	// (SortRefusals); none means Ingest accepts it.
	Refusals []Refusal
	// Image is the /image member as written when it is a JSON string
	// (HasImage), before normalization.
	Image    string
	HasImage bool
	// Lockfile is the path of the lockfile that was read ("" when none:
	// none found, none named, or discovery off).
	Lockfile string
	// Features lists the members of /features in document order, a
	// repeated name once.
	Features []FeatureSite
	// Mounts lists the elements of /mounts that ingested, in document
	// order, with their pointers.
	Mounts []MountSite
}

// MountSite is one element of /mounts as ingestion made it: Pointer is
// /mounts/<i>, Mount the normalized mount.
type MountSite struct {
	Pointer string
	Mount   Mount
}

// FeatureSite is one member of /features with what ingestion makes of it.
type FeatureSite struct {
	// Key is the member name as written; Pointer its JSON Pointer.
	Key, Pointer string
	// Kind is the identifier form of Key.
	Kind FeatureKind
	// ID is the normalized identifier before the lockfile.
	ID string
	// Resolved is the lockfile entry's "resolved" string as written (""
	// when the lockfile has no entry or there is no lockfile).
	Resolved string
	// Final is the identifier in the core (after the lockfile).
	Final string
	// OK says the member ingests.
	OK bool
}

// Analyze ingests data as Ingest does (same options, same refusals) and
// returns the Analysis. Refusals are results, not errors; the errors are
// Ingest's own (a lockfile or feature folder that cannot be read).
func Analyze(data []byte, opts Options) (*Analysis, error) {
	root, refusals := decode(data, true)
	a := &Analysis{}
	if root == nil {
		a.Refusals = refusals
		return a, nil
	}
	a.Decoded = true
	in := &ingester{opts: opts, refusals: refusals, m: &Manifest{Core: Core{Schema: CoreSchema}}}
	if err := in.run(root); err != nil {
		return nil, err
	}
	if len(in.refusals) == 0 {
		// the feature options JCS refuses show only at canonicalization
		if _, err := canonicalize(&in.m.Core); err != nil {
			in.checkFeatureOptions(root.Get("features"))
		}
	}
	SortRefusals(in.refusals)
	a.Manifest, a.Refusals, a.Mounts = in.m, in.refusals, in.sites
	if v := root.Get("image"); v != nil && v.Kind == strictjson.KindString {
		a.Image, a.HasImage = v.Str, true
	}
	scratch := &ingester{opts: opts, m: &Manifest{}}
	lock, err := scratch.lockfile()
	if err != nil {
		return nil, err
	}
	if lock != nil {
		a.Lockfile = lock.path
	}
	a.Features = featureSites(root, lock, opts)
	return a, nil
}

// featureSites lists the members of the root's features object in document
// order (duplicates once).
func featureSites(root *strictjson.Node, lock *lockfile, opts Options) []FeatureSite {
	v := root.Get("features")
	if v == nil || v.Kind != strictjson.KindObject {
		return nil
	}
	in := &ingester{opts: opts, m: &Manifest{}}
	seen := map[string]bool{}
	var out []FeatureSite
	for _, mem := range v.Members {
		if seen[mem.Name] {
			continue
		}
		seen[mem.Name] = true
		s := FeatureSite{Key: mem.Name, Pointer: mem.Value.Pointer}
		var ok bool
		s.ID, s.Kind, ok = in.featureID(s.Pointer, mem.Name)
		s.Final, s.OK = s.ID, ok
		if ok && s.Kind == FeatureOCI && lock != nil {
			if e := lock.features.Get(mem.Name); e != nil {
				if r := e.Get("resolved"); r != nil && r.Kind == strictjson.KindString {
					s.Resolved = r.Str
				}
			}
			s.Final, s.OK = in.lockFeature(lock, featureEntry{key: s.Key, ptr: s.Pointer, kind: s.Kind, id: s.ID})
		}
		out = append(out, s)
	}
	return out
}
