package p2p

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"pgregory.net/rapid"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shard
		bad  bool
	}{
		{in: "0/1", want: Shard{Index: 0, Count: 1}},
		{in: "3/64", want: Shard{Index: 3, Count: 64}},
		{in: "63/64", want: Shard{Index: 63, Count: 64}},
		{in: "64/64", bad: true},
		{in: "1/3", bad: true},  // not a power of two
		{in: "-1/4", bad: true}, // negative
		{in: "0/8192", bad: true},
		{in: "3", bad: true},
		{in: "a/4", bad: true},
	} {
		got, err := ParseShard(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseShard(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, err := ParseShard(got.String()); err != nil || back != got {
			t.Errorf("ParseShard(%q.String()) = %v, %v", tc.in, back, err)
		}
	}
}

func TestShardScope(t *testing.T) {
	if got := (Shard{}).Scope("e31"); got != "e31" {
		t.Errorf("the zero shard's scope is %q, want the network's", got)
	}
	if got := (Shard{Count: 1}).Scope("e31"); got != "e31" {
		t.Errorf("shard 0/1's scope is %q, want the network's", got)
	}
	if got := TopicName(Shard{Index: 3, Count: 64}.Scope("e31"), TopicOffers); got != "/e31/e31/shard-3-of-64/offers/1" {
		t.Errorf("shard 3/64's offers topic is %q", got)
	}
	if got := TopicName(Shard{Class: "H100x8", Count: 1}.Scope("e31"), TopicJobs); got != "/e31/e31/class-H100x8/jobs/1" {
		t.Errorf("class H100x8's jobs topic is %q", got)
	}
	if got := TopicName(Shard{Class: "H100x8", Index: 1, Count: 4}.Scope("e31"), TopicOffers); got != "/e31/e31/class-H100x8/shard-1-of-4/offers/1" {
		t.Errorf("subshard 1/4 of H100x8's offers topic is %q", got)
	}
	if (Shard{Class: "cpu"}).Whole() {
		t.Error("a class's market is taken for the whole network")
	}
	for _, bad := range []Shard{{Class: "a/b", Count: 1}, {Class: "H100 x8", Count: 1}, {Class: strings.Repeat("A", MaxClassLen+1), Count: 1}} {
		if bad.Valid() == nil {
			t.Errorf("class shard %q is valid", bad.Class)
		}
	}
}

// Every peer falls in a valid shard, and the shards of many peers are even
// to within what chance allows.
func TestShardOfIsEven(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		count := 1 << rapid.IntRange(0, 12).Draw(t, "log2 count")
		id := peer.ID(rapid.SliceOfN(rapid.Byte(), 1, 64).Draw(t, "id"))
		s := ShardOf(id, count)
		if err := s.Valid(); err != nil || s.Count != count {
			t.Fatalf("ShardOf(%x, %d) = %v: %v", []byte(id), count, s, err)
		}
		if ShardOf(id, count) != s {
			t.Fatalf("ShardOf is not a function of the ID")
		}
	})
	const peers, count = 16_000, 16
	n := make([]int, count)
	for i := range peers {
		n[ShardOf(peer.ID(fmt.Sprintf("peer-%d", i)), count).Index]++
	}
	for i, c := range n {
		// 1,000 expected; 5 standard deviations is ±153.
		if c < 800 || c > 1200 {
			t.Errorf("shard %d of %d holds %d of %d peers", i, count, c, peers)
		}
	}
}

// Peers in different shards of one network hear nothing of each other's
// topics; peers in the same shard do.
func TestShardsDoNotHearEachOther(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	var hostA host.Host
	gossip := func(s Shard) (*Gossip, *Subscription, peer.AddrInfo) {
		h, k := newTestHost(t)
		if hostA == nil {
			hostA = h
		}
		g, err := NewGossip(ctx, h, k, GossipConfig{Network: "test", Shard: s, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		sub, err := g.Subscribe(TopicOffers)
		if err != nil {
			t.Fatal(err)
		}
		return g, sub, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}
	}
	a, _, _ := gossip(Shard{Index: 0, Count: 2})
	_, subB, infoB := gossip(Shard{Index: 0, Count: 2})
	c, subC, infoC := gossip(Shard{Index: 1, Count: 2})
	for _, info := range []peer.AddrInfo{infoB, infoC} {
		if err := hostA.Connect(ctx, info); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "a shard peer", 10*time.Second, func() bool { return len(a.TopicPeers(TopicOffers)) == 1 })
	if got := a.TopicPeers(TopicOffers); got[0] != infoB.ID {
		t.Fatalf("a's topic peers are %v, want only b (its shard)", got)
	}
	if _, err := a.Publish(ctx, TopicOffers, "offer", struct{ N int }{1}); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if got, err := subB.Next(rctx); err != nil || got.Signer != a.self {
		t.Fatalf("b, in a's shard: %v %v", got.Signer, err)
	}
	if got := c.TopicPeers(TopicOffers); len(got) != 0 {
		t.Fatalf("c, connected to a but in the other shard, has topic peers %v", got)
	}
	// c is connected to a but in the other shard: a message of c's own
	// shard reaches c through nobody, and a's never does. One published in
	// c's shard is c's own and is delivered to c's subscription at once;
	// had a's arrived, it would have come first.
	if _, err := c.Publish(ctx, TopicOffers, "offer", struct{ N int }{2}); err != nil {
		t.Fatal(err)
	}
	got, err := subC.Next(rctx)
	if err != nil || got.Signer != c.self {
		t.Fatalf("c, in the other shard, received %v (%v), want only its own message", got.Signer, err)
	}
}

func TestSuggestShards(t *testing.T) {
	for _, tc := range []struct{ providers, want int }{
		{0, 1}, {1, 1}, {256, 1}, {257, 2}, {1000, 4}, {10_000, 64}, {100_000, 512}, {10_000_000, MaxShards},
	} {
		if got := SuggestShards(tc.providers); got != tc.want {
			t.Errorf("SuggestShards(%d) = %d, want %d", tc.providers, got, tc.want)
		}
	}
}

func TestParseShardMarker(t *testing.T) {
	for _, s := range []Shard{{Count: 1}, {Index: 0, Count: 2}, {Index: 63, Count: 64}, {Class: "H100x8", Count: 1}, {Class: "consumer-24G", Index: 3, Count: 8}} {
		got, ok := ParseShardMarker("e31", ShardMarker("e31", s))
		if !ok || got != s {
			t.Errorf("ParseShardMarker(ShardMarker(%v)) = %v, %v", s, got, ok)
		}
	}
	for _, p := range []string{"/e31/other/member/1", "/e31/e31/shard-1-of-3/member/1", "/e31/e31/shard-01-of-4/member/1",
		"/e31/e31/shard-4-of-4/member/1", "/e31/e31/member/2", "/e31/e31/offers/1", "/ipfs/id/1.0.0", "/e31/e31/x/member/1"} {
		if got, ok := ParseShardMarker("e31", protocol.ID(p)); ok {
			t.Errorf("ParseShardMarker(%q) = %v, want not a marker", p, got)
		}
	}
}

func TestParseAnyShardMarker(t *testing.T) {
	for _, tc := range []struct {
		network string
		s       Shard
	}{{"e31", Shard{Count: 1}}, {"testnet", Shard{Index: 3, Count: 4}}, {"lab/a", Shard{Count: 1}}, {"lab/a", Shard{Index: 1, Count: 2}},
		{"e31", Shard{Class: "H100x1-4", Count: 1}}, {"lab/a", Shard{Class: "cpu", Index: 1, Count: 2}}} {
		n, got, ok := ParseAnyShardMarker(ShardMarker(tc.network, tc.s))
		if !ok || n != tc.network || got != tc.s {
			t.Errorf("ParseAnyShardMarker(ShardMarker(%q, %v)) = %q, %v, %v", tc.network, tc.s, n, got, ok)
		}
	}
	for _, p := range []string{"/e31/member/1", "/e31//member/1", "/e31/e31/member/2", "/e31/e31/offers/1", "/ipfs/id/1.0.0", ""} {
		if n, got, ok := ParseAnyShardMarker(protocol.ID(p)); ok {
			t.Errorf("ParseAnyShardMarker(%q) = %q, %v; want not a marker", p, n, got)
		}
	}
}

// FuzzParseAnyShardMarker: a peer's protocols are its own to choose. Any
// protocol read as a marker is exactly the marker of what it was read as.
func FuzzParseAnyShardMarker(f *testing.F) {
	for _, p := range []string{"/e31/e31/member/1", "/e31/testnet/shard-3-of-4/member/1", "/e31/e31/shard-1-of-3/member/1",
		"/e31/a/shard-0-of-2/shard-1-of-2/member/1", "/e31//shard-0-of-2/member/1",
		"/e31/e31/class-H100x8/member/1", "/e31/e31/class-cpu/shard-1-of-2/member/1", "/e31/e31/class-/member/1", "/e31/a/class-x/class-y/member/1", "/e31/member/1", "/ipfs/id/1.0.0"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		n, s, ok := ParseAnyShardMarker(protocol.ID(p))
		if !ok {
			return
		}
		if n == "" || s.Valid() != nil || ShardMarker(n, s) != protocol.ID(p) {
			t.Fatalf("ParseAnyShardMarker(%q) = %q, %v: not its marker", p, n, s)
		}
	})
}
