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
