package ledger

import "context"

// NewClaim returns the Claim handle of a backend whose Live and Release are
// Ledger.Live and Ledger.Release with the claim's run and fence (ledger/bolt,
// ledger/fake). rec is the resuming record the claim wrote, replaced the
// holder it fenced out (nil: none), and lost a channel the backend closes
// when it observes that the claim is lost (nil: never).
func NewClaim(l Ledger, rec Record, replaced *Holder, lost <-chan struct{}) Claim {
	c := &claim{l: l, rec: rec.Clone(), lost: lost}
	if replaced != nil {
		h := *replaced
		c.replaced = &h
	}
	return c
}

type claim struct {
	l        Ledger
	rec      Record
	replaced *Holder
	lost     <-chan struct{}
}

func (c *claim) Record() Record        { return c.rec.Clone() }
func (c *claim) Fence() uint64         { return c.rec.Fence }
func (c *claim) Lost() <-chan struct{} { return c.lost }

func (c *claim) Replaced() *Holder {
	if c.replaced == nil {
		return nil
	}
	h := *c.replaced
	return &h
}

func (c *claim) Live(ctx context.Context, container Container) (Record, error) {
	return c.l.Live(ctx, c.rec.Run, c.rec.Fence, container)
}

func (c *claim) Release(ctx context.Context) error {
	_, err := c.l.Release(ctx, c.rec.Run, c.rec.Fence)
	return err
}
