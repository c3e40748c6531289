package p2p

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A peer of one class market joins another's topics while running: it
// hears that market's jobs, its own publishes reach the market's members
// through its validator, the meter counts them under the jobs topic, and
// once it leaves it is gone from the topic and its handle refuses work.
func TestJoinMarket(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	h100 := Shard{Class: "H100x8", Count: 1}
	ha, ka := newTestHost(t)
	hb, kb := newTestHost(t)
	ga, err := NewGossip(ctx, ha, ka, GossipConfig{Network: "test", Shard: h100, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	gb, err := NewGossip(ctx, hb, kb, GossipConfig{Network: "test", Shard: Shard{Class: "consumer-24G", Count: 1}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	subA, err := ga.Subscribe(TopicJobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := ha.Connect(ctx, peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	validated := make(chan peer.ID, 4)
	m, err := gb.Join(h100, map[string]BodyValidator{TopicJobs: func(s Signed) error {
		validated <- s.Signer
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := gb.Joined(h100); !ok || got != m || m.Shard() != h100 {
		t.Fatalf("Joined(%s) = %v, %v; want the handle", h100, got, ok)
	}
	subB, err := m.Subscribe(TopicJobs)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "each peer on the other's side of the H100 jobs topic", 10*time.Second, func() bool {
		return len(ga.TopicPeers(TopicJobs)) == 1 && len(m.TopicPeers(TopicJobs)) == 1
	})
	if n := len(gb.TopicPeers(TopicJobs)); n != 0 {
		t.Fatalf("the joining peer's own jobs topic has %d peers; want none", n)
	}

	if _, err := ga.Publish(ctx, TopicJobs, "declaration", struct{ N int }{1}); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if got, err := subB.Next(rctx); err != nil || got.Signer != ha.ID() { // B has published nothing yet
		t.Fatalf("the market's job at the joined peer: %v %v", got.Signer, err)
	}
	if s := <-validated; s != ha.ID() {
		t.Fatalf("the joined topic's validator saw %s", s)
	}
	if _, err := m.Publish(rctx, TopicJobs, "declaration", struct{ N int }{2}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := subA.Next(rctx)
		if err != nil {
			t.Fatalf("the joined peer's job at the market's member: %v", err)
		}
		if got.Signer == hb.ID() {
			break
		}
	}
	if c := gb.Counts(); c.Messages[TopicJobs][KindDelivered] < 1 || c.BytesIn[TopicJobs] == 0 {
		t.Fatalf("meter: %d jobs delivered, %d bytes in on a joined market; want some", c.Messages[TopicJobs][KindDelivered], c.BytesIn[TopicJobs])
	}

	if err := m.Leave(); err != nil {
		t.Fatal(err)
	}
	if err := m.Leave(); err != nil {
		t.Fatalf("leaving twice: %v", err)
	}
	// What was delivered before the leave (its own job) may still be
	// read; then the subscription ends.
	for i := 0; ; i++ {
		if _, err := subB.Next(rctx); err != nil {
			if rctx.Err() != nil {
				t.Fatal("a subscription outlived its market's leave")
			}
			break
		}
		if i > 2 {
			t.Fatal("a subscription delivers after its market's leave")
		}
	}
	if err := m.PublishRaw(ctx, TopicJobs, []byte("x")); !errors.Is(err, ErrLeft) {
		t.Fatalf("publish after leave: %v; want ErrLeft", err)
	}
	if _, err := m.Subscribe(TopicJobs); !errors.Is(err, ErrLeft) {
		t.Fatalf("subscribe after leave: %v; want ErrLeft", err)
	}
	if _, ok := gb.Joined(h100); ok {
		t.Fatal("a left market is still joined")
	}
	poll.Until(t, "the member to see the leaver gone from the jobs topic", 10*time.Second, func() bool {
		return len(ga.TopicPeers(TopicJobs)) == 0
	})

	again, err := gb.Join(h100, nil)
	if err != nil {
		t.Fatalf("joining again after leaving: %v", err)
	}
	if _, err := again.Subscribe(TopicOffers); err != nil {
		t.Fatal(err)
	}
	if err := again.Leave(); err != nil {
		t.Fatal(err)
	}
}

// Join refuses the node's own market, a market already joined and a
// shard that is not one.
func TestJoinRefuses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, k := newTestHost(t)
	own := Shard{Class: "cpu", Count: 1}
	g, err := NewGossip(ctx, h, k, GossipConfig{Network: "test", Shard: own, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Join(own, nil); err == nil {
		t.Fatal("joined the node's own market")
	}
	other := Shard{Class: "H100x8", Index: 1, Count: 2}
	m, err := g.Join(other, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Join(other, nil); err == nil {
		t.Fatal("joined one market twice")
	}
	if _, err := g.Join(Shard{Class: "H100x8", Index: 2, Count: 2}, nil); err == nil {
		t.Fatal("joined a shard outside its count")
	}
	if _, err := m.Subscribe("digest"); err == nil {
		t.Fatal("subscribed to a market's digest topic, which is the network's")
	}
	if err := m.Leave(); err != nil {
		t.Fatal(err)
	}
}

func TestTopicShort(t *testing.T) {
	for _, c := range []struct {
		name, short string
	}{
		{"/e31/test/offers/1", TopicOffers},
		{"/e31/test/jobs/1", TopicJobs},
		{"/e31/test/digest/1", TopicDigest},
		{"/e31/test/class-H100x8/jobs/1", TopicJobs},
		{"/e31/test/class-H100x8/shard-3-of-4/offers/1", TopicOffers},
		{"/e31/test/shard-1-of-64/jobs/1", TopicJobs},
		{"/e31/other/jobs/1", ""},
		{"/e31/test/class-H100x8/digest/1", ""},
		{"/e31/test/foo/jobs/1", ""},
		{"/e31/test/xjobs/1", ""},
		{"/e31/test/jobs/2", ""},
	} {
		got, ok := topicShort("test", c.name)
		if got != c.short || ok != (c.short != "") {
			t.Errorf("topicShort(%q) = %q, %v; want %q", c.name, got, ok, c.short)
		}
	}
}

// The per-peer rate limits hold on the topics of a market joined while
// running as on the node's own: trim knows a topic of any of the
// network's shards by its name.
func TestTrimLimitsJoinedMarkets(t *testing.T) {
	now := time.Unix(1000, 0)
	g := NewGuard(GuardConfig{Limits: map[string]Rate{TopicJobs: {PerSecond: 1, Burst: 2}}, Now: func() time.Time { return now }})
	short := func(name string) (string, bool) { return topicShort("test", name) }
	joined := TopicName(Shard{Class: "H100x8", Index: 1, Count: 2}.Scope("test"), TopicJobs)
	other := "/e31/another/jobs/1"
	rpc := &pubsub.RPC{}
	for _, topic := range []string{joined, joined, joined, other, other, other} {
		rpc.Publish = append(rpc.Publish, &pb.Message{Topic: &topic, Data: []byte("x")})
	}
	g.trim(peer.ID("a"), rpc, short)
	kept := map[string]int{}
	for _, m := range rpc.Publish {
		kept[m.GetTopic()]++
	}
	if kept[joined] != 2 || kept[other] != 3 {
		t.Fatalf("kept %d of 3 on a joined market's jobs topic (burst 2) and %d of 3 on another network's; want 2 and 3", kept[joined], kept[other])
	}
}
