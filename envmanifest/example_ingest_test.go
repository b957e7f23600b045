package envmanifest_test

import (
	"errors"
	"fmt"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// Ingest a devcontainer.json, as `sandbox-resume manifest` does: JSONC in,
// the canonical manifest core and its address out. The name is cosmetic
// (excluded from the core); the image reference is normalized. A document
// with a member that widens the sandbox is refused, each refusal with its
// JSON Pointer and class. The address was cross-checked with Debian's
// b3sum over the canonical bytes.
func ExampleIngest() {
	config := []byte(`{
	// comments and trailing commas are fine
	"name": "demo",
	"image": "debian:12",
	"containerEnv": {"LANG": "C.UTF-8"},
	"remoteUser": "vscode",
}`)
	m, err := envmanifest.Ingest(config, envmanifest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(m.Canonical))
	fmt.Println(m.Address)
	fmt.Println("excluded:", m.Excluded, "pinned:", m.IsPinned())

	_, err = envmanifest.Ingest([]byte(`{"image": "debian:12", "runArgs": ["--privileged"]}`), envmanifest.Options{})
	var re *envmanifest.RefusedError
	if errors.As(err, &re) {
		for _, r := range re.Refusals {
			fmt.Println(r)
		}
	}
	// Output:
	// {"containerEnv":{"LANG":"C.UTF-8"},"image":"docker.io/library/debian:12","remoteUser":"vscode","schema":"sandbox.env-manifest/1"}
	// blake3:4923881710e80f1f6159c7dc359002e3a46dfa904874b9433d4157b11f40f07f
	// excluded: [/name] pinned: false
	// /runArgs: executes-or-widens: runArgs is refused: raw docker run arguments; move it out of the environment declaration
}
