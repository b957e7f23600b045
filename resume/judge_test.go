package resume_test

import (
	"context"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
)

// judging is a ledger that judges resuming holders by itself
// (ledger.HolderJudge, as ledger/etcd does by its claim key): gone is its
// answer for every holder.
type judging struct {
	ledger.Ledger
	gone  bool
	asked int
}

func (j *judging) HolderGone(context.Context, ledger.Record) (bool, error) {
	j.asked++
	return j.gone, nil
}

// TestClaimCheckLedgerJudges: with a ledger that judges resuming holders
// itself, its judgement decides — also for a holder of another host, which
// the facts cannot see (docs/design.md "The run ledger": etcd judges by the
// claim key alone): gone, the run is claimed and the holder replaced (its
// container, on another host, is not deleted here); not gone, 8 naming the
// held claim.
func TestClaimCheckLedgerJudges(t *testing.T) {
	for _, gone := range []bool{true, false} {
		for _, mode := range []string{"decide", "resume"} {
			name := map[bool]string{true: "gone", false: "held"}[gone] + "/" + mode
			t.Run(name, func(t *testing.T) {
				fx, m := materializable(t, baseConfig)
				h := liveResumer(t, "elsewhere") // alive: only the ledger's judgement can make it gone
				h.Host = "other-host"
				fx.claimAs(h)
				l := &judging{Ledger: fx.ledger, gone: gone}
				req := fx.request(fx.signed())
				var v *resume.Verdict
				if mode == "decide" {
					v = resume.Decide(context.Background(), fx.facts, l, req)
				} else {
					v = resume.Resume(context.Background(), fx.facts, l, m, req, resume.ResumeOptions{})
				}
				if l.asked == 0 {
					t.Fatal("the ledger's judgement was not asked")
				}
				if !gone {
					wantVerdict(t, v, 8, resume.ClassClaimConflict, resume.CheckClaim)
					wantDetail(t, v, "still held in the ledger", "other-host")
					return
				}
				wantVerdict(t, v, 0, "", "")
				if mode == "decide" {
					wantDetail(t, v, "would be replaced", "elsewhere")
					return
				}
				wantDetail(t, v, "replaced the gone resuming holder", "elsewhere", "not on this host")
				rec := fx.record()
				if rec == nil || rec.State != ledger.StateLive || rec.Fence != 2 || v.Fence != 2 {
					t.Errorf("record %v, verdict fence %d; want live with fence 2", rec, v.Fence)
				}
			})
		}
	}
}
