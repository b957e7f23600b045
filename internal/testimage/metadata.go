package testimage

// MetadataLabelKey is the image config label in which the Dev Containers
// tooling records devcontainer fragments (docs/design.md "Image
// metadata"; envmanifest.ImageMetadataLabel).
const MetadataLabelKey = "devcontainer.metadata"

// MetadataPointer is the JSON Pointer of that label in an image config
// (envmanifest.ImageMetadataPointer), written out here so that tests
// compare against docs/design.md, not against the code under test.
const MetadataPointer = "/config/Labels/devcontainer.metadata"

// MetadataRefusal is one refusal a label must get: its JSON Pointer and
// refusal class.
type MetadataRefusal struct {
	Pointer string
	Class   string
}

// MetadataCase is a devcontainer.metadata label value for the test images
// (WithLabels), with the outcome docs/design.md "Image metadata" gives it:
// Refused lists every refusal in pointer order, and is empty when the
// label passes. Name is short and usable in image names and run ids.
type MetadataCase struct {
	Name    string
	Label   string
	Refused []MetadataRefusal
}

// Labels returns the config labels of an image carrying the case's label.
func (c MetadataCase) Labels() map[string]string {
	return map[string]string{MetadataLabelKey: c.Label}
}

// MetadataCases are the labels of the image-metadata test images
// (docs/design.md "Image metadata"), as the Dev
// Containers tooling writes them: a fragment with a lifecycle hook, with
// privileged, with capAdd, with a feature's entrypoint; a benign array
// (id, customizations, containerEnv); bare objects (older images), one
// benign and one with a hook; a label that is not JSON; and one with a
// duplicate key.
var MetadataCases = []MetadataCase{
	{"post-create", `[{"id":"ghcr.io/devcontainers/features/node:1"},{"postCreateCommand":"npm ci"}]`,
		[]MetadataRefusal{{MetadataPointer + "/1/postCreateCommand", "executes-or-widens"}}},
	{"privileged", `[{"privileged":true}]`,
		[]MetadataRefusal{{MetadataPointer + "/0/privileged", "executes-or-widens"}}},
	{"cap-add", `[{"id":"ghcr.io/devcontainers/features/go:1","capAdd":["SYS_PTRACE"]}]`,
		[]MetadataRefusal{{MetadataPointer + "/0/capAdd", "executes-or-widens"}}},
	{"entrypoint", `[{"id":"ghcr.io/devcontainers/features/docker-in-docker:2","entrypoint":"/usr/local/share/docker-init.sh"}]`,
		[]MetadataRefusal{{MetadataPointer + "/0/entrypoint", "executes-or-widens"}}},
	{"benign", `[{"id":"ghcr.io/devcontainers/features/node:1"},{"customizations":{"vscode":{"extensions":["dbaeumer.vscode-eslint"]}}},{"containerEnv":{"LANG":"C.UTF-8"}}]`,
		nil},
	{"bare-object", `{"remoteUser":"vscode"}`,
		nil},
	{"bare-hook", `{"remoteUser":"vscode","onCreateCommand":"make setup"}`,
		[]MetadataRefusal{{MetadataPointer + "/onCreateCommand", "executes-or-widens"}}},
	{"not-json", `not json`,
		[]MetadataRefusal{{MetadataPointer, "syntax"}}},
	{"duplicate-key", `[{"postCreateCommand":"a","postCreateCommand":"b"}]`,
		[]MetadataRefusal{{MetadataPointer, "duplicate-key"}}},
}
