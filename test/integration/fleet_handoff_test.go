package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// TestFleetHandoff: --handoff on a shared (etcd) ledger (docs/design.md
// "Exactly once across hosts"): the origin's export --handoff B turns the
// record handed-off; A's import of the archive is 9 and stores nothing;
// B's import runs Received, which turns the shared record back into
// suspended, and B resumes without --copy.
func TestFleetHandoff(t *testing.T) {
	f := startFleet(t)
	tn := f.tenant(t, nil)
	const run = "fleet-handoff-1"
	dir := filepath.Join(f.dir, run)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cid := scriptContainerWith(t, f.origin, f.bb.Name, run, workload, oci.WithEnv([]string{"FLEET=1"}))
	ref := filepath.Join(dir, "ref.json")
	tn.must(t, f.origin, nil, "suspend", "--container", cid, "--config", f.cfg, "--key", f.key, "--run", run, "--out", ref)
	tarPath := filepath.Join(dir, "run.tar")
	tn.must(t, f.origin, nil, append([]string{"export", "--ref", ref, "--out", tarPath, "--handoff", f.hostB, "--key", f.key}, tn.flags...)...)
	if rec := tn.get(t, run); rec.State != ledger.StateHandedOff || rec.HandedOff == nil || rec.HandedOff.To != f.hostB {
		t.Fatalf("shared record after export --handoff: %s", rec)
	}

	refA := filepath.Join(dir, "a.ref.json")
	code, stdout, _ := tn.run(t, f.a, append([]string{"import", tarPath, "--trust", f.pub, "--out", refA}, tn.flags...)...)
	if class, reason, _ := cliJSONError(t, stdout); code != 9 || class != "superseded" || reason != ledger.ReasonHandedOff {
		t.Errorf("import on A of an archive handed to B: exit %d %s %s", code, class, reason)
	}
	if _, err := os.Stat(refA); err == nil {
		t.Error("the refused import wrote --out")
	}

	g := &gen{run: run, refB: filepath.Join(dir, "b.ref.json")}
	tn.must(t, f.b, nil, append([]string{"import", tarPath, "--trust", f.pub, "--out", g.refB}, tn.flags...)...)
	if rec := tn.get(t, run); rec.State != ledger.StateSuspended || rec.Received == nil || rec.Received.From != hostID(t, f.origin) {
		t.Fatalf("shared record after B's import: %s", rec)
	}
	code, v := f.resume(t, tn, f.b, g, "fh-"+run)
	if code != 0 || v.Copy {
		t.Fatalf("resume on B: exit %d copy %t %s", code, v.Copy, failDetail(v))
	}
}
