package node

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/e31network/e31/node/metrics"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/reach"
	"github.com/e31network/e31/node/submitter"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// gossipFeed applies what the gossip topics bring to this node's views
// (offers, market, gossip delays), and to its roles where they are
// concerned: the loops Run starts on the offers and the jobs topics, and
// the one that drops the providers that went silent. Every field is set
// by wireLoops and never changed after; each part it holds locks itself,
// and the feed holds no lock of its own.
type gossipFeed struct {
	log       *slog.Logger
	self      peer.ID
	started   time.Time     // when the node started (observeDelay)
	shard     p2p.Shard     // this node's shard (warnCrowded)
	followed  bool          // the views are of a market this node follows, not its own: no warnCrowded
	heartbeat time.Duration // Config.Heartbeat
	offers    *view.Offers
	market    *view.Market
	delays    *view.GossipDelays
	peers     *reach.Book
	provider  *provider.Provider
	submitter *submitter.Submitter
	units     units
	// signalWork says a pass between epochs may find work (Node.signalWork).
	signalWork func()
}

// receiveOffers applies every accepted offer to the view.
func (f *gossipFeed) receiveOffers(ctx context.Context, sub *p2p.Subscription) {
	saved := reach.Saved{}
	for {
		s, err := sub.Next(ctx)
		if err != nil {
			return
		}
		f.applyOffer(ctx, s, saved)
	}
}

// applyOffer applies one accepted offer to the view. A panic fails this
// offer only (recoverPanic): the loop goes on with the next.
func (f *gossipFeed) applyOffer(ctx context.Context, s p2p.Signed, saved reach.Saved) {
	defer f.units.recoverPanic(metrics.PanicGossipHandle, "topic", p2p.TopicOffers, "signer", s.Signer)
	b, err := wire.DecodeOffer(s)
	if err != nil {
		return // the validator already checked it; cannot happen
	}
	now := time.Now()
	f.observeDelay(s, now)
	// A changed offer may change who a pass between epochs assigns a
	// waiting job to: the provider that holds devices it has not yet
	// announced knows it cannot take the job before its peers do.
	f.signalWork()
	if isNew := f.offers.Apply(b, s.Message.Time, now); isNew {
		f.log.Info("provider joined the view", "provider", b.Offer.Provider, "gpus", len(b.Offer.GPUs))
		f.peers.Learn(ctx, s.Signer, b.Addrs)
		if s.Signer != f.self {
			// A provider that left the view for missed heartbeats and
			// came back, as a stall of this node makes dozens do at
			// once, is written again only with new addresses or once
			// the record ages; and the write is not this loop's to
			// wait for: a store stalled by compaction would hold up
			// every offer behind it, and more providers would miss
			// their heartbeats.
			if saved.Due(s.Signer, b.Addrs, now) {
				signer, addrs := s.Signer, b.Addrs
				f.units.goTask("remember peer", signer, func() { f.peers.Remember(signer, addrs) })
			}
			f.submitter.Joined(now)
		}
	}
}

// expireOffers drops providers that missed their heartbeats.
func (f *gossipFeed) expireOffers(ctx context.Context) {
	crowded := false
	task.Every(ctx, max(f.heartbeat/2, 50*time.Millisecond), func(now time.Time) {
		for _, p := range f.offers.Expire(now) {
			f.log.Info("provider left the view", "provider", p, "reason", "missed heartbeats")
		}
		if !f.followed {
			crowded = f.warnCrowded(crowded)
		}
	})
}

// crowdedShard is the number of providers in this node's market past which
// it says that the network has outgrown its shards: every peer of the
// shard pays for each of them.
const crowdedShard = 4 * p2p.ShardProviders

// warnCrowded logs, once each time the view grows past crowdedShard, how
// many shards a network this size should have; it returns whether the view
// is past it.
func (f *gossipFeed) warnCrowded(was bool) bool {
	held := f.offers.Len()
	now := held > crowdedShard
	switch {
	case now && !was && f.shard.Class != "":
		f.log.Warn("this node's class market holds more providers than a shard is sized for: every peer pays for each; the class should split into more subshards (--class-shards)",
			"providers", held, "shard", f.shard.String(), "suggested_class_shards", f.shard.Class+"="+strconv.Itoa(p2p.SuggestShards(held*max(f.shard.Count, 1))))
	case now && !was:
		f.log.Warn("this node's market holds more providers than a shard is sized for: every peer pays for each; the network should split into more shards",
			"providers", held, "shard", f.shard.String(), "suggested_shards", p2p.SuggestShards(held*max(f.shard.Count, 1)))
	}
	return now
}
