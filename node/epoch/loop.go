package epoch

import (
	"context"
	"log/slog"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/view"
)

// Loop runs Match once an epoch, on the view frozen at the epoch's start
// minus the epoch delay, and carries out what it decided (Carry). Its
// fields are set before Run and never changed after; Run runs in one
// goroutine, so the Actions see one pass at a time.
type Loop struct {
	Clock Clock
	// Market is the jobs topic as this node has seen it; the epoch's view
	// is cut from it and from Clock.Offers.
	Market *view.Market
	// Self is this node's peer ID: the provider Carry proposes for.
	Self    string
	Actions Actions
	// Prune, if set, runs at the start of every pass, before the cut: the
	// node forgets there what no longer matters.
	Prune func()
	// Cut, if set, is told of every epoch's cut, before its Match, with
	// the delay it was cut with and the open jobs in it; a view without
	// jobs included, which the loop passes over without a Match. The epoch
	// benchmark counts every peer's pass with it.
	Cut func(epoch uint64, delay time.Duration, jobs int)
	// Log receives the loop's warnings and recovered panics; required.
	Log *slog.Logger
	// Panicked, if set, is told of every panic recovered from a pass, with
	// PanicMatch.
	Panicked func(where string)
}

// Run runs a pass at every epoch's start until ctx ends. An adaptive delay
// that reaches its ceiling, or leaves it, is logged once each time.
func (l *Loop) Run(ctx context.Context) {
	atCeiling := false // the last epoch's adaptive delay was at its ceiling
	for {
		_, start := l.Clock.Of(time.Now())
		next := start.Add(l.Clock.Length)
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		epoch, start := l.Clock.Of(next)
		delay := l.Clock.Delay(start)
		if l.Clock.Adaptive() && (delay >= l.Clock.Rule.Ceiling()) != atCeiling {
			atCeiling = !atCeiling
			if atCeiling {
				l.Log.Warn("epoch delay at its ceiling, half the epoch: the gossip delay some provider announces needs more, so views may differ and rounds be lost; a longer --epoch helps", "delay", delay)
			} else {
				l.Log.Info("epoch delay below its ceiling again", "delay", delay)
			}
		}
		l.Match(epoch, start, delay)
	}
}

// Match runs the pass of the epoch that starts at start: Match on the view
// cut delay before it, its result carried out (Carry). A view without jobs
// is passed over. A panic fails this pass only.
func (l *Loop) Match(epoch uint64, start time.Time, delay time.Duration) {
	defer recoverPanic(l.Log, l.Panicked, "epoch", epoch)
	cutoff := start.Add(-delay)
	if l.Prune != nil {
		l.Prune()
	}
	began := time.Now()
	v := l.Market.Snapshot(epoch, start, cutoff, l.Clock.Offers.At(cutoff, start))
	cut := time.Since(began)
	if l.Cut != nil {
		l.Cut(epoch, delay, len(v.Jobs))
	}
	if len(v.Jobs) == 0 {
		return
	}
	began = time.Now()
	res := market.Match(v, market.Options{})
	Carry(l.Actions, l.Self, Pass{Epoch: epoch, Jobs: len(v.Jobs), Delay: delay, Cut: cut, Took: time.Since(began)}, res)
}
