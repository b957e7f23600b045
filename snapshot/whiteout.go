package snapshot

import "github.com/sandbox-resume/sandbox-resume/errdef"

// ErrWhiteoutName is wrapped by a suspend's failure when the container's
// changes hold a regular file, directory or link whose base name starts
// with ".wh." (docs/design.md "Hardening", "Workload file names"): in a
// layer such a name is a whiteout or an opaque marker, so on resume it
// would delete what it names in the base (a workload file ".wh.etc" made
// the base image's /etc vanish). Only the differ's own whiteouts and
// opaque markers may carry the prefix. Class "bad-input", reason
// "whiteout-name"; the error names the path.
var ErrWhiteoutName = errdef.New(errdef.ErrBadInput, "whiteout-name: a file of the container is named like a layer whiteout (.wh.*)")

// WhiteoutPrefix is the prefix of whiteout and opaque-marker names in a
// layer (the OCI image-spec's layer format).
const WhiteoutPrefix = ".wh."

// MaxSpecSize is the largest spec blob a ref may record, in bytes
// (docs/design.md "Hardening", "Bounded reads"): the spec is read whole
// into memory (ReadBlob), so a larger spec.size is refused at parse.
const MaxSpecSize = 1 << 20
