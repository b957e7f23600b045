package adopt

import (
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// TestImageMetadataAdvice: every refusal CheckImageMetadata can give gets
// the image-metadata advice (rebuild the image), never a row about the
// document, and no --fix action: a duplicate name in the label is not the
// document's.
func TestImageMetadataAdvice(t *testing.T) {
	for _, label := range []string{
		`[{"postCreateCommand":"a","postCreateCommand":"b"}]`,
		`not json`,
		`[{"customizations":{"n":9007199254740993}}]`,
		`[{"name":"\ud800"}]`,
		`[{"containerUser":"root"}]`,
		`[{"Image":"x"}]`,
		`[{"privileged":true}]`,
		`[{"containerEnv":{"LD_PRELOAD":"/x.so"}}]`,
		`[1]`,
	} {
		rs := envmanifest.CheckImageMetadata(label)
		if len(rs) == 0 {
			t.Fatalf("%s: no refusal", label)
		}
		for _, r := range rs {
			a := Advise(r)
			if a.Property != AdviceImageMetadata || a.Fix != FixNone || !strings.Contains(a.Advice, "devcontainer.metadata label") {
				t.Errorf("%s: %s (%s): property %q fix %q advice %q", label, r.Pointer, r.Class, a.Property, a.Fix, a.Advice)
			}
		}
	}
}
