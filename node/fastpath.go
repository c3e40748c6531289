package node

import (
	"context"
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/view"
)

// fastMaxJobs bounds a pass between epochs: with more open jobs than this in
// the view, the epoch's pass, which every peer runs on the same frozen view,
// decides alone. It is one submitter's bound on open jobs
// (view.maxOpenJobsPerSubmitter): a pass over that many takes tens of
// milliseconds, and runs only when the provider has a GPU free, paced to
// fastCPUShare.
const fastMaxJobs = 10_000

// fastCPUShare bounds the CPU passes between epochs take over a deep
// queue (more than fastPacedJobs open): after a pass that took d, the next
// waits d×(1/share − 1), at most fastMaxGap. A pass over a short queue takes
// well under a millisecond and is never held back: on a loaded machine its
// wall time is mostly waiting for a core, which pacing would only add to.
const (
	fastCPUShare  = 0.2
	fastPacedJobs = 64
	fastMaxGap    = 50 * time.Millisecond
)

// signalWork says that a job was declared or requeued, or that GPUs came
// free: a provider tries to lease at once rather than at the next epoch.
func (n *Node) signalWork() {
	select {
	case n.work <- struct{}{}:
	default:
	}
}

// fastLoop runs a pass between epochs whenever work arrives, one at a time:
// signals that come during a pass make one more pass after it. Only a
// provider runs it; what a pass assigns to other providers is theirs to
// propose from their own passes.
func (n *Node) fastLoop(ctx context.Context) {
	if n.cfg.NoFastPath || len(n.gpus) == 0 || n.runner == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.work:
		}
		start := time.Now()
		open := n.fastPass(start)
		gap := min(time.Duration(float64(time.Since(start))*(1/fastCPUShare-1)), fastMaxGap)
		if open <= fastPacedJobs || gap < time.Millisecond {
			continue
		}
		t := time.NewTimer(gap)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// fastPass is straight to rent (market/doc.go): Match, with the epoch's
// rules, on the view as it stands now; the provider proposes what the pass
// assigns it, and arbitrates as for any proposal. Its own offer is taken as
// announced, like everyone else's: every provider then passes on the same
// facts, so one job goes to one provider, and jobs that arrive together are
// packed as one epoch would pack them. Devices it holds under a lease not yet
// announced make it refuse (Propose); the lease's announcement, arriving at
// every peer, makes them all pass again.
func (n *Node) fastPass(now time.Time) (open int) {
	defer n.recoverPanic(panicMatch, "pass", "fast")
	open = n.market.OpenCount()
	if open == 0 || open > fastMaxJobs {
		return open
	}
	offers := n.offers.At(now, now)
	self := n.self.String()
	i := slices.IndexFunc(offers, func(o view.SignedOffer) bool { return o.Provider == self })
	if i < 0 {
		return open // not yet in its own view: it has not announced itself
	}
	if c := n.provider.Counts(); c.Held >= c.GPUs {
		// It can take nothing while it holds every GPU, whatever its
		// offer still shows (publishOffers), and what Match would assign
		// others is theirs to find: in a deep queue most passes end here,
		// at no cost per queued job.
		return open
	}
	v := n.market.Current(now, offers, func(t time.Time) uint64 { e, _ := n.epochOf(t); return e }, n.firstEpoch)
	if len(v.Jobs) == 0 {
		return open
	}
	res := market.Match(v, market.Options{})
	n.recordMatch(api.Match{Epoch: v.Epoch, ViewHash: res.ViewHash, Jobs: len(v.Jobs), Assignments: res.Assignments, Fast: true})
	for _, a := range res.Assignments {
		if a.Provider == self {
			n.provider.Propose(a, v.Epoch, res.ViewHash)
		}
	}
	return open
}

// firstEpoch is the start of the first epoch whose view holds a job
// stamped at: the SubmittedAt that epoch's pass gives it. Each epoch's delay
// is the one it will cut with, as far as the offers held now tell; the
// loop ends within two epochs, since a delay is shorter than an epoch.
func (n *Node) firstEpoch(at view.Stamp) time.Time {
	_, start := n.epochOf(at.Arrived)
	if start.Before(at.Arrived) {
		start = start.Add(n.cfg.Epoch)
	}
	for !at.In(start.Add(-n.epochDelay(start)), start) {
		start = start.Add(n.cfg.Epoch)
	}
	return start
}
