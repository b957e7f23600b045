// Package adopt holds the adoption tools of sandbox-resume over package
// envmanifest (docs/design.md "Adoption: lint and pin"): Lint gives each
// refusal of a devcontainer.json its advice from one table keyed by
// property and class (AdviceRules), reports what keeps an accepted
// manifest unpinned and, with Fix, removes the refused members; PlanPin
// and ApplyPin (Pin, PinFile) pin the image by the digest its name
// resolves to and each OCI feature by its lockfile entry. Both edit the
// JSONC text in place (tailscale/hujson), keeping comments and layout.
//
// The package holds no daemon client: the CLI passes an ImageInspector
// (lint) or ImageResolver (pin) when a daemon is named. It imports
// envmanifest and machinery only (docs/design.md "Layout", item 6).
package adopt
