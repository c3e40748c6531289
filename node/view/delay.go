package view

import (
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/node/wire"
)

// GossipDelays keeps the most recent gossip delays a node observed: how
// long after its signing time each message from another peer arrived. The
// window is bounded so that the figure follows the network as it is now,
// not as it was an hour ago.
type GossipDelays struct {
	mu      sync.Mutex // guards samples and next; a state lock, held only over memory
	samples []time.Duration
	next    int // where the next sample goes once the window is full
	size    int // immutable
}

// DefaultDelayWindow is how many samples a node keeps by default: with one
// sample each, the p99 of 256 is the third-largest, so one slow message in
// a hundred already shows.
const DefaultDelayWindow = 256

// NewGossipDelays returns an empty window of size samples (at least one).
func NewGossipDelays(size int) *GossipDelays {
	size = max(size, 1)
	return &GossipDelays{samples: make([]time.Duration, 0, size), size: size}
}

// Observe records one message: signed by its author at signedAt, arrived at
// arrived by this node's clock. A message that seems to arrive before it was
// signed (the author's clock runs ahead) counts as zero: the cut compares
// signing times with this node's clock, so the skew is part of what the
// delay must cover only when it makes messages look late.
func (w *GossipDelays) Observe(signedAt, arrived time.Time) {
	d := max(arrived.Sub(signedAt), 0)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.samples) < w.size {
		w.samples = append(w.samples, d)
		return
	}
	w.samples[w.next] = d
	w.next = (w.next + 1) % w.size
}

// Quantile returns the q-quantile (0 < q ≤ 1) of the window by nearest rank:
// the smallest sample that at least a fraction q of the samples do not
// exceed. ok is false while the window is empty.
func (w *GossipDelays) Quantile(q float64) (d time.Duration, ok bool) {
	w.mu.Lock()
	s := slices.Clone(w.samples)
	w.mu.Unlock()
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	return s[rank(q, len(s))], true
}

// rank is the index of the q-quantile among n sorted samples, nearest rank.
func rank(q float64, n int) int {
	r := int(q*float64(n)+0.999999999) - 1 // ⌈q·n⌉ − 1, without float noise at exact products
	return min(max(r, 0), n-1)
}

// Announced is the figure a provider puts in its offer (wire.OfferBody
// GossipP99Ms): the p99 of its window in whole milliseconds, at least 1 so
// that 0 can mean "no figure yet", and at most wire.MaxGossipP99Ms. A node
// that stalled for a minute (a machine starved of CPU) measures the
// messages that queued meanwhile as that late; announced as measured, its
// offers would be refused, itself included, until the window forgot them,
// and it would drop out of every view just as it recovered.
func (w *GossipDelays) Announced() int64 {
	d, ok := w.Quantile(0.99)
	if !ok {
		return 0
	}
	return min(max(d.Milliseconds(), 1), wire.MaxGossipP99Ms)
}

// DelayRule derives an epoch's delay from the providers' announced gossip
// delays. Every peer must cut an epoch's view at the same instant, so the
// delay cannot come from a node's own window: it comes from the offers as
// they stood at the announcement cut (Epoch/2 before the epoch's start, a
// fixed distance every peer agrees on), which peers whose gossip is faster
// than half an epoch hold alike. See market/doc.go,
// "The epoch's view".
type DelayRule struct {
	// Epoch is the length of an epoch; the delay is at most half of it.
	Epoch time.Duration
	// Floor is the shortest delay, whatever the announcements say.
	Floor time.Duration
	// Fallback is the delay while no offer announces a figure.
	Fallback time.Duration
}

// DefaultDelayFloor is the shortest adaptive delay: below it, the jitter of
// a node's timer is a large part of the delay.
const DefaultDelayFloor = 20 * time.Millisecond

// delayMargin is added to the largest announced p99: a quarter of it, and
// at least minDelayMargin, since a p99 over a few hundred samples is itself
// a noisy figure and the announcements lag the network by a heartbeat.
func delayMargin(p99 time.Duration) time.Duration {
	return max(p99/4, minDelayMargin)
}

const minDelayMargin = 10 * time.Millisecond

// Ceiling is the longest delay: half an epoch, so that a claim made at an
// epoch's start has the other half to become a lease before the next
// epoch's cutoff (market/doc.go, "The epoch's view").
func (r DelayRule) Ceiling() time.Duration { return r.Epoch / 2 }

// AnnouncementCut is the instant whose offers decide the delay of the epoch
// starting at start.
func (r DelayRule) AnnouncementCut(start time.Time) time.Time {
	return start.Add(-r.Epoch / 2)
}

// Delay returns the delay of an epoch from the offers at its announcement
// cut: the largest announced p99 plus a margin, kept within [Floor,
// Epoch/2]. It depends on the set of offers alone, not their order, so peers
// holding the same offers get the same delay.
func (r DelayRule) Delay(offers []SignedOffer) time.Duration {
	var p99 int64
	for _, o := range offers {
		p99 = max(p99, o.GossipP99Ms)
	}
	ceiling := r.Ceiling()
	if p99 == 0 {
		return min(max(r.Fallback, r.Floor), ceiling)
	}
	// An announcement beyond the ceiling is clamped anyway; bounding it
	// first keeps the arithmetic from overflowing on a hostile figure.
	d := time.Duration(min(p99, ceiling.Milliseconds()+1)) * time.Millisecond
	return min(max(d+delayMargin(d), r.Floor), ceiling)
}

// DefaultDelayRule is the rule a node uses with epochs of the given length.
func DefaultDelayRule(epoch time.Duration) DelayRule {
	return DelayRule{Epoch: epoch, Floor: DefaultDelayFloor, Fallback: DefaultFallbackDelay}
}

// DefaultFallbackDelay is the adaptive delay while no provider has
// announced a gossip delay yet: the fixed delay nodes used before it
// adapted.
const DefaultFallbackDelay = 150 * time.Millisecond
