package p2p

import (
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"pgregory.net/rapid"
)

// A budget is spent once what it carried in its window reaches its bound,
// whatever the charges and their times; a new window gives it all back;
// and each of a circuit's budgets counts alone.
func TestRelayBudgets(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Int64Range(1, 1<<20).Draw(t, "limit")
		window := time.Hour
		now := time.Unix(1_700_000_000, 0)
		b := newRelayBudgets(limit, 4*limit, window, func() time.Time { return now })
		pairs := [][]budgetKey{
			b.keys("a", "10.0.0.1/32", "b", "10.0.0.2/32"),
			b.keys("c", "10.0.0.1/32", "d", "10.0.0.3/32"),
		}
		type use struct {
			start time.Time
			bytes int64
		}
		model := map[budgetKey]*use{}
		spentIn := func(k budgetKey) bool {
			u := model[k]
			return u != nil && now.Before(u.start.Add(window)) && u.bytes >= b.limit(k.kind)
		}
		for i, n := 0, rapid.IntRange(1, 80).Draw(t, "n"); i < n; i++ {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(20*time.Minute)).Draw(t, "step")))
			keys := pairs[rapid.IntRange(0, 1).Draw(t, "pair")]
			wantSpent := false
			for _, k := range keys {
				wantSpent = wantSpent || spentIn(k)
			}
			if _, got := b.spent(keys); got != wantSpent {
				t.Fatalf("charge %d: spent %v, want %v", i, got, wantSpent)
			}
			n := rapid.Int64Range(1, limit).Draw(t, "bytes")
			wantNow := false
			for _, k := range keys {
				u := model[k]
				if u == nil || !now.Before(u.start.Add(window)) {
					u = &use{start: now}
					model[k] = u
				}
				u.bytes += n
				wantNow = wantNow || u.bytes >= b.limit(k.kind)
			}
			if _, got := b.charge(keys, n); got != wantNow {
				t.Fatalf("charge %d of %d bytes: spent after %v, want %v", i, n, got, wantNow)
			}
		}
	})
}

// A circuit's budgets are its two peers' and its two prefixes', each once,
// of the kinds that have a bound.
func TestRelayBudgetKeys(t *testing.T) {
	b := newRelayBudgets(1, 1, 0, time.Now)
	if got := b.keys("a", "10.0.0.0/24", "b", "10.0.0.0/24"); len(got) != 3 {
		t.Fatalf("two peers behind one prefix: %v, want 3 budgets", got)
	}
	if got := newRelayBudgets(0, 1, 0, time.Now).keys("a", "p", "b", "q"); len(got) != 2 || got[0].kind != BudgetPrefix {
		t.Fatalf("prefix budgets only: %v", got)
	}
	if newRelayBudgets(0, 0, 0, time.Now).bounded() {
		t.Fatal("no bound reported as bounded")
	}
}

func TestPrefixOf(t *testing.T) {
	for _, c := range []struct {
		addr   string
		v4, v6 int
		want   string
	}{
		{"/ip4/203.0.113.7/tcp/4001", 32, 64, "203.0.113.7/32"},
		{"/ip4/203.0.113.7/udp/4001/quic-v1", 24, 64, "203.0.113.0/24"},
		{"/ip4/127.0.0.2/tcp/1", 8, 64, "127.0.0.0/8"},
		{"/ip6/2001:db8:1:2:3:4:5:6/tcp/4001", 32, 64, "2001:db8:1:2::/64"},
		{"/ip6/2001:db8:1:2:3:4:5:6/tcp/4001", 32, 48, "2001:db8:1::/48"},
		{"/dns4/example.com/tcp/4001", 32, 64, ""},
	} {
		if got := prefixOf(ma.StringCast(c.addr), c.v4, c.v6); got != c.want {
			t.Errorf("prefixOf(%s, /%d, /%d) = %q, want %q", c.addr, c.v4, c.v6, got, c.want)
		}
	}
}
