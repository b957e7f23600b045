package etcdledger

import (
	"testing"

	etcdledger "github.com/sandbox-resume/sandbox-resume/ledger/etcd"
	"github.com/sandbox-resume/sandbox-resume/ledger/ledgertest"
	"github.com/sandbox-resume/sandbox-resume/test/integration/etcdharness"
)

// TestConformance runs the ledger conformance suite against ledger/etcd on
// one 3-member cluster, each subtest under its own prefix.
func TestConformance(t *testing.T) {
	c := etcdharness.Start(t)
	ledgertest.Run(t, func(t *testing.T) ledgertest.Backend {
		return backend{Ledger: open(t, c, etcdledger.Config{}), c: c}
	})
}
