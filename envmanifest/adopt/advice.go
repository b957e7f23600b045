package adopt

import (
	"regexp"
	"strings"
	"sync"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// FixAction says what `lint --fix` does about a refusal (docs/design.md
// "Adoption"). The strings appear in `lint --output json`.
type FixAction string

// The fix actions of the advice table.
const (
	// FixNone: --fix leaves the member; it needs a hand edit.
	FixNone FixAction = ""
	// FixRemove: --fix removes the member the refusal points at (every
	// occurrence, when its name is repeated).
	FixRemove FixAction = "remove"
	// FixRemoveMount: --fix removes the whole mount (/mounts/N) the
	// refusal points into, never only the option: dropping "readonly"
	// alone would make a read-only mount writable.
	FixRemoveMount FixAction = "remove-mount"
	// FixKeepLast: --fix removes every occurrence of a repeated name but
	// the last, the one the reference Dev Containers CLI uses.
	FixKeepLast FixAction = "keep-last"
)

// Property keys of the advice table that are not top-level property names
// (docs/design.md "Adoption").
const (
	// AdviceDocument is the whole document (pointer "").
	AdviceDocument = ""
	// AdviceAnyProperty matches any property, for classes whose advice
	// does not depend on where they occur (duplicate keys, numbers,
	// encoding, unknown members).
	AdviceAnyProperty = "*"
	// AdviceImageMetadata is the image's devcontainer.metadata label
	// (pointers under /config/Labels/devcontainer.metadata).
	AdviceImageMetadata = "devcontainer.metadata"
	// AdviceGPU is hostRequirements.gpu.
	AdviceGPU = "hostRequirements.gpu"
	// AdviceFeature is one member of features (/features/<key>, below).
	AdviceFeature = "features.*"
	// AdviceMount is one element of mounts (/mounts/<n>, below).
	AdviceMount = "mounts[]"
	// AdviceEnvVar is one member of containerEnv (/containerEnv/<name>).
	AdviceEnvVar = "containerEnv.*"
)

// AdviceRule is one row of the advice table: for a refusal of Class at
// Property, the Advice a user is given and the Fix `lint --fix` applies.
// Property is a top-level property name, one of the Advice* keys, or
// AdviceAnyProperty.
type AdviceRule struct {
	Property string
	Class    envmanifest.Class
	Fix      FixAction
	Advice   string
}

// Advice texts shared by several rows.
const (
	adviceBakeHook = "bake the step into the image: put the command in a RUN step of a Dockerfile that starts FROM your current image (or ship it as a feature's install.sh), " +
		"build and push that image once, declare it as \"image\" and run `sandbox-resume pin`; " +
		"a step that needs the workspace (npm ci, pip install -e ., go mod download) becomes the unit's own first step, run by the sandbox runtime under the unit's grants"
	adviceBuild = "build the image once outside the declaration (docker build / buildctl with this Dockerfile, context and args), push it to a registry, " +
		"declare the pushed reference as \"image\" and run `sandbox-resume pin` to add its digest; --fix removes this member, so the file then lacks \"image\" until you add it"
	adviceCompose = "compose starts containers the manifest cannot describe: declare the primary service's image as \"image\" (by digest: `sandbox-resume pin`) and run the other services as their own sandboxed units"
	adviceGrant   = "privileges are the sandbox's capability grant, decided by the operator for the unit, never by the declaration"
)

// adviceTable is the one table of lint advice, keyed by property and
// class. Every refused-class property of propertyTable has a row of its
// own (TestAdviceCoversRefusedProperties).
var adviceTable = []AdviceRule{
	// Lifecycle hooks.
	{"initializeCommand", envmanifest.ClassExecutesOrWidens, FixRemove, "it runs on the host before the container exists, outside any sandbox: do that preparation (mkdir, copying files, a registry login) in the runtime's host-side setup for the unit, or drop it"},
	{"onCreateCommand", envmanifest.ClassExecutesOrWidens, FixRemove, "it runs once when the container is created; " + adviceBakeHook},
	{"updateContentCommand", envmanifest.ClassExecutesOrWidens, FixRemove, "it runs when the workspace content is (re)loaded: make it the unit's own first step, run by the sandbox runtime under the unit's grants; a step that does not need the workspace goes into the image instead (a Dockerfile RUN step, then `sandbox-resume pin`)"},
	{"postCreateCommand", envmanifest.ClassExecutesOrWidens, FixRemove, "it runs after the container is created; " + adviceBakeHook},
	{"postStartCommand", envmanifest.ClassExecutesOrWidens, FixRemove, "it runs at every start: put it in the image's ENTRYPOINT or CMD (a Dockerfile FROM your image, pushed and pinned) or in the runtime's own start script for the unit"},
	{"postAttachCommand", envmanifest.ClassExecutesOrWidens, FixRemove, "it runs whenever an editor attaches, an editor convenience that is not part of the environment: run it from the editor's terminal or as a step of the unit"},
	// Building.
	{"build", envmanifest.ClassExecutesOrWidens, FixRemove, adviceBuild},
	{"dockerFile", envmanifest.ClassExecutesOrWidens, FixRemove, "legacy spelling of build.dockerfile: " + adviceBuild},
	{"context", envmanifest.ClassExecutesOrWidens, FixRemove, "the legacy build context of dockerFile: " + adviceBuild},
	{"dockerComposeFile", envmanifest.ClassExecutesOrWidens, FixRemove, adviceCompose},
	{"service", envmanifest.ClassExecutesOrWidens, FixRemove, adviceCompose},
	{"runServices", envmanifest.ClassExecutesOrWidens, FixRemove, adviceCompose},
	// Privileges.
	{"runArgs", envmanifest.ClassExecutesOrWidens, FixRemove, "raw docker run flags are not a declaration: " + adviceGrant + "; move -e NAME=VALUE into containerEnv and -v/--mount without options into mounts, and ask the operator for capabilities, devices, --network or --ipc"},
	{"privileged", envmanifest.ClassExecutesOrWidens, FixRemove, adviceGrant + "; ask the operator for the specific capabilities the unit needs (\"privileged\": false is refused too: the rule is about the declaration, so delete the line)"},
	{"capAdd", envmanifest.ClassExecutesOrWidens, FixRemove, adviceGrant + "; ask the operator to grant these capabilities to the unit (for example SYS_PTRACE for a debugger)"},
	{"securityOpt", envmanifest.ClassExecutesOrWidens, FixRemove, adviceGrant + "; seccomp, AppArmor and SELinux profiles (seccomp=unconfined for a debugger) are requested from the operator for the unit"},
	{"init", envmanifest.ClassExecutesOrWidens, FixRemove, "PID 1 is the runtime's choice: the sandbox runtime supplies an init when the unit needs one; or bake one into the image (ENTRYPOINT [\"tini\", \"--\"]) and pin it"},
	{"workspaceMount", envmanifest.ClassExecutesOrWidens, FixRemove, "it can bind any host path: the workspace is the runtime's data grant for the unit, so remove it; other data goes in mounts (type, source, target and nothing else)"},
	{AdviceGPU, envmanifest.ClassExecutesOrWidens, FixRemove, "it adds --gpus all whatever its value: GPUs are a device grant the operator gives the unit; keep cpus, memory and storage, which are excluded from the address"},
	// Changes what runs, not identity in v1.
	{"containerUser", envmanifest.ClassChangesWhatRuns, FixRemove, "the v1 manifest cannot carry the container's user: set USER in the image (a Dockerfile FROM your image, pushed and pinned) and declare the unit's user as remoteUser"},
	{"remoteEnv", envmanifest.ClassChangesWhatRuns, FixRemove, "the v1 manifest cannot carry the environment of tool processes: move constant values to containerEnv (part of the address); values built from ${containerEnv:…} or ${localEnv:…} (PATH extensions, host tokens) are set by the runtime for the unit"},
	{"overrideCommand", envmanifest.ClassChangesWhatRuns, FixRemove, "the v1 manifest cannot carry a replaced CMD: the process is the runtime's choice for the unit; a command the container must run goes into the image's ENTRYPOINT or CMD (pushed and pinned)"},
	{"userEnvProbe", envmanifest.ClassChangesWhatRuns, FixRemove, "the v1 manifest cannot carry a probed shell environment: put what the shell profile sets into containerEnv, or into the image's ENV (pushed and pinned)"},
	{"updateRemoteUserUID", envmanifest.ClassChangesWhatRuns, FixRemove, "the v1 manifest cannot carry a UID remap: build the image with the UID and GID the unit runs as, or leave the mapping to the runtime's user namespace"},
	{"overrideFeatureInstallOrder", envmanifest.ClassChangesWhatRuns, FixRemove, "the v1 manifest cannot carry an install order: rely on the features' own dependsOn and installsAfter, or install the features into a pre-built image in the order you need (pushed and pinned)"},
	{"workspaceFolder", envmanifest.ClassChangesWhatRuns, FixRemove, "the v1 manifest cannot carry the working folder: the runtime binds the workspace and sets the unit's working directory"},
	// Identity members.
	{"image", envmanifest.ClassMissing, FixNone, "add \"image\": a pre-built image reference (registry/name:tag), then run `sandbox-resume pin` to add its digest; when the file had build or dockerFile (which --fix removes), build that Dockerfile once, push it and declare the pushed image; with dockerComposeFile, declare the primary service's image"},
	{"image", envmanifest.ClassInvalidValue, FixNone, "write a literal image reference (registry/name:tag, or name@sha256:<64 hex>): ${…} variables are kept as written, so the reference is not valid; then run `sandbox-resume pin`"},
	{"features", envmanifest.ClassInvalidValue, FixNone, "features is an object whose keys are feature ids and whose values are option objects (or omit it)"},
	{AdviceFeature, envmanifest.ClassInvalidValue, FixRemove, "use an OCI feature id with a registry (ghcr.io/devcontainers/features/<name>:<major>): GitHub-release ids owner/repo/<name>@vX moved to ghcr.io, gradle, maven and jupyterlab are options of the java and python features, and a feature whose value is false or \"\" is dropped by the reference CLI; --fix removes the feature, so re-add it in the accepted form"},
	{AdviceFeature, envmanifest.ClassConflict, FixNone, "these keys name one feature (ids are case-insensitive and legacy short ids are ghcr.io/devcontainers/features/<id>:1): keep one of them"},
	{AdviceFeature, envmanifest.ClassLockfile, FixNone, "the lockfile entry for this feature is wrong: regenerate devcontainer-lock.json with the reference CLI (devcontainer upgrade --workspace-folder .) or delete the entry, then run `sandbox-resume pin`"},
	{"containerEnv", envmanifest.ClassInvalidValue, FixNone, "containerEnv is an object of NAME: \"string\" (or omit it)"},
	{AdviceEnvVar, envmanifest.ClassInvalidValue, FixRemove, "write the variable as NAME: \"string\": quote numbers and booleans, and use a name that is not empty and has no '='"},
	{AdviceEnvVar, envmanifest.ClassReservedEnv, FixRemove, "this name can inject code into every process, redirect its network or replace its trust roots, so the policy refuses it (docs/reserved-env.md): set it in the image's ENV if the toolchain needs it (then it is bytes of the pinned image), or ask the operator to set it for the unit; --policy FILE extends the list, --policy none turns it off"},
	{"mounts", envmanifest.ClassInvalidValue, FixNone, "mounts is an array of docker --mount strings or {type, source, target} objects (or omit it)"},
	{AdviceMount, envmanifest.ClassChangesWhatRuns, FixRemoveMount, "mount options (readonly, bind-propagation, volume-opt, …) change what runs and the v1 manifest cannot carry them: --fix removes the whole mount, never just the option (without readonly the mount would be writable); ask the operator for the mount with its options as the unit's data grant, or declare it with type, source and target only if it may be writable"},
	{AdviceMount, envmanifest.ClassInvalidValue, FixRemoveMount, "write the mount as a docker --mount string (type=bind|volume|tmpfs,source=…,target=…) or as {\"type\": \"bind\"|\"volume\", \"source\": …, \"target\": …}; --fix removes the mount"},
	{AdviceMount, envmanifest.ClassMissing, FixRemoveMount, "give the mount a target (and, in object form, a type: bind or volume); --fix removes the mount"},
	{AdviceMount, envmanifest.ClassExecutesOrWidens, FixRemoveMount, "a runtime socket bound into the container (docker.sock, containerd.sock, any *.sock) hands it the daemon, which is root on the host: --fix removes the mount; if the workload needs containers, give it its own rootless daemon or a proxy that allows only what it needs, as the sandbox's grant"},
	{AdviceMount, envmanifest.ClassConflict, FixNone, "two mounts have the same target: keep one"},
	{"remoteUser", envmanifest.ClassInvalidValue, FixNone, "remoteUser is a user name string (or omit it)"},
	// Lockfile and the whole document.
	{AdviceDocument, envmanifest.ClassLockfile, FixNone, "the lockfile does not parse, or a required one is missing: regenerate devcontainer-lock.json with the reference CLI (devcontainer upgrade --workspace-folder .), or name the right file with --lockfile"},
	{AdviceDocument, envmanifest.ClassSyntax, FixNone, "the file is not JSONC: fix the syntax at the line:column shown (comments and one trailing comma are allowed; the top level must be an object)"},
	{AdviceDocument, envmanifest.ClassEncoding, FixNone, "the file is not valid UTF-8: save it as UTF-8"},
	{AdviceDocument, envmanifest.ClassLimit, FixNone, "the file is larger than 1 MiB or nested deeper than 64 levels: move data out of devcontainer.json"},
	// Any property.
	{AdviceAnyProperty, envmanifest.ClassDuplicateKey, FixKeepLast, "a name given twice in one object can mean two environments to two parsers: keep one (the reference CLI uses the last one, which --fix keeps)"},
	{AdviceAnyProperty, envmanifest.ClassNumber, FixNone, "write the number as a string, or as a whole number within ±(2^53−1) or a decimal without excess digits"},
	{AdviceAnyProperty, envmanifest.ClassEncoding, FixNone, "remove the Unicode noncharacter or lone-surrogate escape from the name or string"},
	{AdviceAnyProperty, envmanifest.ClassUnknownProperty, FixRemove, "not a devcontainer.json property (names are case-sensitive): remove it, or spell it as the property it was meant to be"},
	// The image's devcontainer.metadata label.
	{AdviceImageMetadata, envmanifest.ClassExecutesOrWidens, FixNone, "the image's devcontainer.metadata label carries this member, and Dev Containers tooling runs it over any declaration: rebuild the image without it (remove it from the devcontainer.json or features the image was built from, or build FROM a plain base image), push it and pin the new image"},
	{AdviceImageMetadata, envmanifest.ClassChangesWhatRuns, FixNone, "the image's devcontainer.metadata label sets this member, which the v1 manifest cannot carry: rebuild the image without it, push it and pin the new image"},
	{AdviceImageMetadata, envmanifest.ClassUnknownProperty, FixNone, "the image's devcontainer.metadata label holds a member no table knows: rebuild the image without it, push it and pin the new image"},
	{AdviceImageMetadata, AnyClass, FixNone, "the image's devcontainer.metadata label does not decode strictly: rebuild the image with a well-formed label (or none), push it and pin the new image"},
}

// AnyClass in an AdviceRule matches every class (used for the image
// metadata label, whose problems all have one remedy).
const AnyClass envmanifest.Class = "*"

// AdviceRules returns a copy of the advice table (docs/design.md
// "Adoption"), in table order.
func AdviceRules() []AdviceRule { return append([]AdviceRule(nil), adviceTable...) }

type adviceKey struct {
	property string
	class    envmanifest.Class
}

var adviceIndex = func() map[adviceKey]int {
	m := make(map[adviceKey]int, len(adviceTable))
	for i, r := range adviceTable {
		m[adviceKey{r.Property, r.Class}] = i
	}
	return m
}()

// genericAdvice is what a refusal gets when no row matches. The corpus
// test fails when any refusal falls to it.
const genericAdvice = "fix or remove the member named by the pointer; see docs/adopting.md"

// AdviceProperty returns the advice-table property a refusal pointer
// belongs to: "" for the whole document, AdviceImageMetadata under
// /config/Labels/devcontainer.metadata, AdviceGPU, AdviceFeature, AdviceMount and AdviceEnvVar
// for members of those, else the top-level property name (unescaped).
func AdviceProperty(ptr string) string {
	if ptr == "" {
		return AdviceDocument
	}
	if ptr == envmanifest.ImageMetadataPointer || strings.HasPrefix(ptr, envmanifest.ImageMetadataPointer+"/") {
		return AdviceImageMetadata
	}
	toks := pointerTokens(ptr)
	if len(toks) == 0 {
		return AdviceDocument
	}
	if len(toks) > 1 {
		switch toks[0] {
		case "hostRequirements":
			if toks[1] == "gpu" {
				return AdviceGPU
			}
		case "features":
			return AdviceFeature
		case "mounts":
			return AdviceMount
		case "containerEnv":
			return AdviceEnvVar
		}
	}
	return toks[0]
}

// pointerTokens splits an RFC 6901 pointer into its unescaped reference
// tokens ("" → none).
func pointerTokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range toks {
		if strings.Contains(t, "~") {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		}
	}
	return toks
}

// adviceFor returns the rule for a refusal: its property's row for the
// class, else the AdviceAnyProperty row, else the property's AnyClass row;
// ok is false (and the rule generic) when nothing matches. A refusal of
// the image's devcontainer.metadata label never takes an AdviceAnyProperty
// row: those are about the document (a duplicate name in the label is
// not something --fix can keep the last of; the image is rebuilt).
func adviceFor(r envmanifest.Refusal) (AdviceRule, bool) {
	prop := AdviceProperty(r.Pointer)
	keys := []adviceKey{{prop, r.Class}, {AdviceAnyProperty, r.Class}, {prop, AnyClass}}
	if prop == AdviceImageMetadata {
		keys = []adviceKey{{prop, r.Class}, {prop, AnyClass}}
	}
	for _, k := range keys {
		if i, ok := adviceIndex[k]; ok {
			return adviceTable[i], true
		}
	}
	return AdviceRule{Property: prop, Class: r.Class, Fix: FixNone, Advice: genericAdvice}, false
}

// Advise returns the advice for one refusal (docs/design.md
// "Adoption"): the table row of its property and class, with the known
// property within edit distance 2 an unknown one probably meant.
func Advise(r envmanifest.Refusal) LintRefusal { return advise(r, nil) }

// advise is Advise with the document at hand (doc may be nil), which adds
// what the member itself shows: the default of an image given as
// ${localEnv:NAME:default}, the ghcr.io id of a GitHub-release feature id.
func advise(r envmanifest.Refusal, doc *envmanifest.Analysis) LintRefusal {
	rule, _ := adviceFor(r)
	text := rule.Advice
	toks := pointerTokens(r.Pointer)
	switch {
	case r.Class == envmanifest.ClassUnknownProperty && len(toks) == 1:
		if s, ok := SuggestProperty(toks[0]); ok {
			text = "did you mean \"" + s.Name + "\" (" + string(s.Class) + ": " + s.Note + ")? " + text
		}
	case r.Class == envmanifest.ClassInvalidValue && r.Pointer == "/image":
		if doc != nil && doc.HasImage {
			if m := localEnvDefault().FindStringSubmatch(doc.Image); m != nil {
				text = "the variable's default is " + m[1] + ": declare that (or the image you mean) literally. " + text
			}
		}
	case r.Class == envmanifest.ClassInvalidValue && rule.Property == AdviceFeature && len(toks) == 2:
		if m := githubReleaseFeature().FindStringSubmatch(toks[1]); m != nil {
			text = "this GitHub-release id is now published as ghcr.io/" + m[1] + "/" + m[2] + "/" + m[3] + " (choose its current major tag, e.g. :1). " + text
		}
	}
	return LintRefusal{Refusal: r, Property: rule.Property, Advice: text, Fix: rule.Fix}
}

// githubReleaseFeature matches a pre-OCI GitHub-release feature id,
// owner/repo/feature@version.
var githubReleaseFeature = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Za-z0-9_-]+)/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)(@.*)?$`)
})

// localEnvDefault matches an image given as ${localEnv:NAME:default}.
var localEnvDefault = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\$\{localEnv:[A-Za-z_][A-Za-z0-9_]*:([^}]+)\}$`)
})

// SuggestProperty returns the known top-level property a misspelt name
// most probably means: one equal to it in another letter case, else the
// nearest within optimal-string-alignment distance 2 (letters compared
// case-insensitively; ties go to the first in name order). ok is false
// when none is that near.
func SuggestProperty(name string) (envmanifest.PropertyInfo, bool) {
	lower := strings.ToLower(name)
	best, bestD := -1, 3
	props := envmanifest.Properties()
	for i, p := range props {
		if p.Name == name {
			return envmanifest.PropertyInfo{}, false // known: nothing to suggest
		}
		pl := strings.ToLower(p.Name)
		if pl == lower {
			return p, true
		}
		if d := editDistance(lower, pl, bestD); d < bestD {
			best, bestD = i, d
		}
	}
	if best < 0 {
		return envmanifest.PropertyInfo{}, false
	}
	return props[best], true
}

// editDistance is the optimal string alignment distance between a and b
// (Levenshtein's insertions, deletions and substitutions plus transposition
// of two adjacent characters; Damerau 1964, Lowrance and Wagner 1975),
// over runes, with three rows. It returns limit as soon as the distance is
// known to be at least limit.
func editDistance(a, b string, limit int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d >= limit || -d >= limit {
		return limit
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if rowMin >= limit {
			return limit
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(rb)], limit)
}
