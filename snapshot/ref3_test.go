package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// TestNewRunUID: 128 bits from the reader as "ruid:" and 32 lowercase hex;
// a short read is an error; nil reads crypto/rand (two UIDs differ).
func TestNewRunUID(t *testing.T) {
	uid, err := NewRunUID(bytes.NewReader(bytes.Repeat([]byte{0xAB, 0x01}, 8)))
	if err != nil || uid != "ruid:ab01ab01ab01ab01ab01ab01ab01ab01" || !ValidRunUID(uid) {
		t.Fatalf("NewRunUID = %q, %v", uid, err)
	}
	if uid, err := NewRunUID(bytes.NewReader(make([]byte, 15))); err == nil {
		t.Fatalf("a 15-byte reader gave %q", uid)
	}
	if _, err := NewRunUID(iotest.ErrReader(errors.New("no entropy"))); err == nil || !strings.Contains(err.Error(), "no entropy") {
		t.Fatalf("err = %v", err)
	}
	a, errA := NewRunUID(nil)
	b, errB := NewRunUID(nil)
	if errA != nil || errB != nil || a == b || !ValidRunUID(a) || !ValidRunUID(b) {
		t.Fatalf("crypto/rand UIDs %q %q (%v, %v)", a, b, errA, errB)
	}
	for _, bad := range []string{"", "ruid:", "ruid:AB01ab01ab01ab01ab01ab01ab01ab01", "ruid:ab01ab01ab01ab01ab01ab01ab01ab0", "uid:ab01ab01ab01ab01ab01ab01ab01ab01", "ruid:ab01ab01ab01ab01ab01ab01ab01ab01\n"} {
		if ValidRunUID(bad) {
			t.Errorf("ValidRunUID(%q)", bad)
		}
	}
}

// TestNextLineage: a /3 child appends the parent to its /3 parent's
// ancestors, keeping the latest MaxAncestors; the ancestors of the child
// of a /2 (or /1) parent start at that parent.
func TestNextLineage(t *testing.T) {
	d := func(i int) digest.Digest { return digest.FromString(fmt.Sprint("ref ", i)) }
	const uid = "ruid:0123456789abcdef0123456789abcdef"
	parent := &Ref{Schema: RefSchemaV3, RunUID: uid, Generation: 3, Ancestors: []digest.Digest{d(1), d(2)}}
	got := NextAncestors(parent, d(3))
	if !slices.Equal(got, []digest.Digest{d(1), d(2), d(3)}) {
		t.Fatalf("NextAncestors = %v", got)
	}
	got[0] = d(9)
	if parent.Ancestors[0] != d(1) {
		t.Fatal("NextAncestors shares the parent's slice")
	}
	// At the cap the oldest entry goes.
	full := make([]digest.Digest, MaxAncestors)
	for i := range full {
		full[i] = d(i)
	}
	capped := NextAncestors(&Ref{Schema: RefSchemaV3, Ancestors: full}, d(MaxAncestors))
	if len(capped) != MaxAncestors || capped[0] != d(1) || capped[MaxAncestors-1] != d(MaxAncestors) {
		t.Fatalf("capped: %d entries, first %s, last %s", len(capped), capped[0], capped[len(capped)-1])
	}
	// A /2 parent: the chain starts at it.
	v2 := &Ref{Schema: RefSchemaV2, Generation: 7}
	if got := NextAncestors(v2, d(7)); !slices.Equal(got, []digest.Digest{d(7)}) {
		t.Fatalf("NextAncestors of a /2 parent = %v", got)
	}
}

// TestMarshalV3Refusals: a ref built in code that breaks check 3's /3
// rules does not encode (so it can never be signed), one whose member
// would be refused when read back is not signed, and /1 or /2 refs with a
// /3 member do not encode either.
func TestMarshalV3Refusals(t *testing.T) {
	good, err := OpenRef(readTestdata(t, filepath.Join("ref3", "g2.ref.json")), testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := good.Canonical(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, pointer string
		edit          func(r *Ref)
	}{
		{"no run UID", "/runUID", func(r *Ref) { r.RunUID = "" }},
		{"no ancestors", "/ancestors", func(r *Ref) { r.Ancestors = nil }},
		{"last ancestor not the parent", "/ancestors/0", func(r *Ref) { r.Ancestors = []digest.Digest{digest.FromString("x")} }},
		{"too many ancestors", "/ancestors", func(r *Ref) { r.Ancestors = []digest.Digest{digest.FromString("x"), r.Parent} }},
		{"a duplicate ancestor", "/ancestors/1", func(r *Ref) { r.Generation, r.Ancestors = 3, []digest.Digest{r.Parent, r.Parent} }},
		{"repinned from its own manifest", "/repinnedFrom", func(r *Ref) { r.RepinnedFrom = r.Manifest }},
		{"forked at generation 2", "/forkedFrom", func(r *Ref) {
			r.ForkedFrom = &ForkedFrom{Run: "a", RunUID: "ruid:00000000000000000000000000000000", Generation: 1, Ref: r.Parent}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := *good
			r.Ancestors = slices.Clone(good.Ancestors)
			tc.edit(&r)
			_, err := r.Canonical()
			var re *envmanifest.RefusedError
			if !errors.As(err, &re) || len(re.Refusals) != 1 || re.Refusals[0].Pointer != tc.pointer {
				t.Fatalf("err = %v, want one refusal at %s", err, tc.pointer)
			}
		})
	}
	// A member that encodes but would be refused when read back is not
	// signed either.
	priv, err := envelope.LoadPrivateKey(filepath.Join("testdata", "ref-test.key"))
	if err != nil {
		t.Fatal(err)
	}
	bad := *good
	bad.Memory = &Memory{Format: "criu/9", Blobs: []Descriptor{{MediaType: MediaTypeMemoryCRIU, Digest: digest.FromString("m"), Size: 1}},
		Runtime: MemoryRuntime{Tool: MemoryToolCRIU, Version: "4.1.1", BinaryDigest: digest.FromString("criu")}, Host: MemoryHost{Kernel: "6.18", CPU: CPU{Vendor: "v"}}}
	var re *envmanifest.RefusedError
	if _, err := SignRef(&bad, priv); !errors.As(err, &re) || len(re.Refusals) != 1 || re.Refusals[0].Pointer != "/ref/memory/format" {
		t.Fatalf("SignRef of a ref with memory format criu/9: %v", err)
	}
	bad.Memory.Format = MemoryFormatCRIU
	if _, err := SignRef(&bad, priv); err != nil {
		t.Fatalf("SignRef of a ref with a criu/1 memory image: %v", err)
	}
	v2 := *good
	v2.Schema, v2.Ancestors = RefSchemaV2, nil
	if _, err := v2.Canonical(); err == nil || !strings.Contains(err.Error(), "runUID") {
		t.Fatalf("a /2 ref with a run UID: %v", err)
	}
}
