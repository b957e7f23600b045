package snapshot

import "testing"

// TestBaseTarget: the index digest when the reference named an index, else
// the platform manifest digest.
func TestBaseTarget(t *testing.T) {
	const idx, man = "sha256:" + "1111111111111111111111111111111111111111111111111111111111111111",
		"sha256:" + "2222222222222222222222222222222222222222222222222222222222222222"
	if got := (Base{IndexDigest: idx, ManifestDigest: man}).Target(); got != idx {
		t.Errorf("with an index: Target() = %s, want %s", got, idx)
	}
	if got := (Base{ManifestDigest: man}).Target(); got != man {
		t.Errorf("without an index: Target() = %s, want %s", got, man)
	}
}

// TestRefGen: a /1 ref, which has no "generation" member, is generation 1.
func TestRefGen(t *testing.T) {
	for _, tt := range []struct {
		ref  Ref
		want uint64
	}{
		{Ref{Schema: RefSchemaV1}, 1},
		{Ref{Schema: RefSchemaV2, Generation: 3}, 3},
		{Ref{Schema: RefSchemaV3, Generation: 1}, 1},
	} {
		if got := tt.ref.Gen(); got != tt.want {
			t.Errorf("%s generation %d: Gen() = %d, want %d", tt.ref.Schema, tt.ref.Generation, got, tt.want)
		}
	}
}
