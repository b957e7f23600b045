package integration

import (
	"fmt"
	"testing"

	containerstore "github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/host/hosttest"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/runspec"
	ctrd "github.com/sandbox-resume/sandbox-resume/runtime/containerd"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	suspendpkg "github.com/sandbox-resume/sandbox-resume/suspend"
	"github.com/sandbox-resume/sandbox-resume/suspend/suspendtest"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// The adapter is the one host of every consumer.
var (
	_ host.Host           = (*ctrd.Runtime)(nil)
	_ suspendpkg.Host     = (*ctrd.Runtime)(nil)
	_ resume.Materializer = (*ctrd.Runtime)(nil)
	_ resume.RunHost      = (*ctrd.Runtime)(nil)
	_ migrate.Store       = (*ctrd.Runtime)(nil)
)

// CheckSpec is hosttest.FactsFixture's: resume's check 10 accepts a spec
// the daemon built, compared with itself.
func (f fixture) CheckSpec(t testing.TB, spec []byte, env map[string]string) {
	t.Helper()
	if drift, err := runspec.Compare(spec, spec, runspec.Options{ContainerEnv: env}); err != nil || len(drift) != 0 {
		t.Fatalf("runspec.Compare(built, built) = %v, %v:\n%s", drift, err, spec)
	}
}

// TestHostConformance runs the one host suite (host/hosttest) against
// runtime/containerd on one daemon: the facts and store parts in a fresh
// namespace per subtest, materialization over a busybox whose command
// keeps running, capture over a running container of busybox:1 per
// subtest.
func TestHostConformance(t *testing.T) {
	d := harness.Start(t, "hostconf")
	bb := harness.ImportBusybox(t, d, "busybox:1")
	meta := testimage.MetadataCases[0]
	lab := harness.ImportBusyboxLabelled(t, d, "labelled:1", meta)
	rt := d.Connect(t, "")
	n := 0
	hosttest.Run(t, hosttest.Fixtures{
		Facts: func(t *testing.T) (host.Host, hosttest.FactsFixture) {
			ns := d.NewNamespace()
			return d.Connect(t, ns), fixture{d, ns}
		},
		Materialize: materializeFixture(t, d),
		Capture: func(t *testing.T) hosttest.CaptureFixture {
			n++
			cid := runningContainer(t, d, bb.Name, fmt.Sprintf("conf%d", n))
			return hosttest.CaptureFixture{Host: rt, Probe: captureProbe{rt}, Container: cid, Image: bb.Name,
				LeaseID:       snapshot.RunLease(fmt.Sprintf("conf-%d", n)),
				LabelledImage: lab.Name, Labels: meta.Labels(),
				File: "/var/sr/n.txt", FileData: []byte("nested\n")}
		},
	})
}

// TestSuspendSuite runs the end-to-end suspend suite (suspend/suspendtest)
// against runtime/containerd: a running container of busybox:1 per
// subtest.
func TestSuspendSuite(t *testing.T) {
	d := harness.Start(t, "suspsuite")
	bb := harness.ImportBusybox(t, d, "busybox:1")
	rt := d.Connect(t, "")
	n := 0
	suspendtest.Run(t, func(t *testing.T) suspendtest.Fixture {
		n++
		cid := runningContainer(t, d, bb.Name, fmt.Sprintf("susp%d", n))
		return suspendtest.Fixture{Host: rt, Probe: captureProbe{rt}, Container: cid, Image: bb.Name,
			LeaseID: snapshot.RunLease(fmt.Sprintf("susp-%d", n))}
	})
}

// materializeFixture returns the hosttest.MaterializeFixture maker of
// daemon d: a fresh namespace per subtest holding a busybox whose command
// keeps running (busybox's default /bin/sh exits at once on the task's
// null stdin, so the suite's "a started task is running" check raced the
// workload's exit), tagged busybox:1.
func materializeFixture(t *testing.T, d *harness.Daemon) hosttest.NewMaterialize {
	im, err := testimage.Busybox("busybox", testimage.WithCmd("/bin/sleep", "3600"))
	if err != nil {
		testenv.Missing(t, "harness: %v", err)
	}
	return func(t *testing.T) hosttest.MaterializeFixture {
		ns := d.NewNamespace()
		d.Put(t, ns, im)
		d.Tag(t, ns, "docker.io/library/busybox:1", im.Index)
		rt := d.Connect(t, ns)
		cctx := namespaces.WithNamespace(d.Context(t), ns)
		// Resolved in ns (d.Context carries the daemon's namespace, whose
		// busybox:1 is the sh image).
		base, err := rt.ResolveImage(cctx, "busybox:1")
		if err != nil {
			t.Fatal(err)
		}
		spec := func(t testing.TB, id string) *containerstore.Container {
			c, err := d.Client.ContainerService().Get(cctx, id)
			if err != nil {
				t.Fatalf("container %s: %v", id, err)
			}
			return &c
		}
		return hosttest.MaterializeFixture{
			Host: rt, Base: base,
			PutBlob: func(t testing.TB, run string, data []byte) { writeDiff(t, d, ns, run, data) },
			Env: func(t testing.TB, id string) []string {
				c, err := d.Client.LoadContainer(cctx, id)
				if err != nil {
					t.Fatal(err)
				}
				s, err := c.Spec(cctx)
				if err != nil {
					t.Fatal(err)
				}
				return s.Process.Env
			},
			Labels: func(t testing.TB, id string) map[string]string { return spec(t, id).Labels },
			Spec:   func(t testing.TB, id string) []byte { return spec(t, id).Spec.GetValue() },
			Runtime: func(t testing.TB, id string) snapshot.Runtime {
				r := spec(t, id).Runtime
				out := snapshot.Runtime{Name: r.Name}
				if o := r.Options; o != nil {
					out.Options = &snapshot.RuntimeOptions{TypeURL: o.GetTypeUrl(), Value: o.GetValue()}
				}
				return out
			},
			ID: func(name string) string { return ns + "-" + name },
		}
	}
}
