package etcdledger

import (
	"context"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	etcdledger "github.com/sandbox-resume/sandbox-resume/ledger/etcd"
	"github.com/sandbox-resume/sandbox-resume/test/integration/etcdharness"
)

// TestHolderGone: ledger/etcd judges a resuming holder by its claim key
// alone (ledger.HolderJudge): not gone while the claim's lease lives,
// wherever the holder runs; gone once the lease is revoked (as its expiry
// would), and for a record read before another claim took the run (its
// fence has no claim key any more).
func TestHolderGone(t *testing.T) {
	c := etcdharness.Start(t)
	l := open(t, c, etcdledger.Config{ClaimTTL: shortTTL})
	ctx := context.Background()
	const run = "judge-1"
	suspend(t, l, run)
	cl, err := l.Claim(ctx, claimReq(run, resumerOn("host-a", 1)))
	if err != nil {
		t.Fatal(err)
	}
	rec := cl.Record()
	var j ledger.HolderJudge = l
	if gone, err := j.HolderGone(ctx, rec); err != nil || gone {
		t.Fatalf("HolderGone of a held claim: %t, %v", gone, err)
	}
	expireClaim(t, c, l, run)
	if gone, err := j.HolderGone(ctx, rec); err != nil || !gone {
		t.Fatalf("HolderGone after the claim's lease is revoked: %t, %v", gone, err)
	}
	next, err := l.Claim(ctx, claimReq(run, resumerOn("host-b", 2)))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if gone, err := j.HolderGone(ctx, rec); err != nil || !gone {
		t.Fatalf("HolderGone of the first claim's record after another claim: %t, %v", gone, err)
	}
	if gone, err := j.HolderGone(ctx, next.Record()); err != nil || gone {
		t.Fatalf("HolderGone of the new claim: %t, %v", gone, err)
	}
}
