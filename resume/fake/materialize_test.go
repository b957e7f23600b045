package fake_test

import (
	"testing"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/resume/fake"
	"github.com/sandbox-resume/sandbox-resume/resume/materializertest"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness/testimage"
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
		claims := fake.NewClaims()
		m := fake.NewMaterializer(f, claims)
		get := func(t testing.TB, id string) fake.Container {
			c, ok := m.Container(id)
			if !ok {
				t.Fatalf("no container %s", id)
			}
			return c
		}
		return materializertest.Fixture{
			M: m, Claims: claims, Base: base,
			PutBlob: func(t testing.TB, run string, data []byte) { f.PutBlob(data) },
			Env:     func(t testing.TB, id string) []string { return get(t, id).Env },
			Labels:  func(t testing.TB, id string) map[string]string { return get(t, id).Labels },
			ID:      func(name string) string { return name },
		}
	})
}
