package node

import (
	"context"
	"sync"
	"time"

	"github.com/e31network/e31/node/submitter"
	"github.com/e31network/e31/p2p"
)

// A followed market's offers are what its proposals are judged on (the
// claims check's Match), and they are by far its largest traffic: every
// provider's offer every heartbeat. A node needs them only while one of
// its jobs there is being placed (queued, or leased and not yet running).
// Once every job of the node there runs, it stops hearing the offers
// topic, offersLinger heartbeats later; it keeps the jobs topic, which carries its
// jobs' messages, and publishes there as before. When a job there is
// queued again (requeued, or a new one), the offers are heard again at
// once; until the view has them all again (a heartbeat or two), a
// proposal Match on the node's partial view does not give the job to is
// refused as not assigned, and its provider proposes again next epoch.
// So a peer that only submits pays, for a market where its jobs run, the
// jobs topic alone.

// offersLinger is how many heartbeats a followed market's offers are
// still heard after the last job of this node there stopped being placed
// (a minute at the default heartbeat): a job requeued soon after its
// lease began finds the view whole.
const offersLinger = 6

// offersHeard is whether, and since when, a followed market's offers
// topic is heard.
type offersHeard struct {
	// feed is the market's feed, set once by join before any want.
	feed *gossipFeed

	mu  sync.Mutex // state lock: guards the rest
	sub *p2p.Subscription
	// stop ends the loop that applies the offers heard to the view.
	stop context.CancelFunc
	// placed is when a job of the node there was last being placed.
	placed time.Time
}

// want hears market m's offers if placing (a job of the node is being
// placed there), and stops hearing them linger after the last time it
// was.
func (h *offersHeard) want(u units, m *followedMarket, placing bool, now time.Time, linger time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if placing {
		h.placed = now
	}
	switch {
	case placing && h.sub == nil:
		sub, err := m.topics.Subscribe(p2p.TopicOffers)
		if err != nil {
			return err
		}
		ctx, stop := context.WithCancel(m.ctx)
		h.sub, h.stop = sub, stop
		feed := h.feed
		u.loops.Go(func() { feed.receiveOffers(ctx, sub) })
		u.log.Debug("hearing a followed market's offers: a job of this node is placed there", "market", m.shard.String())
	case !placing && h.sub != nil && now.Sub(h.placed) >= linger:
		h.stop()
		m.topics.Unsubscribe(h.sub)
		h.sub, h.stop = nil, nil
		u.log.Debug("no longer hearing a followed market's offers: every job of this node there runs", "market", m.shard.String())
	}
	return nil
}

// on reports whether the offers are heard now.
func (h *offersHeard) on() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sub != nil
}

// tuneOffers hears the offers of each followed market in which a job of
// this node is being placed, as open says, and stops hearing those of the
// others (see above).
func (f *follows) tuneOffers(open []submitter.OpenMarket, now time.Time) {
	placing := make(map[p2p.Shard]bool, len(open))
	for _, o := range open {
		if o.Placing {
			placing[marketKey(o.Shard)] = true
		}
	}
	for _, m := range f.followed() {
		if err := m.heard.want(f.units, m, placing[m.shard], now, offersLinger*f.cfg.Heartbeat); err != nil {
			f.units.log.Warn("hear a followed market's offers", "market", m.shard.String(), "err", err)
		}
	}
}
