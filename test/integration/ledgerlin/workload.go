package ledgerlin

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// Workload is one client's share of a linearizability run.
type Workload struct {
	// Client is the client's number (≥ 0), distinct across clients: it
	// names the client's host, containers and resumer processes.
	Client int
	// Runs are the run ids the client works on (all clients share them,
	// so that they race).
	Runs []string
	// Transitions is how many transitions the client makes before it
	// stops (Gets are not counted).
	Transitions int
	// Seed seeds the client's choices (with Client).
	Seed uint64
}

var created = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// held is what a client believes it holds: a live run's fence, container
// and generation. It may be stale (taken over, discarded): its next
// Suspended is then refused, which the history checks too.
type held struct {
	fence uint64
	ctr   ledger.Container
	gen   uint64
	uid   string // the run UID its refs carry
}

type client struct {
	w    Workload
	l    ledger.Ledger
	h    *History
	rng  *rand.Rand
	n    int // transitions made
	k    int // containers and resumers named
	seq  int // calls made
	held map[string]held
}

// Run makes w.Transitions transitions on l, each chosen from a Get of a
// random run, and records every call (Gets included) in h. It stops early
// when ctx is done.
func (w Workload) Run(ctx context.Context, l ledger.Ledger, h *History) {
	c := &client{w: w, l: l, h: h, rng: rand.New(rand.NewPCG(w.Seed, uint64(w.Client)+1)), held: map[string]held{}}
	for c.n < w.Transitions && ctx.Err() == nil {
		c.round(ctx)
	}
}

func (c *client) host() string { return fmt.Sprintf("host-%d", c.w.Client) }

func (c *client) container() ledger.Container {
	c.k++
	return ledger.Container{Host: c.host(), Namespace: "ns", ID: fmt.Sprintf("c%d-%d", c.w.Client, c.k)}
}

func (c *client) mine(ctr ledger.Container) bool { return ctr.Host == c.host() }

func (c *client) resumer() ledger.Holder {
	ctr := c.container()
	return ledger.Holder{Container: ctr, PID: 100000*(c.w.Client+1) + c.k, Start: fmt.Sprintf("s%d", c.k), Boot: "boot-" + c.host()}
}

func (c *client) ref(run string, gen uint64) digest.Digest {
	return digest.FromString(fmt.Sprintf("%s generation %d by client %d #%d", run, gen, c.w.Client, c.k))
}

func (c *client) pct(p int) bool { return c.rng.IntN(100) < p }

// uid mints a run UID (a suspend of generation 1).
func (c *client) uid() string { return fmt.Sprintf("ruid:%016x%016x", c.rng.Uint64(), c.rng.Uint64()) }

// record runs one call and records it.
func (c *client) record(in Input, call func() (Output, error)) (Output, error) {
	c.seq++
	start := Now()
	c.h.Invoke(Op{Client: c.w.Client, Seq: c.seq, Input: in, Call: start})
	out, err := call()
	ret := Now()
	switch {
	case err == nil:
	case errors.Is(err, ledger.ErrNotFound) && in.Kind == KindGet:
		out = Output{}
	case errdef.Class(err) != nil:
		out = Output{Class: errdef.Class(err).Error()}
		var le *ledger.Error
		if errors.As(err, &le) && le.Record != nil {
			r := le.Record.Clone()
			out.Record = &r
		}
	default:
		out = Output{Unknown: true}
	}
	c.h.Record(Op{Client: c.w.Client, Seq: c.seq, Input: in, Output: out, Call: start, Return: ret})
	if in.Kind != KindGet {
		c.n++
	}
	return out, err
}

func recordOut(r ledger.Record) Output { r = r.Clone(); return Output{Record: &r} }

func (c *client) get(ctx context.Context, run string) (Output, error) {
	return c.record(Input{Kind: KindGet, Run: run}, func() (Output, error) {
		r, err := c.l.Get(ctx, run)
		if err != nil {
			return Output{}, err
		}
		o := recordOut(r)
		o.Found = true
		return o, nil
	})
}

func (c *client) suspended(ctx context.Context, req ledger.SuspendRequest) (Output, error) {
	return c.record(Input{Kind: KindSuspended, Run: req.Run, Suspend: &req}, func() (Output, error) {
		r, err := c.l.Suspended(ctx, req)
		return recordOut(r), err
	})
}

func (c *client) discard(ctx context.Context, run string, force bool) {
	_, _ = c.record(Input{Kind: KindDiscard, Run: run, Force: force}, func() (Output, error) {
		r, err := c.l.Discard(ctx, run, force)
		return recordOut(r), err
	})
}

func (c *client) purge(ctx context.Context, run string) {
	_, _ = c.record(Input{Kind: KindPurge, Run: run}, func() (Output, error) {
		r, err := c.l.Purge(ctx, run)
		return recordOut(r), err
	})
}

func (c *client) handOff(ctx context.Context, req ledger.HandOffRequest) {
	_, _ = c.record(Input{Kind: KindHandedOff, Run: req.Run, HandOff: &req}, func() (Output, error) {
		r, err := c.l.HandedOff(ctx, req)
		return recordOut(r), err
	})
}

func (c *client) recall(ctx context.Context, req ledger.RecallRequest) {
	_, _ = c.record(Input{Kind: KindRecalled, Run: req.Run, Recall: &req}, func() (Output, error) {
		r, err := c.l.Recalled(ctx, req)
		return recordOut(r), err
	})
}

// unwind gives back what the client holds live (a restore that failed
// after Live); it no longer holds it, whatever the answer.
func (c *client) unwind(ctx context.Context, run string, h held) {
	_, _ = c.record(Input{Kind: KindUnwound, Run: run, Fence: h.fence, Container: h.ctr}, func() (Output, error) {
		r, err := c.l.Unwound(ctx, ledger.UnwindRequest{Run: run, Fence: h.fence, Container: h.ctr})
		return recordOut(r), err
	})
	delete(c.held, run)
}

func (c *client) release(ctx context.Context, run string, fence uint64) {
	_, _ = c.record(Input{Kind: KindRelease, Run: run, Fence: fence}, func() (Output, error) {
		r, err := c.l.Release(ctx, run, fence)
		return recordOut(r), err
	})
}

// claim claims run at gen and then, most of the time, takes it live
// through the handle; otherwise releases it. A claim without an answer is
// cleaned up: when a Get shows the client's resumer holding the run, it is
// released with the record's fence.
func (c *client) claim(ctx context.Context, run string, gen uint64, ref digest.Digest, uid string, takeOver bool, resuming bool) {
	req := ledger.ClaimRequest{Run: run, Generation: gen, Ref: ref, Holder: c.resumer(), TakeOver: takeOver, RunUID: uid}
	in := Input{Kind: KindClaim, Run: run, Claim: &req}
	if _, ok := c.l.(ledger.HolderJudge); ok && resuming {
		in.Judged = JudgedByBackend // the claim's lease decides, inside the transition
	}
	var cl ledger.Claim
	out, err := c.record(in, func() (Output, error) {
		var err error
		cl, err = c.l.Claim(ctx, req)
		if err != nil {
			return Output{}, err
		}
		return recordOut(cl.Record()), nil
	})
	switch {
	case out.Unknown:
		got, _ := c.get(ctx, run)
		if r := got.Record; got.Found && r.State == ledger.StateResuming && r.Holder != nil && *r.Holder == req.Holder {
			c.release(ctx, run, r.Fence)
		}
		return
	case err != nil:
		return
	}
	if c.pct(25) {
		_, _ = c.record(Input{Kind: KindRelease, Run: run, Fence: cl.Fence()}, func() (Output, error) {
			return Output{}, cl.Release(ctx)
		})
		return
	}
	ctr := req.Holder.Container
	out, err = c.record(Input{Kind: KindLive, Run: run, Fence: cl.Fence(), Container: ctr}, func() (Output, error) {
		r, err := cl.Live(ctx, ctr)
		return recordOut(r), err
	})
	if err == nil {
		c.held[run] = held{fence: cl.Fence(), ctr: ctr, gen: gen, uid: uid}
	} else if !out.Unknown {
		_ = cl.Release(ctx) // a refused Live: end the handle (not a transition of the run)
	}
}

// round reads a random run and makes the transition its state suggests,
// sometimes one that must be refused.
func (c *client) round(ctx context.Context) {
	run := c.w.Runs[c.rng.IntN(len(c.w.Runs))]
	got, _ := c.get(ctx, run)
	if got.Unknown {
		time.Sleep(50 * time.Millisecond)
		return
	}
	r := got.Record
	if got.Found && r.State == ledger.StateLive && r.Holder != nil && c.mine(r.Holder.Container) {
		if _, ok := c.held[run]; !ok { // a Live whose answer was lost
			c.held[run] = held{fence: r.Fence, ctr: r.Holder.Container, gen: r.Generation, uid: r.RunUID}
		}
	}
	if h, ok := c.held[run]; ok && c.pct(4) {
		c.unwind(ctx, run, h)
		return
	}
	if h, ok := c.held[run]; ok && c.pct(80) {
		// Suspend the next generation of what this client believes it
		// holds (refused when it was fenced out).
		keep := c.pct(40)
		uid := h.uid
		if c.pct(3) {
			uid = c.uid() // another run's ref: refused (8)
		}
		out, err := c.suspended(ctx, ledger.SuspendRequest{Run: run, Generation: h.gen + 1, Ref: c.ref(run, h.gen+1), Container: h.ctr, Created: created, Fence: h.fence, Keep: keep, RunUID: uid})
		switch {
		case err == nil && keep:
			h.gen++
			c.held[run] = h
		case err == nil || !out.Unknown:
			delete(c.held, run)
		}
		return
	}
	switch {
	case !got.Found || r.State == ledger.StatePurged:
		keep := c.pct(50)
		ctr := c.container()
		uid := c.uid()
		if got.Found && c.pct(10) {
			uid = r.RunUID // the purged run's UID: refused (8)
		}
		out, err := c.suspended(ctx, ledger.SuspendRequest{Run: run, Generation: 1, Ref: c.ref(run, 1), Container: ctr, Created: created, Keep: keep, RunUID: uid})
		if err == nil && keep {
			c.held[run] = held{fence: out.Record.Fence, ctr: ctr, gen: 1, uid: uid}
		}
	case r.State == ledger.StateSuspended:
		switch {
		case c.pct(6):
			c.discard(ctx, run, false)
		case c.pct(5):
			to := fmt.Sprintf("host-%d", c.rng.IntN(3)+100)
			if c.pct(10) {
				to = c.host() // this host: bad input
			}
			c.handOff(ctx, ledger.HandOffRequest{Run: run, Generation: r.Generation, Ref: r.Ref, RunUID: r.RunUID, To: to, Host: c.host()})
		case c.pct(5) && r.Generation > 1:
			c.claim(ctx, run, r.Generation-1, r.Ref, r.RunUID, false, false) // an older generation: superseded
		case c.pct(5):
			c.claim(ctx, run, r.Generation, c.ref(run, r.Generation), r.RunUID, false, false) // another ref: forked
		case c.pct(3):
			c.claim(ctx, run, r.Generation, r.Ref, c.uid(), false, false) // another run's ref: superseded
		default:
			c.claim(ctx, run, r.Generation, r.Ref, r.RunUID, false, false)
		}
	case r.State == ledger.StateResuming:
		switch {
		case c.pct(8):
			c.discard(ctx, run, true)
		case c.pct(10):
			c.live(ctx, run, r.Fence) // another resumer's fence: Live names the claim by its fence alone
		default:
			c.claim(ctx, run, r.Generation, r.Ref, r.RunUID, false, true)
		}
	case r.State == ledger.StateLive:
		switch {
		case c.pct(15):
			c.claim(ctx, run, r.Generation, r.Ref, r.RunUID, true, false) // take-over
		case c.pct(8):
			c.discard(ctx, run, true)
		case c.pct(8):
			c.discard(ctx, run, false)
		default:
			c.claim(ctx, run, r.Generation, r.Ref, r.RunUID, false, false)
		}
	case r.State == ledger.StateHandedOff:
		to := ""
		if r.HandedOff != nil {
			to = r.HandedOff.To
		}
		switch {
		case c.pct(40):
			c.recall(ctx, ledger.RecallRequest{Run: run, Generation: r.Generation, Ref: r.Ref})
		case c.pct(20):
			c.handOff(ctx, ledger.HandOffRequest{Run: run, Generation: r.Generation, Ref: r.Ref, RunUID: r.RunUID, To: to, Host: c.host()}) // a retried export
		case c.pct(20):
			c.discard(ctx, run, c.pct(50)) // stays handed off
		default:
			c.claim(ctx, run, r.Generation, r.Ref, r.RunUID, true, false) // handed off: superseded
		}
	case r.State == ledger.StateDiscarded:
		if c.pct(60) {
			c.purge(ctx, run)
		} else {
			c.claim(ctx, run, max(r.Generation, 1), c.ref(run, max(r.Generation, 1)), r.RunUID, false, false)
		}
	}
	if got.Found && r.State == ledger.StatePurged && r.Generation > 0 && c.pct(20) {
		// The purged run's own last generation, with a take-over: never
		// claimed again (superseded).
		c.claim(ctx, run, r.Generation, r.Ref, r.RunUID, true, false)
	}
}

// live is a Live with a fence this client read but did not claim.
func (c *client) live(ctx context.Context, run string, fence uint64) {
	ctr := c.container()
	_, _ = c.record(Input{Kind: KindLive, Run: run, Fence: fence, Container: ctr}, func() (Output, error) {
		r, err := c.l.Live(ctx, run, fence, ctr)
		return recordOut(r), err
	})
}

// Summary renders stats for a test log.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d calls (%d overlapping another client's), %d transitions (%d succeeded, %d refused, %d unknown)", s.Calls, s.Overlapping, s.Transitions, s.Succeeded, s.Refused, s.Unknown)
	return b.String()
}
