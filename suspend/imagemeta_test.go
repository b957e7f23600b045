package suspend_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
	ledgerfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// labelledFake is newFake with the image docker.io/library/meta:1 (the
// busybox:1 layer, a config carrying labels) and a running container
// "meta-box" created from it.
func labelledFake(labels map[string]string) *memhost.Machine {
	f := newFake()
	f.AddImage(memhost.Image{
		Base: snapshot.Base{
			Name: "docker.io/library/meta:1", ManifestDigest: digest.FromString("meta manifest"),
			ConfigDigest: digest.FromString("meta config"), Platform: "linux/amd64",
			DiffIDs: []digest.Digest{digest.FromString("diffid0")},
		},
		Layers: []digest.Digest{digest.FromString("layer0")},
		Labels: labels,
	})
	f.AddContainer(memhost.Container{ID: "meta-box", Image: "docker.io/library/meta:1", Task: snapshot.TaskRunning,
		Files: map[string][]byte{"a.txt": []byte("A")}})
	return f
}

// TestSuspendImageMetadata is docs/design.md "Suspend" step 3's label
// check for each test label: a refused label is an
// *envmanifest.ImageMetadataError with exactly the refusals of "Image
// metadata", before anything is paused, leased, labelled or written; a
// label that passes (or none, or other labels only) suspends.
func TestSuspendImageMetadata(t *testing.T) {
	ctx := context.Background()
	cases := append([]testimage.MetadataCase(nil), testimage.MetadataCases...)
	cases = append(cases, testimage.MetadataCase{Name: "empty-label", Label: "",
		Refused: []testimage.MetadataRefusal{{Pointer: testimage.MetadataPointer, Class: "syntax"}}})
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			f := labelledFake(tc.Labels())
			e := newEnv(t, `{"image":"meta:1"}`)
			l := ledgerfake.New()
			res, err := suspend.Run(ctx, f, l, e.req("meta-box", "r"))
			if len(tc.Refused) == 0 {
				if err != nil {
					t.Fatalf("err = %v, want a suspend", err)
				}
				if res.Ref.Base.Name != "docker.io/library/meta:1" {
					t.Fatalf("base %+v", res.Ref.Base)
				}
				return
			}
			var me *envmanifest.ImageMetadataError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want an *envmanifest.ImageMetadataError", err)
			}
			var re *envmanifest.RefusedError
			if errors.As(err, &re) || errors.Is(err, suspend.ErrMismatch) || errors.Is(err, errdef.ErrImageUnresolved) {
				t.Fatalf("err = %v carries another class", err)
			}
			if me.Image != "docker.io/library/meta:1" || me.Config != digest.FromString("meta config") {
				t.Errorf("image %q config %s", me.Image, me.Config)
			}
			var got []testimage.MetadataRefusal
			for _, r := range me.Refusals {
				got = append(got, testimage.MetadataRefusal{Pointer: r.Pointer, Class: string(r.Class)})
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.Refused) {
				t.Errorf("refusals %v, want %v", got, tc.Refused)
			}
			for _, r := range tc.Refused {
				if !strings.Contains(err.Error(), r.Pointer) {
					t.Errorf("error %q does not name %s", err, r.Pointer)
				}
			}
			if _, serr := os.Stat(filepath.Join(e.dir, "ref.json")); serr == nil {
				t.Error("a ref file was written")
			}
			if recs, lerr := l.List(ctx); lerr != nil || len(recs) != 0 {
				t.Errorf("ledger records %v (err %v) after the refusal", recs, lerr)
			}
			want := []string{memhost.OpContainer, memhost.OpHost, memhost.OpResolveImage, memhost.OpImageLabels}
			if fmt.Sprint(f.Ops()) != fmt.Sprint(want) {
				t.Errorf("operations %v, want only %v", f.Ops(), want)
			}
			c, _ := f.Container(ctx, "meta-box")
			if c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelRun] != "" {
				t.Errorf("container after the refusal: task %q labels %v", c.Task, c.Labels)
			}
		})
	}
	t.Run("other labels only", func(t *testing.T) {
		f := labelledFake(map[string]string{"org.opencontainers.image.title": "x", "devcontainer.metadata.old": "not json"})
		e := newEnv(t, `{"image":"meta:1"}`)
		if _, err := suspend.Run(ctx, f, ledgerfake.New(), e.req("meta-box", "r")); err != nil {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("mismatch before the label", func(t *testing.T) {
		// The declaration names the labelled image, the container is from
		// alpine: the mismatch (3) is reported, not the label.
		f := labelledFake(testimage.MetadataCases[0].Labels())
		e := newEnv(t, `{"image":"meta:1"}`)
		if _, err := suspend.Run(ctx, f, ledgerfake.New(), e.req("alp", "r")); !errors.Is(err, suspend.ErrMismatch) {
			t.Fatalf("err = %v, want ErrMismatch", err)
		}
	})
	t.Run("config unreadable", func(t *testing.T) {
		f := labelledFake(testimage.MetadataCases[0].Labels())
		f.Hook = func(op string) error {
			if op == memhost.OpImageLabels {
				return fmt.Errorf("config blob: %w", errdefs.ErrNotFound)
			}
			return nil
		}
		e := newEnv(t, `{"image":"meta:1"}`)
		if _, err := suspend.Run(ctx, f, ledgerfake.New(), e.req("meta-box", "r")); !errors.Is(err, errdef.ErrImageUnresolved) {
			t.Fatalf("err = %v, want ErrImageUnresolved", err)
		}
		f.Hook = func(op string) error {
			if op == memhost.OpImageLabels {
				return fmt.Errorf("daemon: %w", errdefs.ErrUnavailable)
			}
			return nil
		}
		_, err := suspend.Run(ctx, f, ledgerfake.New(), e.req("meta-box", "r"))
		var me *envmanifest.ImageMetadataError
		if err == nil || errors.Is(err, errdef.ErrImageUnresolved) || errors.As(err, &me) || !errdefs.IsUnavailable(err) {
			t.Fatalf("err = %v, want the daemon's error", err)
		}
	})
}
