package digest

import "time"

// Timing is the digest topic's clock, every span derived from Every so
// that a test network runs it fast: at the default Every of a minute, a
// successor steps in after 90 s of silence, a shard's digests come at most
// once per 10 s (but for a better-ranked signer's of the round, Admit),
// and a digest older than 5 minutes is dropped.
type Timing struct {
	// Every is how often the shard's publisher publishes; also the length
	// of a round, in which the order of the members is fixed.
	Every time.Duration
}

// DefaultEvery is Timing.Every unless configured.
const DefaultEvery = time.Minute

// Successor is how long the shard must be silent before the second in
// the order publishes.
func (t Timing) Successor() time.Duration { return t.every() * 3 / 2 }

// MinGap is the least time between two digests of one shard: one that
// comes sooner is refused as unwanted, unless of the held one's round by
// a signer ranked before its (Admit), and a change is published at once
// only this long after the last digest.
func (t Timing) MinGap() time.Duration { return t.every() / 6 }

// MaxAge is how long a shard's digest is kept without a newer one.
func (t Timing) MaxAge() time.Duration { return 5 * t.every() }

func (t Timing) every() time.Duration {
	if t.Every <= 0 {
		return DefaultEvery
	}
	return t.Every
}
