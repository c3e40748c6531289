package p2p

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// circuitQuota lets each peer open at most limit circuits through a relay
// in any window (RelayLimits.CircuitsPerDay): what bounds how often a peer
// makes the relay splice a circuit, whatever each then carries (relayGate
// counts a circuit here once its ends are known members).
type circuitQuota struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu sync.Mutex // guards opened; memory only
	// opened holds, by source peer, when each circuit of the window
	// opened, oldest first.
	opened map[peer.ID][]time.Time
}

// maxQuotaPeers bounds the peers a quota remembers: past it, those with
// nothing in the window are forgotten.
const maxQuotaPeers = 1 << 14

func newCircuitQuota(limit int, window time.Duration, now func() time.Time) *circuitQuota {
	return &circuitQuota{limit: limit, window: window, now: now, opened: make(map[peer.ID][]time.Time)}
}

// AllowConnect counts a circuit src opens, and refuses it past the quota.
func (q *circuitQuota) AllowConnect(src peer.ID, _ ma.Multiaddr, _ peer.ID) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	ts := q.live(q.opened[src], now)
	if len(ts) >= q.limit {
		q.opened[src] = ts
		return false
	}
	if len(q.opened) >= maxQuotaPeers {
		for p, old := range q.opened {
			if len(q.live(old, now)) == 0 {
				delete(q.opened, p)
			}
		}
		if _, ok := q.opened[src]; !ok && len(q.opened) >= maxQuotaPeers {
			return false // every one of them busy: the relay is full
		}
	}
	q.opened[src] = append(ts, now)
	return true
}

// live is ts without the times that left the window.
func (q *circuitQuota) live(ts []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(ts) && !ts[i].After(now.Add(-q.window)) {
		i++
	}
	return ts[i:]
}
