// Package strictjson is the strict JSON and JSONC decoder every reader of
// untrusted JSON in sandbox-resume uses (docs/design.md "Ingestion"), and
// the RFC 6901 JSON Pointers that name places in what it decoded.
//
// Decode refuses what lets two parsers see two documents in one text:
// duplicate member names at any depth, invalid UTF-8, lone surrogates and
// Unicode noncharacters, numbers outside I-JSON (RFC 7493 §2.2), input over
// MaxInputBytes and nesting deeper than MaxDepth. It returns a tree of
// Nodes, each with its pointer and its raw text (ready for RFC 8785 JCS),
// and every problem as an *Error carrying a kind (Syntax, Encoding, Limit,
// Number, DuplicateKey), a JSON Pointer and, for a problem that stops
// decoding, a line and column.
//
// The package knows nothing of what the documents mean: callers map an
// Error's kind to their own refusal classes (envmanifest does), and it
// never canonicalizes.
package strictjson
