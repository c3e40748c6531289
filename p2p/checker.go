package p2p

import (
	"fmt"
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
	}
	if _, ok := c.seen[k]; ok {
		return fmt.Errorf("%w: nonce %d of %s", ErrReplayed, s.Message.Nonce, s.Signer)
	}
	c.seen[k] = t + c.maxAge.Milliseconds() + c.maxSkew.Milliseconds()
	return nil
}
