package envmanifest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
)

// fuzzSignedKey is the fixed signing key of the FuzzParseSigned corpus
// (RFC 8032 §7.1 TEST 1's secret key): Ed25519 is deterministic, so the
// committed seeds are reproducible byte for byte.
func fuzzSignedKey() ed25519.PrivateKey {
	seed, _ := strconv.Unquote(`"\x9d\x61\xb1\x9d\xef\xfd\x5a\x60\xba\x84\x4a\xf4\x92\xec\x2c\xc4\x44\x49\xc5\x69\x7b\x32\x69\x19\x70\x3b\xac\x03\x1c\xae\x7f\x60"`)
	return ed25519.NewKeyFromSeed([]byte(seed))
}

// fuzzSignedSeeds returns the FuzzParseSigned seed documents by name: signed
// manifests over C7 vector cores (a sample), signTestCore, a signed "ref"
// wrapper, and refused shapes. It returns every canonical inner document the
// fixed key signed (the only documents Verify may ever accept).
func fuzzSignedSeeds(t testing.TB) (seeds map[string][]byte, signed map[string]bool) {
	k := fuzzSignedKey()
	seeds, signed = map[string][]byte{}, map[string]bool{}
	add := func(name string, canonical []byte, member string) []byte {
		f, err := envelope.Sign(member, canonical, k)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seeds[name] = f
		signed[string(canonical)] = true
		return f
	}
	vectors, _ := filepath.Glob(filepath.Join("testdata", "c7", "*.json"))
	sort.Strings(vectors)
	picked := 0
	for _, p := range vectors {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Expect struct {
				Canonical string `json:"canonical"`
			} `json:"expect"`
		}
		if json.Unmarshal(data, &v) != nil || v.Expect.Canonical == "" {
			continue
		}
		if picked%10 == 0 { // every tenth accepted vector: a small, varied corpus
			add("c7-"+strings.TrimSuffix(filepath.Base(p), ".json"), []byte(v.Expect.Canonical), envelope.MemberManifest)
		}
		picked++
	}
	c := signTestCore()
	canonical, err := c.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	full := add("core-all-members", canonical, envelope.MemberManifest)
	add("ref", []byte(`{"core":{"image":"docker.io/library/alpine:3","schema":"sandbox.env-manifest/1"},"schema":"sandbox.snapshot-ref/1"}`), envelope.MemberRef)
	seeds["empty-signatures"] = []byte(`{"manifest":` + string(canonical) + `,"signatures":[]}`)
	seeds["missing-signatures"] = []byte(`{"manifest":` + string(canonical) + `}`)
	seeds["unknown-wrapper-member"] = bytes.Replace(full, []byte(`"signatures"`), []byte(`"x": 1, "signatures"`), 1)
	seeds["entry-extra-member"] = bytes.Replace(full, []byte(`"keyid"`), []byte(`"alg": "ed25519", "keyid"`), 1)
	seeds["duplicate-member"] = bytes.Replace(full, []byte(`"signatures"`), []byte(`"manifest": {}, "signatures"`), 1)
	seeds["unknown-core-member"] = add("x", []byte(`{"extra":true,"image":"docker.io/library/alpine:3","schema":"sandbox.env-manifest/1"}`), envelope.MemberManifest)
	delete(seeds, "x")
	return seeds, signed
}

// fuzzSeedDir is where go test reads FuzzParseSigned's committed corpus.
const fuzzSeedDir = "testdata/fuzz/FuzzParseSigned"

// TestFuzzSignedSeeds checks that the committed FuzzParseSigned seeds are
// exactly what fuzzSignedSeeds generates; with
// SANDBOX_RESUME_WRITE_FUZZ_SEEDS=1 it (re)writes them.
func TestFuzzSignedSeeds(t *testing.T) {
	seeds, _ := fuzzSignedSeeds(t)
	if len(seeds) < 8 {
		t.Fatalf("only %d seeds", len(seeds))
	}
	write := os.Getenv("SANDBOX_RESUME_WRITE_FUZZ_SEEDS") == "1"
	if write {
		if err := os.MkdirAll(fuzzSeedDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range seeds {
		want := []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data))
		p := filepath.Join(fuzzSeedDir, name)
		if write {
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("seed %s: %v (regenerate with SANDBOX_RESUME_WRITE_FUZZ_SEEDS=1 go test ./envmanifest -run TestFuzzSignedSeeds)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %s differs from the generator; regenerate with SANDBOX_RESUME_WRITE_FUZZ_SEEDS=1", name)
		}
	}
}

// FuzzParseSigned: ParseSigned, Verify and ParseCore never panic; an
// accepted document re-serialized (Encode: sorted keys, other whitespace)
// parses back to the same canonical bytes and signatures, and Encode is
// then a fixed point; Verify accepts only documents the fixed key signed
// (the fuzzer cannot forge Ed25519), and an accepted flip of such a
// document keeps its canonical bytes.
func FuzzParseSigned(f *testing.F) {
	seeds, signed := fuzzSignedSeeds(f)
	names := make([]string, 0, len(seeds))
	for n := range seeds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f.Add(seeds[n])
	}
	ring := envelope.NewKeyRing(fuzzSignedKey().Public().(ed25519.PublicKey))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, member := range []string{envelope.MemberManifest, envelope.MemberRef} {
			doc, err := ParseSigned(data, member)
			if err != nil {
				var re *RefusedError
				if !errors.As(err, &re) || len(re.Refusals) == 0 {
					t.Fatalf("ParseSigned error is not a RefusedError with refusals: %v", err)
				}
				continue
			}
			enc, err := doc.Encode()
			if err != nil {
				t.Fatalf("Encode of an accepted document: %v", err)
			}
			doc2, err := ParseSigned(enc, member)
			if err != nil {
				t.Fatalf("re-serialized document refused: %v\n%s", err, enc)
			}
			if !bytes.Equal(doc2.Canonical, doc.Canonical) {
				t.Fatalf("canonical bytes changed on re-serialization:\n%s\n%s", doc.Canonical, doc2.Canonical)
			}
			if fmt.Sprint(doc2.Signatures) != fmt.Sprint(doc.Signatures) {
				t.Fatalf("signatures changed: %v → %v", doc.Signatures, doc2.Signatures)
			}
			if enc2, err := doc2.Encode(); err != nil || !bytes.Equal(enc2, enc) {
				t.Fatalf("Encode is not a fixed point (%v)", err)
			}
			verr := doc.Verify(ring)
			if verr != nil && !errors.Is(verr, envelope.ErrSignature) {
				t.Fatalf("Verify error does not wrap ErrSignature: %v", verr)
			}
			if verr == nil && !signed[string(doc.Canonical)] {
				t.Fatalf("Verify accepted a document the key never signed:\n%s", doc.Canonical)
			}
			if (doc2.Verify(ring) == nil) != (verr == nil) {
				t.Fatal("Verify differs on the re-serialized document")
			}
			if member == envelope.MemberManifest {
				if c, err := ParseCore(doc.Inner); err == nil {
					if again, err := c.Canonical(); err != nil || !bytes.Equal(again, doc.Canonical) {
						t.Fatalf("an accepted core does not serialize back to its canonical bytes (%v)", err)
					}
				}
			}
		}
	})
}
