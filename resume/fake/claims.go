package fake

import (
	"context"
	"sync"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Claims is an in-memory resume.Claims: claim leases by run id, each with
// its holder as stored (including the ContainerExists and ProcessAlive
// facts the test wants the decision to see). The zero value is an empty,
// usable store; it is safe for concurrent use.
type Claims struct {
	mu     sync.Mutex
	claims map[string]resume.Claim
}

// NewClaims returns an empty claim store.
func NewClaims() *Claims { return &Claims{} }

// SetClaim records a claim lease for run with holder c; c.Lease is set to
// snapshot.ClaimLeasePrefix + run.
func (s *Claims) SetClaim(run string, c resume.Claim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims == nil {
		s.claims = map[string]resume.Claim{}
	}
	c.Lease = snapshot.ClaimLeasePrefix + run
	s.claims[run] = c
}

// DeleteClaim removes run's claim lease; an absent one is ignored.
func (s *Claims) DeleteClaim(run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.claims, run)
}

// ClaimHolder returns a copy of run's claim, or (nil, nil) when there is
// none; ctx's error when ctx is done.
func (s *Claims) ClaimHolder(ctx context.Context, run string) (*resume.Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.claims[run]
	if !ok {
		return nil, nil
	}
	return &c, nil
}

var _ resume.Claims = (*Claims)(nil)
