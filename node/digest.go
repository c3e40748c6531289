package node

import (
	"context"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// startDigests hears the network's digest topic, every shard's digest
// kept in n.digests by its validator, and on a node that offers GPUs, a
// member of its shard, starts the loop that publishes the shard's digest
// in its turn.
func (n *Node) startDigests(ctx context.Context) error {
	sub, err := n.gossip.Subscribe(p2p.TopicDigest)
	if err != nil {
		return err
	}
	// Pubsub delivers a topic's messages only to a subscriber; the
	// validator has already kept each in the book.
	n.loops.Go(func() {
		defer sub.Cancel()
		for {
			if _, err := sub.Next(ctx); err != nil {
				return
			}
		}
	})
	// A provider placed in a shard by hand (e31d --shard) is no member
	// of it by its ID, and every peer would refuse its digests.
	if _, member := digestMember(n.self, n.shard, n.compute.Offers()); !member {
		return nil
	}
	self := n.self.String()
	p := &digest.Publisher{
		Self: n.self, Shard: n.shard, Timing: digest.Timing{Every: n.cfg.DigestEvery}, Book: n.digests,
		Since: time.Now(), Log: n.log,
		// The view a pass between epochs would cut now.
		View: func(now time.Time) market.View {
			epochOf := func(t time.Time) uint64 { e, _ := n.clock.Of(t); return e }
			return n.market.Current(now, n.offers.At(now, now), epochOf, n.clock.First)
		},
		ViewHash: func() string { return lastViewHash(n.matches.All()) },
		// This node's own addresses, or those a provider's offer gives.
		Addrs: func(id string) []string {
			if id == self {
				return n.Addrs()
			}
			e, _ := n.offers.Get(id)
			return e.Addrs
		},
		Publish: func(ctx context.Context, b wire.DigestBody) error {
			_, err := n.gossip.Publish(ctx, p2p.TopicDigest, wire.KindDigest, b)
			return err
		},
	}
	n.loops.Go(func() { p.Run(ctx) })
	return nil
}

// digestValidator is the digest topic's validator of n: its book, behind the
// membership check of a member of its shard.
func (n *Node) digestValidator() digestGate {
	own, member := digestMember(n.self, n.shard, n.compute.Offers())
	return digestGate{book: n.digests, self: n.self, own: own, member: member, offered: func(id string) bool {
		_, ok := n.offers.Get(id)
		return ok
	}}
}

// lastViewHash is the view hash of the last epoch's Match in history
// (passes between epochs decide on views of their own instant), "" before
// the first.
func lastViewHash(history []api.Match) string {
	for i := len(history) - 1; i >= 0; i-- {
		if !history[i].Fast {
			return history[i].ViewHash
		}
	}
	return ""
}

// marketOf is the whole network's market as book holds it (GET
// /v1/market); own is this node's shard.
func marketOf(book *digest.Book, own p2p.Shard, now time.Time) api.Market {
	own.Count = max(own.Count, 1)
	out := api.Market{Shards: []api.MarketShard{}}
	for _, e := range book.All() {
		b := e.Body
		s := api.MarketShard{
			Class: b.Shard.Class, Index: b.Shard.Index, Count: b.Shard.Count, Own: b.Shard == own,
			Providers: b.Providers, FreeBoxes: b.FreeBoxes, Queued: b.Queued, QueuedGPUs: b.QueuedGPUs,
			OldestWaitMs: b.OldestWaitMs, Held: b.Held, ViewHash: b.ViewHash, Publisher: e.Publisher.String(),
			SignedAt: e.SignedAt.UTC(), AgeMs: max(now.Sub(e.Arrived).Milliseconds(), 0),
		}
		for _, m := range b.Members {
			s.Members = append(s.Members, api.MarketMember{ID: m.ID, Addrs: m.Addrs})
		}
		out.Shards = append(out.Shards, s)
	}
	return out
}
