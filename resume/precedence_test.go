package resume_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
)

// TestVerdictPrecedence (docs/design.md "Hardening", verdict precedence):
// a run whose content is gone reads as what the ledger says — discarded
// or purged is 9 with the reason, the snapshot check keeping its own
// failure and the record unchanged — and as missing content (7) when the
// ledger has no record (not-handed-off never takes precedence). Before the
// fix a discarded run resumed on its own host answered 7.
func TestVerdictPrecedence(t *testing.T) {
	for _, tt := range []struct {
		name   string
		setup  func(*testing.T, *fixture)
		code   int
		class  resume.Class
		reason string
	}{
		{"discarded", func(t *testing.T, fx *fixture) {
			fx.claimAs(liveResumer(t, "earlier")).Release(context.Background())
			fx.ledger.Discard(context.Background(), testRun, false)
		}, 9, resume.ClassSuperseded, ledger.ReasonDiscarded},
		{"purged", func(t *testing.T, fx *fixture) {
			fx.claimAs(liveResumer(t, "earlier")).Release(context.Background())
			fx.ledger.Discard(context.Background(), testRun, false)
			fx.ledger.Purge(context.Background(), testRun)
		}, 9, resume.ClassSuperseded, ledger.ReasonPurged},
		{"no record", func(*testing.T, *fixture) {}, 7, resume.ClassSnapshotMissing, ""},
		{"suspended here", func(t *testing.T, fx *fixture) {
			fx.claimAs(liveResumer(t, "earlier")).Release(context.Background())
		}, 7, resume.ClassSnapshotMissing, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx, _ := materializable(t, baseConfig)
			tt.setup(t, fx)
			fx.facts.DeleteBlob(fx.ref.Layers[0].Digest)
			before := fx.record()
			v := resume.Decide(context.Background(), fx.facts, fx.ledger, fx.request(fx.signed()))
			if v.ExitCode != tt.code || v.Class != tt.class || v.Reason != tt.reason {
				t.Fatalf("verdict exit %d class %s reason %q, want %d %s %q\n%s", v.ExitCode, v.Class, v.Reason, tt.code, tt.class, tt.reason, dump(v))
			}
			if c := v.Check(resume.CheckSnapshot); c.Result != resume.ResultFail {
				t.Errorf("snapshot check %s: it keeps its own failure", c.Result)
			}
			claim := v.Check(resume.CheckClaim)
			if tt.code == 9 && (claim.Result != resume.ResultFail || !strings.Contains(claim.Detail, tt.reason) && !strings.Contains(claim.Detail, "purged")) {
				t.Errorf("claim check %s: %s", claim.Result, claim.Detail)
			}
			if tt.code == 7 && claim.Result != resume.ResultSkipped {
				t.Errorf("claim check %s without a superseding record", claim.Result)
			}
			if !equalRecords(before, fx.record()) {
				t.Errorf("the record changed: %v → %v", before, fx.record())
			}
		})
	}
}
