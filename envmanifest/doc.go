// Package envmanifest turns a devcontainer.json into the environment
// manifest of a durable run (docs/design.md "Ingestion"):
// devcontainer.json → canonical manifest core → RFC 8785 JCS bytes →
// BLAKE3 address, and whether the manifest is pinned.
//
// Ingest reads the JSONC text with the strict decoder
// (internal/strictjson), places every top-level property in exactly one
// class of one table (Properties), normalizes what is identity (image,
// features and their lockfile pins, containerEnv, mounts, remoteUser) and
// refuses the rest with a class at a JSON Pointer (Refusal, RefusedError).
// Core.Canonical and Address give the bytes and the address two hosts
// compare; Core.IsPinned says whether the run may move between them.
//
// A signed manifest is envmanifest's use of package envelope: the core
// signed under the member "manifest" (SignManifestFile,
// VerifySignedManifest). Nothing here talks to a daemon.
package envmanifest
