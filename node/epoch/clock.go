package epoch

import (
	"time"

	"github.com/e31network/e31/node/view"
)

// Clock numbers epochs and says how long before each one's start its view
// is cut. It is a value: set its fields and use it from any goroutine.
type Clock struct {
	// Length is an epoch's length (node.Config.Epoch): epoch e starts
	// e×Length after the Unix epoch, on every peer alike.
	Length time.Duration
	// Fixed is the delay every epoch is cut with (node.Config.EpochDelay);
	// zero adapts it, each epoch, to the gossip delays announced in the
	// offers at the epoch's announcement cut (Rule).
	Fixed time.Duration
	Rule  view.DelayRule
	// Offers are the offers an adaptive delay is read from.
	Offers *view.Offers
}

// Of returns the number of the epoch t falls in, and its start.
func (c Clock) Of(t time.Time) (uint64, time.Time) {
	e := c.Length.Milliseconds()
	num := t.UnixMilli() / e
	return uint64(num), time.UnixMilli(num * e)
}

// Delay is the delay of the epoch starting at start: the fixed one, or the
// one every peer derives from the offers at the epoch's announcement cut.
func (c Clock) Delay(start time.Time) time.Duration {
	if c.Fixed > 0 {
		return c.Fixed
	}
	return c.Rule.Delay(c.Offers.At(c.Rule.AnnouncementCut(start), start))
}

// Adaptive reports whether the delay adapts to the announced gossip delays.
func (c Clock) Adaptive() bool { return c.Fixed == 0 }

// First is the start of the first epoch whose view holds a job stamped at:
// the SubmittedAt that epoch's pass gives it. Each epoch's delay is the one
// it will cut with, as far as the offers held now tell; the loop ends
// within two epochs, since a delay is shorter than an epoch.
func (c Clock) First(at view.Stamp) time.Time {
	_, start := c.Of(at.Arrived)
	if start.Before(at.Arrived) {
		start = start.Add(c.Length)
	}
	for !at.In(start.Add(-c.Delay(start)), start) {
		start = start.Add(c.Length)
	}
	return start
}
