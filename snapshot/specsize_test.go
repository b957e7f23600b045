package snapshot

import (
	"crypto"
	"errors"
	"path/filepath"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// testPrivateKey is the golden vectors' signing key (testdata/ref-test.key).
func testPrivateKey(t *testing.T) crypto.Signer {
	t.Helper()
	k, err := envelope.LoadPrivateKey(filepath.Join("testdata", "ref-test.key"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSpecSizeCapped: docs/design.md "Hardening", "Bounded reads": a ref
// whose spec.size is over MaxSpecSize is refused at parse (the spec blob
// is read whole into memory), naming /ref/spec/size; at the cap it passes.
func TestSpecSizeCapped(t *testing.T) {
	good, err := OpenRef(readTestdata(t, filepath.Join("ref3", "g2.ref.json")), testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	for size, ok := range map[int64]bool{MaxSpecSize: true, MaxSpecSize + 1: false, 1 << 40: false} {
		r := *good
		spec := *good.Spec
		spec.Size = size
		r.Spec = &spec
		_, err := SignRef(&r, testPrivateKey(t))
		var re *envmanifest.RefusedError
		switch {
		case ok && err != nil:
			t.Errorf("spec.size %d: %v", size, err)
		case !ok && (!errors.As(err, &re) || len(re.Refusals) != 1 || re.Refusals[0].Pointer != "/ref/spec/size"):
			t.Errorf("spec.size %d: %v, want one refusal at /ref/spec/size", size, err)
		}
	}
}
