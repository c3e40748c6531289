package digest

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Entry is the latest digest of one shard, as the node holds it.
type Entry struct {
	Body      wire.DigestBody
	Publisher peer.ID
	SignedAt  time.Time
	Arrived   time.Time
}

// MaxEntries bounds a Book: every shard of the most a network is split
// into, of a few classes each.
const MaxEntries = 4 * p2p.MaxShards

// Book keeps the digest of each shard of the network that the best-ranked
// signer of the shard's current round published, and refuses what comes
// too often.
type Book struct {
	// Immutable after NewBook.
	timing Timing
	now    func() time.Time
	max    int

	mu      sync.Mutex // state lock: guards byShard
	byShard map[p2p.Shard]Entry
}

// NewBook is an empty book on timing; now nil: time.Now.
func NewBook(timing Timing, now func() time.Time) *Book {
	if now == nil {
		now = time.Now
	}
	return &Book{timing: timing, now: now, max: MaxEntries, byShard: make(map[p2p.Shard]Entry)}
}

// Validate is the digest topic's body validator: what wire.ValidateDigest
// accepts, if Admit lets it replace the shard's digest held. A digest it
// accepts is the shard's from then on. Every refusal is p2p.ErrUnwanted:
// a flood, two publishers at once or a digest overtaken on the way cost
// the forwarder nothing.
func (b *Book) Validate(s p2p.Signed) error {
	if err := wire.ValidateDigest(s); err != nil {
		return err
	}
	body, err := wire.DecodeDigest(s)
	if err != nil {
		return err
	}
	now := b.now()
	e := Entry{Body: body, Publisher: s.Signer, SignedAt: time.UnixMilli(s.Message.Time), Arrived: now}
	b.mu.Lock()
	defer b.mu.Unlock()
	if last, ok := b.byShard[body.Shard]; ok && now.Sub(last.Arrived) < b.timing.MaxAge() {
		if err := b.timing.Admit(last, e); err != nil {
			return fmt.Errorf("%w: digest of shard %s by %s: %w", p2p.ErrUnwanted, body.Shard, s.Signer, err)
		}
	}
	if _, ok := b.byShard[body.Shard]; !ok && len(b.byShard) >= b.max {
		b.dropLocked(now)
	}
	b.byShard[body.Shard] = e
	return nil
}

// dropLocked makes room for one more shard: the expired digests go, and
// if none had, the oldest.
func (b *Book) dropLocked(now time.Time) {
	var oldest p2p.Shard
	var at time.Time
	for s, e := range b.byShard {
		if now.Sub(e.Arrived) >= b.timing.MaxAge() {
			delete(b.byShard, s)
			continue
		}
		if at.IsZero() || e.Arrived.Before(at) {
			oldest, at = s, e.Arrived
		}
	}
	if len(b.byShard) >= b.max {
		delete(b.byShard, oldest)
	}
}

// Last is the latest digest of shard, unless older than MaxAge.
func (b *Book) Last(shard p2p.Shard) (Entry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.byShard[shard]
	if !ok || b.now().Sub(e.Arrived) >= b.timing.MaxAge() {
		return Entry{}, false
	}
	return e, true
}

// All is the latest digest of every shard, those older than MaxAge
// dropped, sorted by shard (class, count, index).
func (b *Book) All() []Entry {
	now := b.now()
	b.mu.Lock()
	out := make([]Entry, 0, len(b.byShard))
	for s, e := range b.byShard {
		if now.Sub(e.Arrived) >= b.timing.MaxAge() {
			delete(b.byShard, s)
			continue
		}
		out = append(out, e)
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y Entry) int { return compareShards(x.Body.Shard, y.Body.Shard) })
	return out
}

func compareShards(a, b p2p.Shard) int {
	switch {
	case a.Class != b.Class:
		if a.Class < b.Class {
			return -1
		}
		return 1
	case a.Count != b.Count:
		return a.Count - b.Count
	}
	return a.Index - b.Index
}
