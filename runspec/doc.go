// Package runspec is the OCI runtime-spec policy of sandbox-resume
// (docs/design.md "Spec validation", check 10): it decodes runtime specs
// with exact integers (the value model), compares an offered spec with the
// recorded one member by member under one rule table (Rules, published as
// runspec/testdata/speccheck/rules.json), lists every difference in the
// verdict's specDrift shape (SpecDrift), and edits a recorded spec as JSON
// for a new container (Patch).
//
// Compare never goes through JCS: specs compare as parsed values, unknown
// and future members must be equal (fail closed). HostPID1Namespace is the
// real host check Options.HostNamespace takes. The package imports the
// strict decoder and nothing of the deciding packages above it
// (docs/design.md "Layout", item 6).
package runspec
