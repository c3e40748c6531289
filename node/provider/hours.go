package provider

import (
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// A contributor may lend its GPUs only at set times (e31d --hours, a
// node/hours.Schedule). Outside its hours the offer says the node is
// closed; inside, it says when the window closes, and Match places there
// jobs whose declared limit ends before (market.Offer.OpenUntil), and jobs
// that checkpoint where the window leaves them a checkpoint interval and
// market.WindowMargin (market/window.go). The provider checks the same
// before it proposes, as the arbiter of its own GPUs, and at each window's
// end drains quickly whatever still runs: each run gets SIGTERM and its
// grace, and its lease ends preempted, owed up to its last checkpoint, to
// go on elsewhere from there. A job that checkpoints was placed to be cut
// so; any other came from a view that had not yet heard of the hours.

// openHours are the node's hours as the provider keeps to them. Immutable.
type openHours struct {
	*env // immutable, shared with the role
	// leases are the role's runners, drained quickly at a window's end.
	leases *registry
}

// Hours is a contributor's weekly hours (node/hours.Schedule).
type Hours interface {
	Open(t time.Time) bool
	// Closes is when the window open at t ends; zero when closed at t, or
	// open all week.
	Closes(t time.Time) time.Time
	// Opens is when the next window opens after t; zero if never.
	Opens(t time.Time) time.Time
}

// window is what the offer says of the hours at now: closed outside them,
// else when the open window ends (Unix ms; 0 when it never does, or the
// node has no hours).
func (o openHours) window(now time.Time) (closed bool, openUntil int64) {
	h := o.cfg.Hours
	if h == nil {
		return false, 0
	}
	if !h.Open(now) {
		return true, 0
	}
	if c := h.Closes(now); !c.IsZero() {
		return false, c.UnixMilli()
	}
	return false, 0
}

// inHours reports whether a job of this limit, leased now, ends inside
// the node's hours, or, for a job that checkpoints this often (0: never),
// whether the window leaves it enough to be cut at the close, as Match's
// rule has it (market/window.go).
func (o openHours) inHours(now time.Time, limit, checkpoint time.Duration) bool {
	closed, until := o.window(now)
	if closed {
		return false
	}
	if until == 0 || now.Add(limit).UnixMilli() <= until {
		return true
	}
	span := checkpoint + time.Duration(market.WindowMargin)*time.Millisecond
	return checkpoint > 0 && span < limit && now.Add(span).UnixMilli() <= until
}

// watch tells the offer of each window's opening and end, and drains
// quickly at each end what still runs, until the provider stops.
func (o openHours) watch() {
	h := o.cfg.Hours
	for {
		now := time.Now()
		open := h.Open(now)
		next := h.Opens(now)
		if open {
			next = h.Closes(now)
		}
		if next.IsZero() {
			return // open all week, or never: nothing changes
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-o.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		o.d.OfferChanged()
		if open {
			o.log.Info("contribution hours end: draining quickly what still runs", "reopens", h.Opens(time.Now()))
			o.leases.preempt(api.DrainQuick)
		} else {
			o.log.Info("contribution hours begin: taking work", "until", h.Closes(time.Now()))
		}
	}
}
