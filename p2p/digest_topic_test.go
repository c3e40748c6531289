package p2p

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Two peers of different shards share no offers topic, yet each hears
// what the other publishes on the digest topic, which is the network's:
// its validator runs, and the meter counts it under its own topic.
func TestDigestTopicSpansShards(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	ha, ka := newTestHost(t)
	hb, kb := newTestHost(t)
	validated := make(chan peer.ID, 1)
	bv := func(s Signed) error {
		select {
		case validated <- s.Signer:
		default:
		}
		return nil
	}
	ga, err := NewGossip(ctx, ha, ka, GossipConfig{Network: "test", Shard: Shard{Index: 0, Count: 2}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	gb, err := NewGossip(ctx, hb, kb, GossipConfig{Network: "test", Shard: Shard{Index: 1, Count: 2}, Log: log,
		Validators: map[string]BodyValidator{TopicDigest: bv}})
	if err != nil {
		t.Fatal(err)
	}
	subB, err := gb.Subscribe(TopicDigest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ga.Subscribe(TopicDigest); err != nil {
		t.Fatal(err)
	}
	if err := ha.Connect(ctx, peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a digest topic peer", 10*time.Second, func() bool { return len(ga.TopicPeers(TopicDigest)) == 1 })
	if n := len(ga.TopicPeers(TopicOffers)); n != 0 {
		t.Fatalf("peers of different shards share an offers topic: %d peers", n)
	}
	if _, err := ga.Publish(ctx, TopicDigest, "digest", struct{ Providers int }{3}); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	got, err := subB.Next(rctx)
	if err != nil || got.Signer != ha.ID() {
		t.Fatalf("digest from the other shard: %v %v", got.Signer, err)
	}
	select {
	case s := <-validated:
		if s != ha.ID() {
			t.Fatalf("validator saw %s", s)
		}
	default:
		t.Fatal("delivered without the digest topic's validator")
	}
	if c := gb.Counts(); c.Messages[TopicDigest][KindDelivered] != 1 || c.BytesIn[TopicDigest] == 0 {
		t.Fatalf("meter: %d digests delivered, %d bytes in; want 1 and some", c.Messages[TopicDigest][KindDelivered], c.BytesIn[TopicDigest])
	}
}
