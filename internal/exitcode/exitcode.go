// Package exitcode is the one table of sandbox-resume's error classes and
// exit codes (docs/design.md "CLI contract"): the class names a verdict's
// "class" and every other command's "error.class" carry under --output
// json, and the exit code of each.
//
// Library packages never return exit codes or name flags: their errors
// carry classes (the sentinels of package errdef), and the CLI maps each
// to a Class here (cmd/sandbox-resume's one table). resume's verdict uses the
// classes directly. docs/exit-codes.md and the verdict schema are generated
// from Codes and Class.Code.
package exitcode

// Exit codes of the sandbox-resume CLI.
const (
	OK         = 0  // ok / resume accepted
	Internal   = 1  // internal, daemon, registry or ledger error
	Refused    = 2  // refused input: devcontainer.json, lockfile, image metadata, SnapshotRef, spec or archive does not ingest
	Mismatch   = 3  // manifest mismatch (drift); at suspend, the declaration does not describe the container; an offered spec widens the recorded one
	CrossHost  = 4  // unpinned cross-host claim
	Image      = 5  // image unresolved or drifted in the content store
	Untrusted  = 6  // signature missing, invalid or untrusted; or ref tampered; or the ledger records another ref for this generation (forked)
	Snapshot   = 7  // snapshot content missing or corrupt
	Claim      = 8  // claim conflict: the run is held or being resumed, a fenced-out holder, the container id exists, the run id is taken
	Superseded = 9  // superseded: a newer generation of the run exists, or the run was discarded
	Memory     = 10 // memory incompatible: the recorded memory image cannot be restored on this host
	Usage      = 64 // usage error
)

// CodeInfo documents one exit code: the code and what it means, for people.
type CodeInfo struct {
	Code    int
	Meaning string
}

// Codes lists every exit code with its meaning, in ascending order.
var Codes = []CodeInfo{
	{OK, "ok / resume accepted"},
	{Internal, "internal, daemon, registry or ledger error (unreachable, locked, no quorum, bad credentials)"},
	{Refused, "refused input: devcontainer.json, lockfile, image metadata, SnapshotRef, spec or archive does not ingest (also a config file or container that does not exist)"},
	{Mismatch, "manifest mismatch (drift); at suspend, the declaration does not describe the container; an offered spec widens the recorded one, or a recorded spec from another host carries hooks, privileged settings or runtime options this host does not run unless trusted (spec-drift)"},
	{CrossHost, "unpinned cross-host claim"},
	{Image, "image unresolved or drifted in the content store"},
	{Untrusted, "signature missing, invalid or untrusted; or ref tampered; or the ledger records another ref for this generation (forked)"},
	{Snapshot, "snapshot content missing or corrupt"},
	{Claim, "claim conflict: an incarnation holds the run or a claim is in flight (also a previous release's claim lease); a fenced-out incarnation or resumer; the container id exists, or holds another run's container under a replaced holder's id; a take-over of a holder running on this host without --force; the run id is taken; the container was already suspended; a second handoff of a generation to another host, or a recall of a run that is not handed off"},
	{Superseded, "superseded: a newer generation of the run exists, the run was discarded or purged, another run has its id, or the generation was handed off (the verdict names which; reason beside the class); this ledger never recorded the generation (not-handed-off); import and pull of an artifact whose handoff statement names another host (nothing stored)"},
	{Memory, "memory incompatible: this host cannot restore the generation's memory image (format, checkpoint tool or its version, CPU flags); the verdict names the field and both values (resume --no-memory restarts the process from the filesystem)"},
	{Usage, "usage error"},
}

// Class names why a command failed or a resume was refused. The strings
// are part of the JSON contract and never change.
type Class string

// The classes, with their exit codes (Class.Code).
const (
	// ClassInternal: an internal or daemon error, or a fact that could not
	// be established (1).
	ClassInternal Class = "internal"
	// ClassRefused: a devcontainer.json or lockfile that does not ingest
	// outside a verdict, with its refusals; an existing key file (2).
	ClassRefused Class = "refused"
	// ClassBadInput: any other input that cannot be used: a missing file
	// or container, a ref, spec or archive that does not decode; verdict
	// checks 1, 3, 5 and 10 (2).
	ClassBadInput Class = "bad-input"
	// ClassImageMetadata: the image's devcontainer.metadata label is
	// refused (docs/design.md "Image metadata"): at suspend, verdict check
	// 8, lint (2).
	ClassImageMetadata Class = "image-metadata"
	// ClassManifestMismatch: verdict check 6; at suspend, the declaration
	// does not describe the container (3).
	ClassManifestMismatch Class = "manifest-mismatch"
	// ClassSpecDrift: an offered runtime spec widens the recorded one;
	// verdict check 10 (docs/design.md "Spec validation") (3).
	ClassSpecDrift Class = "spec-drift"
	// ClassUnpinnedCrossHost: verdict check 7 (4).
	ClassUnpinnedCrossHost Class = "unpinned-cross-host"
	// ClassImageUnresolved: verdict check 8; suspend (5).
	ClassImageUnresolved Class = "image-unresolved"
	// ClassImageDrifted: verdict check 8 (5).
	ClassImageDrifted Class = "image-drifted"
	// ClassUntrusted: a signature missing, invalid or untrusted; verdict
	// check 2; verify (6).
	ClassUntrusted Class = "untrusted"
	// ClassTampered: a ref whose address or pinned flag disagrees with its
	// core; verdict check 4 (6).
	ClassTampered Class = "tampered"
	// ClassSnapshotMissing: snapshot content missing or corrupt; verdict
	// check 9, materialize, export (7).
	ClassSnapshotMissing Class = "snapshot-missing"
	// ClassForked: the ledger records another ref for this generation;
	// verdict check 11 (6).
	ClassForked Class = "forked"
	// ClassClaimConflict: verdict check 11 (held, a claim in flight, a
	// previous release's claim lease, an existing container id); a lost
	// claim at Live; suspend (held elsewhere, run id taken, already
	// suspended); discard and purge refusals (8).
	ClassClaimConflict Class = "claim-conflict"
	// ClassSuperseded: a newer generation of the run is recorded, or the
	// run was discarded; verdict check 11 (9).
	ClassSuperseded Class = "superseded"
	// ClassMemoryIncompatible: the recorded memory image cannot be
	// restored here; verdict check 12 (10).
	ClassMemoryIncompatible Class = "memory-incompatible"
	// ClassUsage: a command-line mistake, an invalid run id; verdict check
	// 12: --copy or --take-over of a memory generation without --no-memory
	// or --duplicate-process (64).
	ClassUsage Class = "usage"
)

// VerdictClasses lists the classes a resume verdict can carry, in the
// order the documentation lists them.
var VerdictClasses = []Class{
	ClassBadInput, ClassUntrusted, ClassTampered, ClassManifestMismatch,
	ClassUnpinnedCrossHost, ClassImageUnresolved, ClassImageDrifted,
	ClassImageMetadata, ClassSnapshotMissing, ClassMemoryIncompatible, ClassSpecDrift,
	ClassForked, ClassClaimConflict, ClassSuperseded, ClassUsage, ClassInternal,
}

// Code returns the exit code of class c; a class not in this table
// (ClassInternal too) is Internal (1).
func (c Class) Code() int {
	switch c {
	case ClassRefused, ClassBadInput, ClassImageMetadata:
		return Refused
	case ClassUntrusted, ClassTampered, ClassForked:
		return Untrusted
	case ClassManifestMismatch, ClassSpecDrift:
		return Mismatch
	case ClassUnpinnedCrossHost:
		return CrossHost
	case ClassImageUnresolved, ClassImageDrifted:
		return Image
	case ClassSnapshotMissing:
		return Snapshot
	case ClassClaimConflict:
		return Claim
	case ClassSuperseded:
		return Superseded
	case ClassMemoryIncompatible:
		return Memory
	case ClassUsage:
		return Usage
	}
	return Internal
}

// Hardening documents one refusal of unsafe input or of an unsafe state
// (docs/design.md "Hardening"), for docs/exit-codes.md: the exit code, what
// is refused and why.
type Hardening struct {
	Code int
	What string
	Why  string
}

// HardeningRefusals lists the refusals of docs/design.md "Hardening" this
// build makes outside a resume verdict, by exit code.
var HardeningRefusals = []Hardening{
	{Internal, "a ledger file smaller than two bbolt pages (a 0-byte file too), one bbolt cannot open, or one with a corrupt page (bbolt's panic is recovered); the error names the file",
		"it is never taken for a fresh ledger: every record and tombstone would be gone"},
	{Internal, "a ledger file writable by group or other, or owned by another uid, unless --ledger-insecure-mode",
		"whoever can write it can rewrite every record, fence and tombstone"},
	{Internal, "an output write error (stdout closed, /dev/full)",
		"the result or verdict would be lost with the command's own exit code (0)"},
	{Internal, "a failed fsync of the directory of a file written atomically",
		"the rename may not survive a crash"},
	{Refused, "an archive entry that is a GNU sparse file, a PAX sparse file (GNU.sparse.*) or carries a PAX record other than path, size, mtime, uid, gid, uname and gname",
		"a 2 KB sparse entry expands to any size in the content store"},
	{Refused, "an archive blob index.json does not reach",
		"only the artifact and its base may reach the content store"},
	{Refused, "a ref whose base.name is not its core.image with at most the tag or the digest dropped",
		"import and pull would create an image record under any free name a signed ref carries"},
	{Refused, "an input file (--config, --ref, --spec, --key, --trust, manifest PATH, …) over its cap — 1 MiB for JSON, 64 KiB for keys — or a device",
		"a path such as /dev/zero was read to exhaustion"},
	{Refused, "a private key file group or other may read or write (--key); chmod 600 it, as ssh requires",
		"the signing key is the run's identity"},
	{Refused, "a handoff statement (an artifact's last layer) that names another run, run UID, generation or ref than the artifact's ref, or does not decode; --handoff naming this host",
		"a statement signed for one generation must not hand over another"},
	{Untrusted, "a handoff statement whose signature does not verify against --trust",
		"anyone who can write an archive could otherwise hand a run to any host"},
	{Superseded, "import or pull of an artifact whose handoff statement names another host (reason handed-off); nothing is stored",
		"the run was handed to that host only: taking it here too would resume it twice"},
}
