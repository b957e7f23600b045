package envmanifest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/zeebo/blake3"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
)

// vecShared returns the shared/ folder beside the module root (or
// $SANDBOX_RESUME_SHARED). It skips when the folder is missing, and fails
// instead under CI=true.
func vecShared(t *testing.T) string {
	t.Helper()
	return testenv.Shared(t)
}

// jcsVector is one RFC 8785 input/output pair from shared/vectors/jcs, with
// what this project's strict path must do with it, written by hand:
// decoderRefusals is what Decode reports for the file as a document (nil:
// accepted), featureRefusals what Ingest reports when the file's value is
// the option "v" of a feature (nil: accepted, options = {"v": output}).
type jcsVector struct {
	dir, name       string
	decoderRefusals []c7Refusal
	featureRefusals []c7Refusal
}

var jcsVectors = []jcsVector{
	// A top-level array is not a devcontainer document.
	{dir: "jcs", name: "arrays", decoderRefusals: []c7Refusal{{"", ClassSyntax}}},
	{dir: "jcs", name: "french"},
	{dir: "jcs", name: "structures"},
	{dir: "jcs", name: "unicode"},
	// 333333333.33333329 names a different decimal than its JCS form
	// 333333333.3333333, and 1E30 is a whole value beyond 2^53−1: both are
	// refused (docs/design.md "Reading strictly": numbers); 4.50, 2e-3 and 1e-27 are fine.
	{dir: "jcs", name: "values",
		decoderRefusals: []c7Refusal{{"/numbers/0", ClassNumber}, {"/numbers/1", ClassNumber}},
		featureRefusals: []c7Refusal{{"/features/node/v/numbers/0", ClassNumber}, {"/features/node/v/numbers/1", ClassNumber}}},
	{dir: "jcs", name: "weird"},
	{dir: "jcs/gowebpki-extra", name: "false", decoderRefusals: []c7Refusal{{"", ClassSyntax}}},
	{dir: "jcs/gowebpki-extra", name: "null", decoderRefusals: []c7Refusal{{"", ClassSyntax}}},
	{dir: "jcs/gowebpki-extra", name: "true", decoderRefusals: []c7Refusal{{"", ClassSyntax}}},
	{dir: "jcs/gowebpki-extra", name: "simpleString", decoderRefusals: []c7Refusal{{"", ClassSyntax}}},
}

// jcsOutputAddresses are the BLAKE3-256 addresses of the reference outputs,
// copied from shared/notes/canon.md §1 (computed there after zeebo/blake3
// passed the official vectors).
var jcsOutputAddresses = map[string]string{
	"arrays":     "cae57e23b8b115b3ced06afb46c20508462cfe52bdd46c60bc1f7b4606704aeb",
	"french":     "067cbabada16b29647402322cb1cd69ec0960d2c444e5ce1a6f9e21e6007eb57",
	"structures": "df2f67e6687931323ff5927f20f4cabfa9b66fd445e3a256f791146b0ca486f1",
	"unicode":    "42481280343274e4d0c2dd0eee32e31397294a5b7f809e36edd951633929eee3",
	"values":     "5b3b80c51be7d32b5df2e507fa592a888faf3a4c98b39ef647fadffcd4ce73bd",
	"weird":      "39c4251bef0068ef5c8c95f616ad4b309c2ed07470732b7cc14245ee9105185d",
}

func vecRefusalKeys(rs []Refusal) []c7Refusal {
	var out []c7Refusal
	for _, r := range rs {
		out = append(out, c7Refusal{r.Pointer, r.Class})
	}
	return out
}

func vecSameRefusals(got, want []c7Refusal) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestJCSVectors runs the RFC 8785 reference pairs (cyberphone) and the
// gowebpki extra pairs through jcs.Transform, through the strict decoder
// followed by JCS (the path option values take), and through Ingest as a
// feature's option value; the outputs' addresses are checked against
// notes/canon.md.
func TestJCSVectors(t *testing.T) {
	root := filepath.Join(vecShared(t), "vectors")
	for _, v := range jcsVectors {
		t.Run(v.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(root, v.dir, "input", v.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(root, v.dir, "output", v.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if hx, err := os.ReadFile(filepath.Join(root, v.dir, "outhex", v.name+".txt")); err == nil {
				b, err := hex.DecodeString(strings.Join(strings.Fields(string(hx)), ""))
				if err != nil || !bytes.Equal(b, want) {
					t.Errorf("outhex/%s.txt does not spell output/%s.json (%v)", v.name, v.name, err)
				}
			} else if !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}

			got, err := jcs.Transform(in)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("jcs.Transform: %v\n got  %q\n want %q", err, got, want)
			}
			if again, err := jcs.Transform(want); err != nil || !bytes.Equal(again, want) {
				t.Errorf("jcs.Transform is not idempotent on the output: %v", err)
			}
			if a, ok := jcsOutputAddresses[v.name]; ok {
				if Address(want) != AddressPrefix+a {
					t.Errorf("Address(output) = %s, notes/canon.md says %s", Address(want), a)
				}
				if b := c7B3sum(t, want); b != "" && b != AddressPrefix+a {
					t.Errorf("b3sum(output) = %s, notes/canon.md says %s", b, a)
				}
			}

			node, refusals := decode(in, false)
			if g := vecRefusalKeys(refusals); !vecSameRefusals(g, v.decoderRefusals) {
				t.Errorf("Decode refusals %v, want %v", refusals, v.decoderRefusals)
			}
			if v.decoderRefusals == nil {
				if node == nil {
					t.Fatal("Decode accepted but returned no node")
				}
				got, err := jcs.Transform(node.Raw)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("Decode → JCS: %v\n got  %q\n want %q", err, got, want)
				}
			}

			doc := append([]byte(`{"image":"debian:12","features":{"node":{"v":`), in...)
			doc = append(doc, "}}}"...)
			m, err := Ingest(doc, Options{})
			if v.featureRefusals != nil {
				var re *RefusedError
				if !errors.As(err, &re) || !vecSameRefusals(vecRefusalKeys(re.Refusals), v.featureRefusals) {
					t.Errorf("Ingest: want refusals %v, got %v", v.featureRefusals, c7Describe(m, err))
				}
				return
			}
			if err != nil {
				t.Fatalf("Ingest: %v", err)
			}
			wantCanon := `{"features":[{"id":"ghcr.io/devcontainers/features/node:1","options":{"v":` + string(want) +
				`}}],"image":"docker.io/library/debian:12","schema":"sandbox.env-manifest/1"}`
			if string(m.Canonical) != wantCanon {
				t.Errorf("Ingest canonical\n got  %s\n want %s", m.Canonical, wantCanon)
			}
		})
	}
}

// TestBLAKE3Vectors runs the official BLAKE3 test vectors (input bytes
// i mod 251) through Address and zeebo/blake3's extended output, keyed hash
// and key derivation, and cross-checks a few lengths with b3sum.
func TestBLAKE3Vectors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(vecShared(t), "vectors", "blake3", "test_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vf struct {
		Key           string `json:"key"`
		ContextString string `json:"context_string"`
		Cases         []struct {
			InputLen  int    `json:"input_len"`
			Hash      string `json:"hash"`
			KeyedHash string `json:"keyed_hash"`
			DeriveKey string `json:"derive_key"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Cases) != 35 {
		t.Fatalf("want the 35 official cases, found %d", len(vf.Cases))
	}
	for _, c := range vf.Cases {
		in := make([]byte, c.InputLen)
		for i := range in {
			in[i] = byte(i % 251)
		}
		if got, want := Address(in), AddressPrefix+c.Hash[:64]; got != want {
			t.Errorf("len %d: Address = %s, want %s", c.InputLen, got, want)
		}
		xof := func(h *blake3.Hasher) string {
			out := make([]byte, len(c.Hash)/2)
			if _, err := h.Digest().Read(out); err != nil {
				t.Fatal(err)
			}
			return hex.EncodeToString(out)
		}
		h := blake3.New()
		h.Write(in)
		if got := xof(h); got != c.Hash {
			t.Errorf("len %d: extended hash mismatch", c.InputLen)
		}
		kh, err := blake3.NewKeyed([]byte(vf.Key))
		if err != nil {
			t.Fatal(err)
		}
		kh.Write(in)
		if got := xof(kh); got != c.KeyedHash {
			t.Errorf("len %d: keyed_hash mismatch", c.InputLen)
		}
		dk := make([]byte, len(c.DeriveKey)/2)
		blake3.DeriveKey(vf.ContextString, in, dk)
		if got := hex.EncodeToString(dk); got != c.DeriveKey {
			t.Errorf("len %d: derive_key mismatch", c.InputLen)
		}
		switch c.InputLen {
		case 0, 1, 1024, 1025, 102400:
			if b := c7B3sum(t, in); b != "" && b != AddressPrefix+c.Hash[:64] {
				t.Errorf("len %d: b3sum = %s, vector says %s", c.InputLen, b, c.Hash[:64])
			}
		}
	}
}
