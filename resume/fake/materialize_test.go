package fake_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/resume/fake"
	"github.com/sandbox-resume/sandbox-resume/resume/materializertest"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

var _ resume.Materializer = (*fake.Materializer)(nil)

func TestMaterializerConformance(t *testing.T) {
	materializertest.Run(t, func(t *testing.T) materializertest.Fixture {
		p := testimage.HostPlatform()
		f, err := fake.NewFacts(snapshot.Host{ID: "h", IDSource: snapshot.IDSourceIntrospection,
			ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: testimage.HostPlatform().OS + "/" + p.Architecture})
		if err != nil {
			t.Fatal(err)
		}
		im, err := testimage.Synthetic(p, "materialize")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range im.Blobs {
			f.PutBlob(b.Data)
		}
		if err := f.SetImage("example.test/base:1", im.Index); err != nil {
			t.Fatal(err)
		}
		base, err := f.ResolveImage(t.Context(), "example.test/base:1")
		if err != nil {
			t.Fatal(err)
		}
		m := fake.NewMaterializer(f)
		get := func(t testing.TB, id string) fake.Container {
			c, ok := m.Container(id)
			if !ok {
				t.Fatalf("no container %s", id)
			}
			return c
		}
		return materializertest.Fixture{
			M: m, Facts: f, Base: base,
			PutBlob: func(t testing.TB, run string, data []byte) { f.PutBlob(data) },
			Env:     func(t testing.TB, id string) []string { return get(t, id).Env },
			Labels:  func(t testing.TB, id string) map[string]string { return get(t, id).Labels },
			Spec:    func(t testing.TB, id string) []byte { return get(t, id).Spec.Spec },
			Runtime: func(t testing.TB, id string) snapshot.Runtime { return get(t, id).Spec.Runtime },
			ID:      func(name string) string { return name },
		}
	})
}

// TestCheckDiffIsVerifyDiff: the fake Materializer's CheckDiff is the full
// layer verifier import and pull run (snapshot.VerifyDiff), not a copy of it:
// for a good blob and for every kind of mismatch, both give the same
// result, message for message.
func TestCheckDiffIsVerifyDiff(t *testing.T) {
	f, err := fake.NewFacts(snapshot.Host{ID: "h", IDSource: snapshot.IDSourceIntrospection, Platform: "linux/amd64"})
	if err != nil {
		t.Fatal(err)
	}
	raw := bytes.Repeat([]byte("tar bytes "), 1000)
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(raw)
	zw.Close()
	blob := buf.Bytes()
	f.PutBlob(blob)
	good := snapshot.Layer{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: digest.FromBytes(blob), Size: int64(len(blob)),
		DiffID: digest.FromBytes(raw), UncompressedSize: int64(len(raw))}
	m := fake.NewMaterializer(f)
	for name, d := range map[string]snapshot.Layer{
		"good":              good,
		"size":              func(d snapshot.Layer) snapshot.Layer { d.Size--; return d }(good),
		"diffID":            func(d snapshot.Layer) snapshot.Layer { d.DiffID = digest.FromString("x"); return d }(good),
		"uncompressed size": func(d snapshot.Layer) snapshot.Layer { d.UncompressedSize -= 10; return d }(good),
	} {
		got := m.CheckDiff(t.Context(), d)
		want := snapshot.VerifyDiff(bytes.NewReader(blob), d)
		if fmt.Sprint(got) != fmt.Sprint(want) || errors.Is(got, snapshot.ErrDiffCorrupt) != (name != "good") {
			t.Errorf("%s: CheckDiff = %v, VerifyDiff = %v", name, got, want)
		}
	}
}
