package view

import "time"

// Stamp is what an epoch's cut needs to know of a message: when its author
// signed it and when it reached this node.
type Stamp struct {
	Signed  time.Time // by the author's clock; zero: not known, Arrived stands in
	Arrived time.Time // by this node's clock
}

// Local stamps what this node learnt at t on its own (a refusal it was
// sent), as if signed when it arrived.
func Local(t time.Time) Stamp { return Stamp{Signed: t, Arrived: t} }

// IsZero reports whether nothing is stamped.
func (s Stamp) IsZero() bool { return s.Arrived.IsZero() }

// In reports whether a message counts in the view of the epoch starting at
// start, cut at cutoff: signed by the cutoff (CutTime) and arrived by the
// epoch's start.
//
// Both bounds are needed for peers to agree. On arrival times alone, two
// peers disagree whenever the cutoff falls between a message's two
// arrivals, however long the delay. On signing times alone, a peer that
// takes its snapshot late (its timer fired late on a loaded machine)
// counts messages that reached it after the start, which a punctual peer
// did not: the view would depend on when each peer got round to cutting.
// With both, every peer to which gossip brought each message signed by the
// cutoff before the start holds the same view, however late it cuts, so
// the epoch delay must exceed gossip's delay as measured at the receiver's
// hand-off to the view (GossipDelays observes it there).
func (s Stamp) In(cutoff, start time.Time) bool {
	return !s.IsZero() && !s.Arrived.After(start) && !CutTime(s.Signed, s.Arrived).After(cutoff)
}

// CutTime is the instant a message counts from against an epoch's cutoff:
// when its author signed it, or when it arrived if that is earlier (the
// author's clock runs ahead), so that nothing counts before this node holds
// it. A zero signed time means arrived.
func CutTime(signed, arrived time.Time) time.Time {
	if !signed.IsZero() && signed.Before(arrived) {
		return signed
	}
	return arrived
}
