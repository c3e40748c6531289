package node

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/e31network/e31/node/submitter"
	"github.com/e31network/e31/p2p"
)

// opened is the markets of open jobs, none being placed.
func opened(ss ...p2p.Shard) []submitter.OpenMarket {
	out := make([]submitter.OpenMarket, 0, len(ss))
	for _, s := range ss {
		out = append(out, submitter.OpenMarket{Shard: s})
	}
	return out
}

// A followed market is kept while a job of this node is open there, and
// left once none has been for followLinger; a job opened again in time
// keeps it.
func TestFollowsLeaveIdleMarkets(t *testing.T) {
	h100 := p2p.Shard{Class: "H100x8", Count: 1}
	a100 := p2p.Shard{Class: "A100x8", Index: 1, Count: 2}
	f := &follows{units: units{log: slog.New(slog.DiscardHandler)}, markets: map[p2p.Shard]*followedMarket{
		h100: {shard: h100}, a100: {shard: a100},
	}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if gone := f.idleMarkets(opened(p2p.Shard{Class: "H100x8"}), t0); len(gone) != 0 {
		t.Fatalf("left %d markets at once; want none", len(gone))
	}
	if gone := f.idleMarkets(opened(h100), t0.Add(followLinger-time.Second)); len(gone) != 0 {
		t.Fatalf("left %d markets before they lingered; want none", len(gone))
	}
	gone := f.idleMarkets(opened(h100), t0.Add(followLinger))
	if len(gone) != 1 || gone[0].shard != a100 {
		t.Fatalf("left %v; want the A100 market alone", gone)
	}
	if _, ok := f.Followed(a100); ok {
		t.Fatal("a market left is still followed")
	}
	if _, ok := f.Followed(p2p.Shard{Class: "H100x8"}); !ok {
		t.Fatal("the market of an open job is not followed (a class market's count 0 is 1)")
	}
	// The job ends; another opens there before the market has lingered.
	f.idleMarkets(nil, t0.Add(2*followLinger))
	f.idleMarkets(opened(h100), t0.Add(3*followLinger-time.Second))
	if gone := f.idleMarkets(nil, t0.Add(3*followLinger)); len(gone) != 0 {
		t.Fatalf("left %d markets idle for no time; want none", len(gone))
	}
}

// A stopped node follows no new market.
func TestFollowsRefuseWhenStopped(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	stop()
	f := &follows{ctx: ctx, stop: stop, markets: map[p2p.Shard]*followedMarket{}}
	if _, err := f.Follow(context.Background(), p2p.Shard{Class: "H100x8", Count: 1}); err == nil {
		t.Fatal("followed a market while stopping")
	}
}
