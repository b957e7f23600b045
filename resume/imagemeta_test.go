package resume_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
	"github.com/sandbox-resume/sandbox-resume/resume"
)

// labelImage stores a testimage with config labels in fx's fake, points
// testImage at its index and records it as the ref's base (as a suspend of
// it would have, or a ref signed before the label check existed), and
// returns the image.
func labelImage(t *testing.T, fx *fixture, labels map[string]string) *testimage.Image {
	t.Helper()
	im, err := testimage.Synthetic(ocispec.Platform{OS: "linux", Architecture: "amd64"}, "labelled", testimage.WithLabels(labels))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range im.Blobs {
		fx.facts.PutBlob(b.Data)
	}
	if err := fx.facts.SetImage(testImage, im.Index); err != nil {
		t.Fatal(err)
	}
	base, err := fx.facts.ResolveImage(context.Background(), testImage)
	if err != nil {
		t.Fatal(err)
	}
	fx.ref.Base = base
	return im
}

func refusalPairs(v *resume.Verdict) []testimage.MetadataRefusal {
	var out []testimage.MetadataRefusal
	for _, r := range v.Refusals {
		out = append(out, testimage.MetadataRefusal{Pointer: r.Pointer, Class: string(r.Class)})
	}
	return out
}

// TestImageMetadataCheck is check 8's last condition (docs/design.md
// "Resume decision" and "Image metadata") for each test label: a refused
// label fails check 8 with class image-metadata, exit 2, exactly the
// label's refusals in the verdict's refusals and their pointers in the
// check's detail; a label that passes, or none, is accepted.
func TestImageMetadataCheck(t *testing.T) {
	cases := append([]testimage.MetadataCase(nil), testimage.MetadataCases...)
	cases = append(cases,
		testimage.MetadataCase{Name: "empty-label", Label: "",
			Refused: []testimage.MetadataRefusal{{Pointer: testimage.MetadataPointer, Class: "syntax"}}},
		testimage.MetadataCase{Name: "several", Label: `[{"postStartCommand":"a","capAdd":[]},{"privileged":true}]`,
			Refused: []testimage.MetadataRefusal{
				{Pointer: testimage.MetadataPointer + "/0/capAdd", Class: "executes-or-widens"},
				{Pointer: testimage.MetadataPointer + "/0/postStartCommand", Class: "executes-or-widens"},
				{Pointer: testimage.MetadataPointer + "/1/privileged", Class: "executes-or-widens"}}})
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			fx := newFixture(t, baseConfig)
			im := labelImage(t, fx, tc.Labels())
			v := fx.decide()
			if len(tc.Refused) == 0 {
				wantVerdict(t, v, 0, "", "")
				if d := v.Checks[7].Detail; !strings.Contains(d, "devcontainer.metadata label passes") {
					t.Errorf("image detail %q does not say the label passes", d)
				}
				if len(v.Refusals) != 0 {
					t.Errorf("refusals %v on an accepted verdict", v.Refusals)
				}
				return
			}
			wantVerdict(t, v, 2, resume.ClassImageMetadata, resume.CheckImage)
			if got := refusalPairs(v); fmt.Sprint(got) != fmt.Sprint(tc.Refused) {
				t.Errorf("refusals %v, want %v", got, tc.Refused)
			}
			d := v.Checks[7].Detail
			for _, r := range tc.Refused {
				if !strings.Contains(d, r.Pointer) {
					t.Errorf("image detail %q does not name %s", d, r.Pointer)
				}
			}
			if !strings.Contains(d, im.Config.Digest.String()) {
				t.Errorf("image detail %q does not name the config %s", d, im.Config.Digest)
			}
			if len(v.Drift) != 0 {
				t.Errorf("drift %v", v.Drift)
			}
			// The wire shape: class "image-metadata", exitCode 2, the
			// refusals with their pointers.
			var wire struct {
				Class    string `json:"class"`
				ExitCode int    `json:"exitCode"`
				Refusals []struct {
					Pointer, Class, Message string
				} `json:"refusals"`
			}
			b, _ := json.Marshal(v)
			if err := json.Unmarshal(b, &wire); err != nil {
				t.Fatal(err)
			}
			if wire.Class != "image-metadata" || wire.ExitCode != 2 || len(wire.Refusals) != len(tc.Refused) || wire.Refusals[0].Pointer != tc.Refused[0].Pointer || wire.Refusals[0].Message == "" {
				t.Errorf("verdict JSON %s", b)
			}
		})
	}
}

// TestImageMetadataRecordedPolicy: a label's containerEnv goes through the
// ref's recorded reserved-environment policy (docs/design.md
// "Hardening"): LD_PRELOAD is refused when the policy reserves it, and
// passes under a recorded policy of none.
func TestImageMetadataRecordedPolicy(t *testing.T) {
	labels := map[string]string{testimage.MetadataLabelKey: `[{"containerEnv":{"LD_PRELOAD":"/usr/lib/x.so"}}]`}
	fx := newFixture(t, baseConfig)
	fx.ref.Policy = []string{"LD_PRELOAD"}
	labelImage(t, fx, labels)
	v := fx.decide()
	wantVerdict(t, v, 2, resume.ClassImageMetadata, resume.CheckImage)
	if got := refusalPairs(v); fmt.Sprint(got) != fmt.Sprint([]testimage.MetadataRefusal{{Pointer: testimage.MetadataPointer + "/0/containerEnv/LD_PRELOAD", Class: "reserved-env"}}) {
		t.Errorf("refusals %v", got)
	}
	fx = newFixture(t, baseConfig)
	fx.ref.Policy = []string{}
	labelImage(t, fx, labels)
	wantVerdict(t, fx.decide(), 0, "", "")
}

// TestImageMetadataCheckOrder: the label is check 8's last condition. A
// digest-pinned image is checked too; a drifted name or missing content
// fails before the label is looked at; other labels are not checked.
func TestImageMetadataCheckOrder(t *testing.T) {
	hook := testimage.MetadataCases[0]
	t.Run("pinned by digest", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		im := labelImage(t, fx, hook.Labels())
		fx.config = strings.Replace(baseConfig, `"busybox:1"`, `"busybox:1@`+im.Index.Digest.String()+`"`, 1)
		if err := rebase(fx); err != nil {
			t.Fatal(err)
		}
		v := fx.decide()
		wantVerdict(t, v, 2, resume.ClassImageMetadata, resume.CheckImage)
		if !strings.Contains(fx.ref.Core.Image, "@sha256:") || len(v.Refusals) != 1 {
			t.Errorf("core image %q, refusals %v", fx.ref.Core.Image, v.Refusals)
		}
	})
	t.Run("drifted before the label", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		plain := fx.ref.Base
		labelImage(t, fx, hook.Labels())
		fx.ref.Base = plain // recorded: the unlabelled image; the name now names the labelled one
		v := fx.decide()
		wantVerdict(t, v, 5, resume.ClassImageDrifted, resume.CheckImage)
		if len(v.Refusals) != 0 {
			t.Errorf("refusals %v", v.Refusals)
		}
	})
	t.Run("missing layer before the label", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		im := labelImage(t, fx, hook.Labels())
		fx.facts.DeleteBlob(im.Layers[0].Digest)
		v := fx.decide()
		wantVerdict(t, v, 5, resume.ClassImageUnresolved, resume.CheckImage)
		if len(v.Refusals) != 0 {
			t.Errorf("refusals %v", v.Refusals)
		}
	})
	t.Run("other labels only", func(t *testing.T) {
		fx := newFixture(t, baseConfig)
		labelImage(t, fx, map[string]string{"org.opencontainers.image.title": "x", "devcontainer.metadata.v0": "not json"})
		v := fx.decide()
		wantVerdict(t, v, 0, "", "")
		if d := v.Checks[7].Detail; !strings.Contains(d, "no devcontainer.metadata label") {
			t.Errorf("image detail %q", d)
		}
	})
}

// rebase re-ingests fx.config into fx.ref's core and address (the
// declaration at suspension).
func rebase(fx *fixture) error {
	m, err := envmanifest.Ingest([]byte(fx.config), envmanifest.Options{Path: fx.configPath()})
	if err != nil {
		return err
	}
	fx.ref.Core, fx.ref.Manifest, fx.ref.Pinned = m.Core, m.Address, m.Core.IsPinned()
	return nil
}

// labelFacts is a fake whose ImageLabels fails with err.
type labelFacts struct {
	resume.Facts
	err error
}

func (f labelFacts) ImageLabels(context.Context, digest.Digest) (map[string]string, error) {
	return nil, f.err
}

// TestImageMetadataUnreadable: a config the content store does not have
// is image-unresolved (5); any other failure to read it is internal (1),
// never a pass.
func TestImageMetadataUnreadable(t *testing.T) {
	for _, tc := range []struct {
		err   error
		code  int
		class resume.Class
	}{
		{fmt.Errorf("blob: %w", errdefs.ErrNotFound), 5, resume.ClassImageUnresolved},
		{fmt.Errorf("daemon: %w", errdefs.ErrUnavailable), 1, resume.ClassInternal},
	} {
		fx := newFixture(t, baseConfig)
		labelImage(t, fx, testimage.MetadataCases[4].Labels())
		v := resume.Decide(context.Background(), labelFacts{fx.facts, tc.err}, fx.ledger, fx.request(fx.signed()))
		wantVerdict(t, v, tc.code, tc.class, resume.CheckImage)
	}
}

var _ host.Images = labelFacts{}
