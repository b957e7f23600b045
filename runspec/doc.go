// Package runspec is the OCI runtime-spec policy of sandbox-resume
// (docs/design.md "Spec validation", check 10): it decodes runtime specs
// with exact integers (the value model), compares an offered spec with the
// recorded one member by member under one rule table (Rules, published as
// runspec/testdata/speccheck/rules.json), lists every difference in the
// verdict's specDrift shape (SpecDrift), and edits a recorded spec as JSON
// for a new container (Patch).
//
// Compare never goes through JCS: specs compare as parsed values, unknown
// and future members must be equal (fail closed). HostPID1Namespace and
// CheckBindSource are the real host checks Options takes. JudgeRecorded
// holds a spec and runtime recorded on another host to the local policy
// (docs/design.md "Hardening"). The package imports the strict decoder,
// snapshot's types and containerd's runtime-option messages (the api
// module, not the client), never resume, suspend or migrate
// (docs/design.md "Layout", item 6).
package runspec
