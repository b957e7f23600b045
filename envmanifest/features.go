package envmanifest

import (
	"encoding/json"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// legacyFeaturePrefix is where the reference CLI's short ids point.
const legacyFeaturePrefix = "ghcr.io/devcontainers/features/"

// legacyFeatureIDs is the reference Dev Containers CLI's short-id table
// (getBackwardCompatibleFeatureId, notes/devcontainer.md §b): a bare id on
// the left becomes ghcr.io/devcontainers/features/<right>:1. Matching is
// case-sensitive. gradle, maven and jupyterlab, which the CLI turns into
// options of another feature, are deliberately absent (refused).
var legacyFeatureIDs = map[string]string{
	"aws-cli":               "aws-cli",
	"azure-cli":             "azure-cli",
	"common":                "common-utils",
	"desktop-lite":          "desktop-lite",
	"docker-from-docker":    "docker-from-docker",
	"docker-in-docker":      "docker-in-docker",
	"dotnet":                "dotnet",
	"git":                   "git",
	"git-lfs":               "git-lfs",
	"github-cli":            "github-cli",
	"golang":                "go",
	"java":                  "java",
	"kubectl-helm-minikube": "kubectl-helm-minikube",
	"node":                  "node",
	"powershell":            "powershell",
	"python":                "python",
	"ruby":                  "ruby",
	"rust":                  "rust",
	"sshd":                  "sshd",
	"terraform":             "terraform",
}

// foldedLegacyFeatures are the deprecated bare ids the CLI rewrites into
// options of another feature; they are refused (docs/design.md
// "Normalization").
var foldedLegacyFeatures = map[string]string{
	"gradle":     "java (installGradle)",
	"maven":      "java (installMaven)",
	"jupyterlab": "python (installJupyterlab)",
}

// tarballSegment is compiled on first use, not at process start.
var tarballSegment = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^devcontainer-feature-[A-Za-z0-9_-]+\.tgz$`)
})

// FeatureKind says which identifier form a features key has
// (docs/design.md "Normalization", features).
type FeatureKind uint8

// The identifier forms of a features key.
const (
	// FeatureOCI: an OCI reference (or a legacy short id mapped to one).
	FeatureOCI FeatureKind = iota
	// FeatureTarball: an https URL of a devcontainer-feature-*.tgz.
	FeatureTarball
	// FeatureLocal: a ./ path to a folder beside the config.
	FeatureLocal
)

type featureEntry struct {
	key  string
	ptr  string
	kind FeatureKind
	id   string
	opts json.RawMessage
}

// features normalizes the features object (docs/design.md "Normalization":
// features; "Ingestion": feature ids, shorthand, legacy ids, tarball
// and local ids, lockfile, two keys one id).
func (in *ingester) features(v *strictjson.Node, lock *lockfile) {
	if v.Kind != strictjson.KindObject {
		in.refuse(v.Pointer, ClassInvalidValue, "features must be an object, not %s", v.Kind)
		return
	}
	entries := make([]featureEntry, 0, len(v.Members))
	for _, mem := range v.Members {
		if mem.Duplicate {
			continue
		}
		e := featureEntry{key: mem.Name, ptr: mem.Value.Pointer}
		id, kind, ok := in.featureID(e.ptr, mem.Name)
		opts, okv := in.featureOptions(mem.Value)
		if !ok || !okv {
			continue
		}
		e.id, e.kind, e.opts = id, kind, opts
		if kind == FeatureOCI && lock != nil {
			if e.id, ok = in.lockFeature(lock, e); !ok {
				continue
			}
		}
		entries = append(entries, e)
	}
	// Two keys that normalize to one id are both refused.
	features := make([]Feature, 0, len(entries))
	same := sameID(entries)
	for i, e := range entries {
		if same := same(i); len(same) > 1 {
			keys := make([]string, len(same))
			for j, k := range same {
				keys[j] = entries[k].key
			}
			in.refuse(e.ptr, ClassConflict, "feature keys %q all name %s; keep one", keys, e.id)
			continue
		}
		features = append(features, Feature{ID: e.id, Options: e.opts})
	}
	slices.SortFunc(features, func(x, y Feature) int { return strings.Compare(x.ID, y.ID) })
	if len(features) > 0 {
		in.m.Core.Features = features
	}
}

// sameID returns, for the index of an entry whose id another entry
// shares, the indexes of every entry with that id, in order; for an id
// no other entry has, at most that entry's own index. A few entries are
// compared directly, many are grouped in a map first.
func sameID(entries []featureEntry) func(i int) []int {
	if len(entries) > 16 {
		byID := make(map[string][]int, len(entries))
		for i, e := range entries {
			byID[e.id] = append(byID[e.id], i)
		}
		return func(i int) []int { return byID[entries[i].id] }
	}
	return func(i int) []int {
		if !hasOther(entries, i) {
			return nil
		}
		var same []int
		for j := range entries {
			if entries[j].id == entries[i].id {
				same = append(same, j)
			}
		}
		return same
	}
}

// hasOther reports whether an entry other than i has entries[i]'s id.
func hasOther(entries []featureEntry, i int) bool {
	for j := range entries {
		if j != i && entries[j].id == entries[i].id {
			return true
		}
	}
	return false
}

// featureID normalizes one features key to its core id.
func (in *ingester) featureID(ptr, key string) (string, FeatureKind, bool) {
	switch {
	case strings.HasPrefix(key, "https://"):
		return in.tarballID(ptr, key)
	case strings.HasPrefix(key, "./"), strings.HasPrefix(key, "../"), strings.HasPrefix(key, "/"), key == ".", key == "..":
		return in.localID(ptr, key)
	case !strings.ContainsAny(key, `/\`):
		if id, ok := legacyFeatureIDs[key]; ok {
			return legacyFeaturePrefix + id + ":1", FeatureOCI, true
		}
		if to, ok := foldedLegacyFeatures[key]; ok {
			in.refuse(ptr, ClassInvalidValue, "legacy feature %q is refused: the reference CLI turns it into options of %s; declare that feature instead", key, to)
		} else {
			in.refuse(ptr, ClassInvalidValue, "%q is not a known legacy feature id; use an OCI reference (registry/namespace/feature:tag), an https:// tarball or a ./ path", key)
		}
		return "", 0, false
	}
	return in.ociID(ptr, key)
}

// ociID lower-cases an OCI feature reference (ASCII only) and normalizes it
// with distribution/reference: a bare name gets ":latest", a tag beside a
// digest is kept.
func (in *ingester) ociID(ptr, key string) (string, FeatureKind, bool) {
	lower := asciiLower(key)
	first, _, _ := strings.Cut(lower, "/")
	if !strings.ContainsAny(first, ".:") && first != "localhost" {
		in.refuse(ptr, ClassInvalidValue, "feature id %q has no registry domain (GitHub-release shorthand is refused); use registry/namespace/feature:tag", key)
		return "", 0, false
	}
	named, err := reference.ParseNormalizedNamed(lower)
	if err != nil {
		in.refuse(ptr, ClassInvalidValue, "feature id %q is not a valid OCI reference: %v", key, err)
		return "", 0, false
	}
	return reference.TagNameOnly(named).String(), FeatureOCI, true
}

func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// tarballID checks an https:// tarball id, which is kept as written.
func (in *ingester) tarballID(ptr, key string) (string, FeatureKind, bool) {
	u, err := url.Parse(key)
	switch {
	case err != nil:
		in.refuse(ptr, ClassInvalidValue, "feature tarball URL %q does not parse: %v", key, err)
	case u.Scheme != "https" || u.Host == "":
		in.refuse(ptr, ClassInvalidValue, "feature tarball URL %q must be https://host/…", key)
	case u.User != nil:
		in.refuse(ptr, ClassInvalidValue, "feature tarball URL %q must not carry credentials", key)
	case strings.ContainsAny(key, "?#"):
		in.refuse(ptr, ClassInvalidValue, "feature tarball URL %q must not carry a query or fragment", key)
	case !tarballSegment().MatchString(path.Base(u.Path)) || !strings.HasSuffix(u.Path, path.Base(u.Path)):
		in.refuse(ptr, ClassInvalidValue, "feature tarball URL %q must end in devcontainer-feature-<id>.tgz", key)
	default:
		return key, FeatureTarball, true
	}
	return "", 0, false
}

// localID cleans a ./ feature path; absolute paths, "./" alone and paths
// that leave the config's folder at any step are refused.
func (in *ingester) localID(ptr, key string) (string, FeatureKind, bool) {
	if strings.HasPrefix(key, "/") {
		in.refuse(ptr, ClassInvalidValue, "local feature %q must be relative to the config's folder (./…), not absolute", key)
		return "", 0, false
	}
	depth := 0
	for _, seg := range strings.Split(key, "/") {
		switch seg {
		case "", ".":
		case "..":
			depth--
		default:
			depth++
		}
		if depth < 0 {
			in.refuse(ptr, ClassInvalidValue, "local feature %q leaves the config's folder", key)
			return "", 0, false
		}
	}
	clean := path.Clean(key)
	if clean == "." {
		in.refuse(ptr, ClassInvalidValue, "local feature %q names the config's folder itself", key)
		return "", 0, false
	}
	return "./" + clean, FeatureLocal, true
}

// featureOptions turns a feature value into its options object: an object
// is the options; a non-empty string or true is {"version": v}. The text
// returned is the value's JSON text, not yet canonical: Ingest
// canonicalizes it once, with the whole core (canonicalize), so it is not
// canonicalized twice.
func (in *ingester) featureOptions(v *strictjson.Node) (json.RawMessage, bool) {
	switch {
	case v.Kind == strictjson.KindObject:
		if len(v.Members) == 0 {
			return json.RawMessage("{}"), true
		}
		if in.refusedWithin(v.Pointer) {
			return nil, false // a duplicate, number or encoding refusal inside
		}
		return json.RawMessage(v.Raw), true
	case v.Kind == strictjson.KindString && v.Str != "", v.Kind == strictjson.KindBool && v.Bool:
		opts := make([]byte, 0, len(`{"version":}`)+len(v.Raw))
		opts = append(append(append(opts, `{"version":`...), v.Raw...), '}')
		return json.RawMessage(opts), true
	case v.Kind == strictjson.KindString, v.Kind == strictjson.KindBool:
		in.refuse(v.Pointer, ClassInvalidValue, "feature value %s is refused: the reference CLI drops a feature whose value is falsy; remove the feature instead", v.Raw)
	default:
		in.refuse(v.Pointer, ClassInvalidValue, "feature value must be an options object, a non-empty string or true, not %s", v.Kind)
	}
	return nil, false
}

// checkFeatureOptions canonicalizes each feature value's options on its
// own and refuses, at the value's pointer, those JCS cannot serialize (the
// messages featureOptions gave when it canonicalized each one). Ingest
// calls it only when the JCS of the whole core failed, to name the place.
func (in *ingester) checkFeatureOptions(v *strictjson.Node) {
	if v == nil || v.Kind != strictjson.KindObject {
		return
	}
	for _, mem := range v.Members {
		opts, ok := in.featureOptions(mem.Value)
		if mem.Duplicate || !ok {
			continue
		}
		if _, err := canonicalJSON(opts); err != nil {
			if mem.Value.Kind == strictjson.KindObject {
				in.refuse(mem.Value.Pointer, ClassInvalidValue, "feature options do not canonicalize: %v", err)
			} else {
				in.refuse(mem.Value.Pointer, ClassInvalidValue, "feature value does not canonicalize: %v", err)
			}
		}
	}
}

// lockFeature replaces an OCI feature's id by its lockfile entry's
// resolved digest reference (docs/design.md "Normalization": lockfile).
func (in *ingester) lockFeature(lock *lockfile, e featureEntry) (string, bool) {
	entry := lock.features.Get(e.key)
	if entry == nil {
		return e.id, true
	}
	if entry.Kind != strictjson.KindObject {
		in.refuse(e.ptr, ClassLockfile, "lockfile %s: entry %q must be an object, not %s", lock.path, e.key, entry.Kind)
		return "", false
	}
	resolved, integrity := entry.Get("resolved"), entry.Get("integrity")
	if resolved == nil || resolved.Kind != strictjson.KindString {
		in.refuse(e.ptr, ClassLockfile, "lockfile %s: entry %q has no string \"resolved\"", lock.path, e.key)
		return "", false
	}
	named, err := reference.ParseNormalizedNamed(resolved.Str)
	canon, isCanon := named.(reference.Canonical)
	if err != nil || !isCanon || canon.Digest().Algorithm() != digest.SHA256 {
		in.refuse(e.ptr, ClassLockfile, "lockfile %s: entry %q: resolved %q is not a sha256 digest reference", lock.path, e.key, resolved.Str)
		return "", false
	}
	dgst := canon.Digest()
	if integrity == nil || integrity.Kind != strictjson.KindString || integrity.Str != dgst.String() {
		in.refuse(e.ptr, ClassLockfile, "lockfile %s: entry %q: integrity does not equal the resolved digest %s", lock.path, e.key, dgst)
		return "", false
	}
	if cur, err := reference.ParseNormalizedNamed(e.id); err == nil {
		if c, ok := cur.(reference.Canonical); ok && c.Digest() != dgst {
			in.refuse(e.ptr, ClassLockfile, "feature %q carries digest %s but the lockfile %s resolves it to %s", e.key, c.Digest(), lock.path, dgst)
			return "", false
		}
	}
	pinned, err := reference.WithDigest(reference.TrimNamed(canon), dgst)
	if err != nil {
		in.refuse(e.ptr, ClassLockfile, "lockfile %s: entry %q: %v", lock.path, e.key, err)
		return "", false
	}
	return pinned.String(), true
}
