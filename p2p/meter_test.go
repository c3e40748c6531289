package p2p

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
)

// The meter counts, on the peer that receives them, each first copy
// delivered and each copy its validator rejects, and on both peers the
// bytes of the topic's messages in the direction they went.
func TestGossipCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	refuse := func(s Signed) error {
		if s.Message.Kind == "bad" {
			return errors.New("bad kind")
		}
		return nil
	}
	pub := newGossipPeer(t, ctx, GossipConfig{Network: "meter"}, TopicJobs)
	recv := newGossipPeer(t, ctx, GossipConfig{Network: "meter", Validators: map[string]BodyValidator{TopicJobs: refuse}}, TopicJobs)
	connect(t, ctx, pub.h, recv.h)
	poll.Until(t, "the peers see each other on the topic", 10*time.Second, func() bool {
		return hasPeer(pub.g.TopicPeers(TopicJobs), recv.h.ID())
	})

	const good = 5
	var raw int
	for i := range good {
		s, err := pub.g.Publish(ctx, TopicJobs, "good", whoBody{Who: string(rune('a' + i))})
		if err != nil {
			t.Fatal(err)
		}
		raw += len(s.Raw)
	}
	if _, err := pub.g.Publish(ctx, TopicJobs, "bad", whoBody{Who: "x"}); err != nil {
		t.Fatal(err)
	}
	for range good {
		if _, err := recv.sub.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "the bad message rejected", 10*time.Second, func() bool {
		return recv.g.Counts().Messages[TopicJobs][KindRejected] == 1
	})

	got := recv.g.Counts()
	if n := got.Messages[TopicJobs][KindDelivered]; n != good {
		t.Errorf("receiver: %d delivered, want %d", n, good)
	}
	if n := got.Messages[TopicOffers][KindDelivered]; n != 0 {
		t.Errorf("receiver: %d offers delivered, none sent", n)
	}
	if got.BytesIn[TopicJobs] < uint64(raw) {
		t.Errorf("receiver: %d bytes in on jobs, less than the %d of the good messages' data", got.BytesIn[TopicJobs], raw)
	}
	sent := pub.g.Counts()
	if n := sent.Messages[TopicJobs][KindSent]; n < good+1 {
		t.Errorf("publisher: %d copies sent, want at least %d", n, good+1)
	}
	if sent.BytesOut[TopicJobs] < uint64(raw) {
		t.Errorf("publisher: %d bytes out on jobs, less than %d", sent.BytesOut[TopicJobs], raw)
	}
	if sent.BytesOut[TopicNone] == 0 {
		t.Error("publisher: no bytes out outside the topics (subscriptions, framing)")
	}
	for _, c := range []GossipCounts{got, sent} {
		for _, topic := range GossipTopics() {
			if len(c.Messages[topic]) != len(GossipKinds()) {
				t.Errorf("topic %s has %d kinds, want every one of %d", topic, len(c.Messages[topic]), len(GossipKinds()))
			}
		}
	}
}

// Bytes a peer's limits drop were still received: the meter counts them.
func TestGossipCountsWhatLimitsDrop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pub := newGossipPeer(t, ctx, GossipConfig{Network: "meter"}, TopicJobs)
	guard := NewGuard(GuardConfig{Limits: map[string]Rate{TopicJobs: {PerSecond: 0.001, Burst: 2}}})
	recv := newGossipPeer(t, ctx, GossipConfig{Network: "meter", Guard: guard}, TopicJobs)
	connect(t, ctx, pub.h, recv.h)
	poll.Until(t, "the peers see each other on the topic", 10*time.Second, func() bool {
		return hasPeer(pub.g.TopicPeers(TopicJobs), recv.h.ID())
	})
	const n = 10
	var raw int
	for i := range n {
		s, err := pub.g.Publish(ctx, TopicJobs, "good", whoBody{Who: string(rune('a' + i))})
		if err != nil {
			t.Fatal(err)
		}
		raw += len(s.Raw)
	}
	poll.Until(t, "every message's bytes counted in", 10*time.Second, func() bool {
		return recv.g.Counts().BytesIn[TopicJobs] >= uint64(raw)
	})
	if d := recv.g.Counts().Messages[TopicJobs][KindDelivered]; d >= n {
		t.Errorf("%d of %d delivered through a limit of 2", d, n)
	}
}
