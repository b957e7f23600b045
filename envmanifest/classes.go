package envmanifest

import "sort"

// PropertyClass is the class of a top-level devcontainer.json property
// (docs/design.md "Ingestion": every top-level property falls in exactly one
// class). A property not in the table is refused as "unknown-property".
type PropertyClass string

// The property classes of docs/design.md "Ingestion".
const (
	// PropIdentity members are normalized into the manifest core.
	PropIdentity PropertyClass = "identity"
	// PropCosmetic members are accepted, listed as excluded, never addressed.
	PropCosmetic PropertyClass = "cosmetic"
	// PropNetworking members are accepted and excluded: the network surface
	// is the capability grant's business.
	PropNetworking PropertyClass = "networking"
	// PropExecutesOrWidens members are refused (class "executes-or-widens").
	PropExecutesOrWidens PropertyClass = "executes-or-widens"
	// PropChangesWhatRuns members are refused (class "changes-what-runs"):
	// dropping them would mint a false identity.
	PropChangesWhatRuns PropertyClass = "changes-what-runs"
)

// PropertyInfo describes one top-level property: its exact
// (case-sensitive) name, its class and a note for people.
type PropertyInfo struct {
	Name  string
	Class PropertyClass
	Note  string
}

// propertyTable is the one place that classifies devcontainer.json's
// top-level properties: the official schema (devContainer.base.schema.json),
// the VS Code and Codespaces add-ons and the legacy spellings, as listed in
// notes/devcontainer.md §a. Keep it sorted by name.
var propertyTable = []PropertyInfo{
	{"$schema", PropCosmetic, "JSON schema of the file"},
	{"appPort", PropNetworking, "ports published by Docker"},
	{"build", PropExecutesOrWidens, "a Dockerfile build runs arbitrary RUN steps"},
	{"capAdd", PropExecutesOrWidens, "--cap-add widens the sandbox"},
	{"codespaces", PropCosmetic, "legacy Codespaces settings (use customizations.codespaces)"},
	{"containerEnv", PropIdentity, "environment variables of the container"},
	{"containerUser", PropChangesWhatRuns, "user the container runs as"},
	{"context", PropExecutesOrWidens, "legacy build context, with dockerFile"},
	{"customizations", PropCosmetic, "tool-specific settings"},
	{"devPort", PropCosmetic, "legacy VS Code server port"},
	{"dockerComposeFile", PropExecutesOrWidens, "compose files are outside devcontainer.json"},
	{"dockerFile", PropExecutesOrWidens, "legacy Dockerfile path: a build runs commands"},
	{"extensions", PropCosmetic, "legacy VS Code extensions list"},
	{"features", PropIdentity, "tool features to install"},
	{"forwardPorts", PropNetworking, "ports forwarded by the tool"},
	{"hostRequirements", PropCosmetic, "minimum host hardware; its gpu member is refused (executes-or-widens: --gpus all)"},
	{"image", PropIdentity, "base image reference (required)"},
	{"init", PropExecutesOrWidens, "--init changes PID 1"},
	{"initializeCommand", PropExecutesOrWidens, "runs on the host"},
	{"mounts", PropIdentity, "extra mounts (declaration only; content is data)"},
	{"name", PropCosmetic, "display name"},
	{"onCreateCommand", PropExecutesOrWidens, "lifecycle command"},
	{"otherPortsAttributes", PropNetworking, "defaults for other ports"},
	{"overrideCommand", PropChangesWhatRuns, "replaces the image CMD"},
	{"overrideFeatureInstallOrder", PropChangesWhatRuns, "feature install order"},
	{"portsAttributes", PropNetworking, "per-port behaviour"},
	{"postAttachCommand", PropExecutesOrWidens, "lifecycle command"},
	{"postCreateCommand", PropExecutesOrWidens, "lifecycle command"},
	{"postStartCommand", PropExecutesOrWidens, "lifecycle command"},
	{"privileged", PropExecutesOrWidens, "--privileged widens the sandbox"},
	{"remoteEnv", PropChangesWhatRuns, "environment of tool processes"},
	{"remoteUser", PropIdentity, "user the unit runs as"},
	{"runArgs", PropExecutesOrWidens, "raw docker run arguments"},
	{"runServices", PropExecutesOrWidens, "compose services to start"},
	{"secrets", PropCosmetic, "recommended secrets (names only)"},
	{"securityOpt", PropExecutesOrWidens, "--security-opt widens the sandbox"},
	{"service", PropExecutesOrWidens, "primary compose service"},
	{"settings", PropCosmetic, "legacy VS Code settings"},
	{"shutdownAction", PropCosmetic, "what the editor does on disconnect"},
	{"updateContentCommand", PropExecutesOrWidens, "lifecycle command"},
	{"updateRemoteUserUID", PropChangesWhatRuns, "remaps the user's UID/GID"},
	{"userEnvProbe", PropChangesWhatRuns, "which shell the environment is probed from"},
	{"waitFor", PropCosmetic, "which hook the UI waits for"},
	{"workspaceFolder", PropChangesWhatRuns, "path opened in the container"},
	{"workspaceMount", PropExecutesOrWidens, "can bind any host path"},
}

var propertyIndex = func() map[string]int {
	m := make(map[string]int, len(propertyTable))
	for i, p := range propertyTable {
		m[p.Name] = i
	}
	return m
}()

// Properties returns a copy of the property class table, sorted by name.
func Properties() []PropertyInfo {
	out := append([]PropertyInfo(nil), propertyTable...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// classOf returns the class of the top-level property name (exact,
// case-sensitive match) and whether the table knows it.
func classOf(name string) (PropertyInfo, bool) {
	i, ok := propertyIndex[name]
	if !ok {
		return PropertyInfo{}, false
	}
	return propertyTable[i], true
}
