package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/epoch"
	"github.com/e31network/e31/node/submitter"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
)

// followLinger is how long the node stays in a market it follows after
// its last open job there ended: a job resumed or submitted again soon
// finds the market's topics, views and peers as they were.
const followLinger = 5 * time.Minute

// followSweep is how often the followed markets are looked over: left once
// idle past followLinger, their views pruned as the node's own epoch
// prunes its own (Node.prune), and their members reached again while
// their topics have no peers.
const followSweep = 30 * time.Second

// follows are the class markets this node follows for its jobs, besides
// the one it takes part in (submitter.Follower): for each, the market's
// offers and jobs topics (p2p.Market), its views fed from them as the
// node's own are (gossipFeed, offers and jobs only), and a Judge on them,
// which the submitter's claims check asks. No epoch passes there: this
// node provides only in its own market.
type follows struct {
	// Immutable after newFollows, but feed, set by wireLoops before the
	// node runs.
	ctx     context.Context // ends when Run does: every market's feed stops with it
	stop    context.CancelFunc
	cfg     Config
	self    peer.ID
	gossip  *p2p.Gossip
	host    host.Host
	digests *digest.Book
	units   units
	// feed is the node's own feed (gossipFeed), of which each market's is
	// a copy on the market's views.
	feed *gossipFeed
	// open are the markets of this node's open jobs
	// (Submitter.Markets).
	open func() []submitter.OpenMarket
	// waits tells the submitter why its jobs wait in a followed market,
	// as a pass there says (Submitter.NoteFollowedWaits).
	waits func(market.Result)

	mu      sync.Mutex                    // state lock: guards markets and each market's idle
	markets map[p2p.Shard]*followedMarket // by marketKey
}

// followedMarket is one market the node follows.
type followedMarket struct {
	// Immutable after Follow.
	shard  p2p.Shard
	topics *p2p.Market
	offers *view.Offers
	market *view.Market
	judge  *epoch.Judge
	ctx    context.Context    // the market's feed's: ends when it is left
	stop   context.CancelFunc // ends the market's feed
	// idle is since when no job of this node is open in the market; zero
	// while one is. Guarded by follows.mu.
	idle time.Time
	// heard is how the market's offers are heard while a job of this node
	// is being placed there (follow_offers.go).
	heard offersHeard
}

func (m *followedMarket) Publish(ctx context.Context, topic, kind string, body any) (p2p.Signed, error) {
	return m.topics.Publish(ctx, topic, kind, body)
}

func (m *followedMarket) PublishRaw(ctx context.Context, topic string, raw []byte) error {
	return m.topics.PublishRaw(ctx, topic, raw)
}

func (m *followedMarket) Offers() submitter.Offers       { return m.offers }
func (m *followedMarket) Placement() submitter.Placement { return m.judge }

// marketKey is s as the key of a market: a class market's count is 1,
// never 0.
func marketKey(s p2p.Shard) p2p.Shard {
	s.Count = max(s.Count, 1)
	return s
}

func newFollows(n *Node) *follows {
	ctx, stop := context.WithCancel(context.Background())
	return &follows{ctx: ctx, stop: stop, cfg: n.cfg, self: n.self, gossip: n.gossip, host: n.host, digests: n.digests,
		units: n.units, markets: make(map[p2p.Shard]*followedMarket)}
}

// Follow follows market s from now on, unless it does already.
func (f *follows) Follow(_ context.Context, s p2p.Shard) (submitter.Followed, error) {
	s = marketKey(s)
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.markets[s]; ok {
		m.idle = time.Time{}
		return m, nil
	}
	if f.ctx.Err() != nil {
		return nil, fmt.Errorf("follow market %s: the node is stopping", s)
	}
	m, err := f.join(s)
	if err != nil {
		return nil, err
	}
	f.markets[s] = m
	f.units.log.Info("following a class market for this node's jobs", "market", s.String())
	return m, nil
}

// join joins market s's topics and starts its feed; f.mu is held.
func (f *follows) join(s p2p.Shard) (*followedMarket, error) {
	offers := view.NewOffers()
	mkt := view.NewBoundedMarket(viewBounds(f.cfg.View, f.self, offers))
	topics, err := f.gossip.Join(s, map[string]p2p.BodyValidator{
		p2p.TopicOffers: wire.OfferValidator(s),
		p2p.TopicJobs:   view.NewJobChecks(mkt).In(s).Validate,
	})
	if err != nil {
		return nil, err
	}
	jobsSub, err := topics.Subscribe(p2p.TopicJobs)
	if err != nil {
		_ = topics.Leave()
		return nil, err
	}
	ctx, stop := context.WithCancel(f.ctx)
	m := &followedMarket{shard: s, topics: topics, offers: offers, market: mkt, ctx: ctx, stop: stop,
		judge: &epoch.Judge{Clock: newClock(f.cfg, offers), Market: mkt, Log: f.units.log, Panicked: f.units.metrics.Panicked}}
	feed := *f.feed
	feed.shard, feed.offers, feed.market, feed.followed = s, offers, mkt, true
	feed.delays = view.NewGossipDelays(view.DefaultDelayWindow)
	feed.signalWork = func() {} // no pass of this node's runs there
	m.heard.feed = &feed
	// Followed for a job being placed there: its offers are heard at once.
	if err := m.heard.want(f.units, m, true, time.Now(), offersLinger*f.cfg.Heartbeat); err != nil {
		stop()
		_ = topics.Leave()
		return nil, err
	}
	f.units.loops.Go(func() { feed.receiveJobs(ctx, jobsSub) })
	f.units.loops.Go(func() { feed.expireOffers(ctx) })
	f.units.loops.Go(func() { f.reach(ctx, s) })
	return m, nil
}

// Followed is market s, if the node follows it.
func (f *follows) Followed(s p2p.Shard) (submitter.Followed, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.markets[marketKey(s)]
	if !ok {
		return nil, false
	}
	return m, true
}

// reach connects to the members market s's digest names, so that its
// topics have peers: this node is in none of its members' shard, and
// would otherwise meet them only by chance.
func (f *follows) reach(ctx context.Context, s p2p.Shard) {
	for _, e := range f.digests.All() {
		if marketKey(e.Body.Shard) != s {
			continue
		}
		for _, mem := range e.Body.Members {
			info, err := memberInfo(mem)
			if err != nil || info.ID == f.self {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, f.cfg.ConnectTimeout)
			if err := f.host.Connect(cctx, info); err != nil {
				f.units.log.Debug("reach a member of a followed market", "market", s.String(), "peer", info.ID, "err", err)
			}
			cancel()
		}
	}
}

// memberInfo is where a digest's member listens.
func memberInfo(m wire.DigestMember) (peer.AddrInfo, error) {
	id, err := peer.Decode(m.ID)
	if err != nil {
		return peer.AddrInfo{}, err
	}
	info := peer.AddrInfo{ID: id}
	for _, a := range m.Addrs {
		if ma, err := multiaddr.NewMultiaddr(a); err == nil {
			info.Addrs = append(info.Addrs, ma)
		}
	}
	return info, nil
}

// Run looks over the followed markets every followSweep until ctx ends,
// then stops every market's feed.
func (f *follows) Run(ctx context.Context) {
	defer f.stop()
	f.units.loops.Go(func() { f.tellWaits(ctx) })
	task.Every(ctx, followSweep, func(now time.Time) {
		for _, m := range f.idleMarkets(f.open(), now) {
			f.leave(m)
		}
		for _, m := range f.followed() {
			m.market.Prune(now, time.Hour, max(10*f.cfg.Heartbeat, 3*requeueEvery*f.cfg.Heartbeat))
			if len(m.topics.TopicPeers(p2p.TopicJobs)) == 0 {
				// Joined before its digest was heard (a restart
				// re-announcing its jobs), or its members since gone.
				f.units.loops.Go(func() { f.reach(m.ctx, m.shard) })
			}
		}
	})
}

// idleMarkets marks when each followed market not in open became idle,
// and takes out of the followed those idle for followLinger by now.
func (f *follows) idleMarkets(open []submitter.OpenMarket, now time.Time) []*followedMarket {
	busy := make(map[p2p.Shard]bool, len(open))
	for _, o := range open {
		busy[marketKey(o.Shard)] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*followedMarket
	for s, m := range f.markets {
		switch {
		case busy[s]:
			m.idle = time.Time{}
		case m.idle.IsZero():
			m.idle = now
		case now.Sub(m.idle) >= followLinger:
			delete(f.markets, s)
			out = append(out, m)
		}
	}
	return out
}

// leave stops m's feed and leaves its topics.
func (f *follows) leave(m *followedMarket) {
	m.stop()
	if err := m.topics.Leave(); err != nil {
		f.units.log.Warn("leave a followed market", "market", m.shard.String(), "err", err)
		return
	}
	f.units.log.Info("left a class market: no job of this node is open there", "market", m.shard.String())
}

// followed are the markets followed now.
func (f *follows) followed() []*followedMarket {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*followedMarket, 0, len(f.markets))
	for _, m := range f.markets {
		out = append(out, m)
	}
	return out
}
