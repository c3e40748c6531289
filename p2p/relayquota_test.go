package p2p

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"pgregory.net/rapid"
)

// A peer opens at most the quota's circuits in any window, whatever the
// times, and others are not held to its count.
func TestCircuitQuota(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 5).Draw(t, "limit")
		window := time.Hour
		now := time.Unix(1_700_000_000, 0)
		q := newCircuitQuota(limit, window, func() time.Time { return now })
		peers := []peer.ID{"a", "b"}
		allowed := map[peer.ID][]time.Time{}
		for i, n := 0, rapid.IntRange(1, 60).Draw(t, "n"); i < n; i++ {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(20*time.Minute)).Draw(t, "step")))
			p := peers[rapid.IntRange(0, 1).Draw(t, "peer")]
			inWindow := 0
			for _, at := range allowed[p] {
				if at.After(now.Add(-window)) {
					inWindow++
				}
			}
			got := q.AllowConnect(p, nil, "dest")
			if want := inWindow < limit; got != want {
				t.Fatalf("circuit %d of %s at %s: allowed %v, want %v (%d in the window, limit %d)", i, p, now, got, want, inWindow, limit)
			}
			if got {
				allowed[p] = append(allowed[p], now)
			}
		}
	})
}
