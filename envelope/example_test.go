package envelope_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/sandbox-resume/sandbox-resume/envelope"
)

// Sign a document, parse the file back and verify it against the trusted
// keys; a byte changed in the signed object no longer verifies. The key
// comes from a fixed seed so that the output is stable (real keys come
// from WriteKeyPair or openssl); Ed25519 signatures are deterministic. The
// keyid was reproduced outside Go: `openssl pkey -pubout -outform DER |
// sha256sum` over the PKCS#8 key with the same seed.
func ExampleSign() {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	trust := envelope.NewKeyRing(key.Public().(ed25519.PublicKey))

	inner := []byte(`{"image":"docker.io/library/alpine:3","schema":"sandbox.env-manifest/1"}`) // already JCS
	file, err := envelope.Sign(envelope.MemberManifest, inner, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	doc, err := envelope.Parse(file, envelope.MemberManifest)
	if err != nil {
		fmt.Println(err)
		return
	}
	ids, err := doc.VerifiedBy(trust)
	fmt.Println("verified by", ids, err)

	tampered := bytes.Replace(file, []byte("alpine:3"), []byte("alpine:4"), 1)
	doc, err = envelope.Parse(tampered, envelope.MemberManifest)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = doc.Verify(trust)
	fmt.Println("tampered:", errors.Is(err, envelope.ErrSignature))
	// Output:
	// verified by [ed25519:324be2dea8bc44461b0233e51fa48902ed6b1cc671e7739af2551e0bfe68f54e] <nil>
	// tampered: true
}
