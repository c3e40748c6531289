package p2p

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/peer"
)

// GossipConfig.Accepted hears every message the topic's validation
// accepts, from peers and from the node itself, and none it rejects.
func TestGossipTellsAccepted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ha, ka := newTestHost(t)
	hb, kb := newTestHost(t)
	var mu sync.Mutex
	heard := map[string][]peer.ID{}
	bv := func(s Signed) error {
		var b struct{ Good bool }
		if err := s.Decode(&b); err != nil || !b.Good {
			return ErrForged
		}
		return nil
	}
	cfg := GossipConfig{Network: "test", Log: slog.New(slog.DiscardHandler), Validators: map[string]BodyValidator{TopicOffers: bv}}
	ga, err := NewGossip(ctx, ha, ka, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Accepted = func(topic string, s Signed) {
		mu.Lock()
		defer mu.Unlock()
		heard[topic] = append(heard[topic], s.Signer)
	}
	gb, err := NewGossip(ctx, hb, kb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{TopicOffers, TopicJobs} {
		sub, err := gb.Subscribe(topic)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Cancel()
	}
	if err := ha.Connect(ctx, peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "topic peers", 10*time.Second, func() bool { return len(ga.TopicPeers(TopicOffers)) == 1 })
	type body struct{ Good bool }
	heardOf := func(topic string) []peer.ID {
		mu.Lock()
		defer mu.Unlock()
		return append([]peer.ID(nil), heard[topic]...)
	}
	// A's first messages may be dropped while the routers exchange state.
	poll.Until(t, "B to hear a message of A's", 10*time.Second, func() bool {
		if _, err := ga.Publish(ctx, TopicOffers, "offer", body{Good: true}); err != nil {
			t.Fatal(err)
		}
		return len(heardOf(TopicOffers)) > 0
	})
	if _, err := gb.Publish(ctx, TopicJobs, "declaration", body{Good: false}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "B to hear its own message", 10*time.Second, func() bool { return len(heardOf(TopicJobs)) == 1 })
	before := len(heardOf(TopicOffers))
	bad, _ := Seal(ka, "offer", body{Good: false}, time.Now())
	if err := gb.PublishRaw(ctx, TopicOffers, bad.Raw); err == nil {
		t.Fatal("a message the validator refuses was published")
	}
	for _, p := range heardOf(TopicOffers) {
		if p != ha.ID() {
			t.Fatalf("heard an offer of %s, want only A's", p)
		}
	}
	if got := len(heardOf(TopicOffers)); got != before {
		t.Fatalf("heard %d offers after a refused one, want %d", got, before)
	}
	if got := heardOf(TopicJobs); got[0] != hb.ID() {
		t.Fatalf("heard B's own message as %s's", got[0])
	}
}
