package fake_test

import (
	"testing"

	"github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/ledger/ledgertest"
)

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Backend {
		l := fake.New()
		t.Cleanup(func() { _ = l.Close() })
		return ledgertest.CallerJudged(l)
	})
}
