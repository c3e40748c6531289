package p2p

import (
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Checker judges freshness and replay of opened envelopes. A message is
// stale when its signing time is older than MaxAge or further than MaxSkew in
// the future; it is replayed when its signer's nonce was already accepted
// within the window. Nonces are forgotten once their message would be stale
// anyway, so memory stays bounded by the traffic of one window.
type Checker struct {
	maxAge, maxSkew time.Duration

	mu   sync.Mutex          // guards seen
	seen map[replayKey]int64 // -> expiry, Unix ms
	// sweepAt is when seen is next pruned.
	sweepAt int64
	// peak is the most nonces seen has held since it was last made anew:
	// a Go map keeps the room it grew to, so after a burst a sweep that
	// leaves a small fraction copies what is left into a new one.
	peak int
}

type replayKey struct {
	signer peer.ID
	nonce  uint64
}

// NewChecker returns a Checker with the given window.
func NewChecker(maxAge, maxSkew time.Duration) *Checker {
	return &Checker{maxAge: maxAge, maxSkew: maxSkew, seen: make(map[replayKey]int64)}
}

// Check returns ErrStale or ErrReplayed, or records the nonce and returns nil.
func (c *Checker) Check(s Signed, now time.Time) error {
	t := s.Message.Time
	nowMs := now.UnixMilli()
	if t < nowMs-c.maxAge.Milliseconds() {
		return fmt.Errorf("%w: signed %s ago, limit %s", ErrStale, now.Sub(time.UnixMilli(t)).Round(time.Millisecond), c.maxAge)
	}
	if t > nowMs+c.maxSkew.Milliseconds() {
		return fmt.Errorf("%w: signed %s in the future, limit %s", ErrStale, time.UnixMilli(t).Sub(now).Round(time.Millisecond), c.maxSkew)
	}
	k := replayKey{s.Signer, s.Message.Nonce}
	c.mu.Lock()
	defer c.mu.Unlock()
	if nowMs >= c.sweepAt {
		for k, exp := range c.seen {
			if exp < nowMs {
				delete(c.seen, k)
			}
		}
		c.sweepAt = nowMs + c.maxAge.Milliseconds()/4 + 1
		if n := len(c.seen); c.peak > shrinkAbove && n < c.peak/4 {
			c.seen, c.peak = maps.Clone(c.seen), n
		}
	}
	if _, ok := c.seen[k]; ok {
		return fmt.Errorf("%w: nonce %d of %s", ErrReplayed, s.Message.Nonce, s.Signer)
	}
	c.seen[k] = t + c.maxAge.Milliseconds() + c.maxSkew.Milliseconds()
	c.peak = max(c.peak, len(c.seen))
	return nil
}

// shrinkAbove is the size below which a map is never made anew: copying it
// would save too little to matter.
const shrinkAbove = 1024
