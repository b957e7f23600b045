// Package envelope holds sandbox-resume's signed documents and the keys
// that sign them (docs/design.md "Signed documents").
//
// A signed document is the JSON object {<member>: {…}, "signatures":
// [{"keyid", "sig"}, …]}: member names what is signed ("manifest" for a
// manifest core, "ref" for a SnapshotRef), and every signature is an
// Ed25519 signature (RFC 8032) over the RFC 8785 JCS bytes of that inner
// object exactly as it was parsed. Sign writes such a file with any
// crypto.Signer holding an Ed25519 key (a private key in memory, a KMS or
// an HSM); Parse reads one with the strict decoder (internal/strictjson);
// Document.Verify checks it against a KeyRing of trusted public keys.
//
// Keys are PEM files: PKCS#8 private keys and PKIX public keys, the files
// `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout` write;
// a key is named by its KeyID, "ed25519:" + the SHA-256 of its PKIX DER.
//
// The package knows nothing of what the inner document holds: envmanifest
// reads a signed manifest's core, snapshot a SnapshotRef.
package envelope
