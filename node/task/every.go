package task

import (
	"context"
	"time"
)

// Every calls f with the tick's time every d until ctx ends, the first
// time d after it is called; it returns once ctx has ended, never while f
// runs, and does not call f again once ctx has ended. A tick that comes while f is still running is dropped, as with a
// time.Ticker: a slow round delays the next, it does not queue more. d
// must be positive, as for time.NewTicker.
func Every(ctx context.Context, d time.Duration, f func(now time.Time)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			// A tick and the end may both be ready: the end wins.
			if ctx.Err() != nil {
				return
			}
			f(now)
		}
	}
}

// NowAndEvery is Every with a first call at once, with the time of the
// call: the loops that must look at once when they start (a disk watch,
// a sweep of what a previous run left) and then every d. The first call
// is made whatever ctx's state: f sees ctx, and a round that does I/O
// gives up there.
func NowAndEvery(ctx context.Context, d time.Duration, f func(now time.Time)) {
	f(time.Now())
	Every(ctx, d, f)
}
