package epoch

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/market"
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

// FastPath is straight to rent (market/doc.go): Match, with the epoch's
// rules, on the view as it stands now, whenever work arrives; the provider
// proposes what the pass assigns it, and arbitrates as for any proposal.
// Only a provider runs it; what a pass assigns to other providers is theirs
// to propose from their own passes. Its exported fields are set before Run
// and never changed after; Signal may be called from any goroutine, before
// Run too, and a FastPath never run ignores it.
type FastPath struct {
	Clock  Clock
	Market *view.Market
	// Self is this node's peer ID: its own offer, and the provider Carry
	// proposes for.
	Self    string
	Actions Actions
	// Full reports whether the provider holds every GPU it has: a pass
	// then can take nothing, whatever its announced offer still shows.
	Full func() bool
	// Log receives recovered panics; required.
	Log *slog.Logger
	// Panicked, if set, is told of every panic recovered from a pass, with
	// PanicMatch.
	Panicked func(where string)

	once sync.Once
	work chan struct{} // a signal that a job or free GPUs arrived; see signals
}

func (f *FastPath) signals() chan struct{} {
	f.once.Do(func() { f.work = make(chan struct{}, 1) })
	return f.work
}

// Signal says that a job was declared or requeued, or that GPUs came free,
// or that a lease or an offer changed what a pass would assign: the
// provider tries to lease at once rather than at the next epoch.
func (f *FastPath) Signal() {
	select {
	case f.signals() <- struct{}{}:
	default:
	}
}

// Run makes a pass whenever work arrives, one at a time, until ctx ends:
// signals that come during a pass make one more pass after it.
func (f *FastPath) Run(ctx context.Context) {
	work := f.signals()
	for {
		select {
		case <-ctx.Done():
			return
		case <-work:
		}
		start := time.Now()
		open := f.Pass(start)
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

// Pass makes one pass at now and returns how many jobs were open. The
// provider's own offer is taken as announced, like everyone else's: every
// provider then passes on the same facts, so one job goes to one provider,
// and jobs that arrive together are packed as one epoch would pack them.
// Devices it holds under a lease not yet announced make it refuse
// (provider.Propose); the lease's announcement, arriving at every peer,
// makes them all pass again. A panic fails this pass only.
func (f *FastPath) Pass(now time.Time) (open int) {
	defer recoverPanic(f.Log, f.Panicked, "pass", "fast")
	open = f.Market.OpenCount()
	if open == 0 || open > fastMaxJobs {
		return open
	}
	offers := f.Clock.Offers.At(now, now)
	if !slices.ContainsFunc(offers, func(o view.SignedOffer) bool { return o.Provider == f.Self }) {
		return open // not yet in its own view: it has not announced itself
	}
	if f.Full() {
		// In a deep queue most passes end here, at no cost per queued job:
		// what Match would assign others is theirs to find.
		return open
	}
	v := f.Market.Current(now, offers, func(t time.Time) uint64 { e, _ := f.Clock.Of(t); return e }, f.Clock.First)
	if len(v.Jobs) == 0 {
		return open
	}
	began := time.Now()
	res := market.Match(v, market.Options{})
	Carry(f.Actions, f.Self, Pass{Epoch: v.Epoch, Jobs: len(v.Jobs), Fast: true, Took: time.Since(began)}, res)
	return open
}
