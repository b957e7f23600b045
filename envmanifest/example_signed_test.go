package envmanifest_test

import (
	"crypto/ed25519"
	"fmt"
	"os"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// Sign a manifest core and verify the file back, as `sandbox-resume sign`
// and `sandbox-resume verify` do. The key comes from a fixed seed here so
// the output is stable; real keys come from keygen or openssl. The keyid and
// sig below were reproduced outside Go: `openssl pkey -pubout -outform DER |
// sha256sum` and `openssl pkeyutl -sign -rawin` over the canonical bytes
// with the same all-zero seed.
func ExampleVerifySignedManifest() {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	core := envmanifest.Core{Schema: envmanifest.CoreSchema, Image: "docker.io/library/alpine:3"}
	canonical, err := core.Canonical()
	if err != nil {
		fmt.Println(err)
		return
	}
	file, err := envelope.Sign(envelope.MemberManifest, canonical, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	os.Stdout.Write(file)

	trust := envelope.NewKeyRing(key.Public().(ed25519.PublicKey))
	vm, err := envmanifest.VerifySignedManifest(file, trust)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(vm.Address == envmanifest.Address(canonical), vm.Pinned)
	// Output:
	// {
	//   "manifest": {
	//     "image": "docker.io/library/alpine:3",
	//     "schema": "sandbox.env-manifest/1"
	//   },
	//   "signatures": [
	//     {
	//       "keyid": "ed25519:339e2ff917630507b6a423b5ce084e285d1fa65d93b3e27a6195d3bbebc9ae23",
	//       "sig": "wZIAjo2If4jC3tiECUOGoVMRhdRsNO+ijFOSWgHuirIAbfCpMMRDFYBJpyCFHdM6RvzZoBZVNxQagxyGnbVKBA=="
	//     }
	//   ]
	// }
	// true false
}
