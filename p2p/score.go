package p2p

import (
	"context"
	"math"
	"net"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Score thresholds of gossipsub v1.1, as E31 sets them. The package doc
// explains the numbers; TestByzantine… in score_test.go show them at work.
const (
	// GossipThreshold: below it a peer gets no gossip (IHAVE) from us and
	// its gossip is ignored.
	GossipThreshold = -500.0
	// PublishThreshold: below it our own messages are not flood-published
	// to the peer.
	PublishThreshold = -1000.0
	// GraylistThreshold: below it every RPC from the peer is dropped
	// unread, valid messages included.
	GraylistThreshold = -2500.0
	// AcceptPXThreshold: peer exchange (the addresses a pruning peer hands
	// us) is taken only from peers that have earned at least this much.
	AcceptPXThreshold = 5.0
	// OpportunisticGraftThreshold: when the median score of our mesh falls
	// below it, we graft better peers in.
	OpportunisticGraftThreshold = 2.0
)

// Penalty parameters, exported so tests and the doc can state what one
// invalid message costs.
const (
	// InvalidMessageWeight is P4's weight: the penalty is weight × n² for
	// n invalid messages delivered (decaying), so the sixth invalid
	// message within the decay window takes a peer below
	// GraylistThreshold even with the largest positive score it can hold.
	InvalidMessageWeight = -100.0
	// invalidMessageDecayTime is how long an invalid message weighs (to 1%).
	invalidMessageDecayTime = 30 * time.Minute
	// topicScoreCap bounds what good behaviour on the topics can add, so
	// that a long honest record cannot buy room for many invalid messages.
	topicScoreCap = 50.0
	// ColocationThreshold is how many peers may share one IP address
	// before P6 penalises each of them.
	ColocationThreshold = 10
	// colocationWeight makes one peer over the threshold cost as much as
	// GossipThreshold, four of them PublishThreshold... every further peer
	// behind the address costs quadratically more.
	colocationWeight = -50.0
)

// LoopbackNets are the addresses whose peers P6 never penalises: every
// peer of a testnet on one machine shares 127.0.0.1, and they are no
// less honest for it.
func LoopbackNets() []*net.IPNet {
	return []*net.IPNet{
		{IP: net.IPv4(127, 0, 0, 0), Mask: net.CIDRMask(8, 32)},
		{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)},
	}
}

// ScoreParams returns the peer-score parameters and thresholds of a
// network's two topics. whitelist holds the networks exempt from the
// IP-colocation penalty (see LoopbackNets).
func ScoreParams(network string, whitelist []*net.IPNet) (*pubsub.PeerScoreParams, *pubsub.PeerScoreThresholds) {
	topics := make(map[string]*pubsub.TopicScoreParams)
	for _, short := range []string{TopicOffers, TopicJobs} {
		topics[TopicName(network, short)] = topicScoreParams()
	}
	params := &pubsub.PeerScoreParams{
		Topics:        topics,
		TopicScoreCap: topicScoreCap,
		// No peer is trusted more than another by default: whom to trust
		// is not ours to decide for the operator.
		AppSpecificScore:            func(peer.ID) float64 { return 0 },
		AppSpecificWeight:           1,
		IPColocationFactorWeight:    colocationWeight,
		IPColocationFactorThreshold: ColocationThreshold,
		IPColocationFactorWhitelist: whitelist,
		// P7: re-grafting during backoff and broken IWANT promises. Six
		// free, then quadratic: a peer that drops the odd promise under
		// load is not hurt.
		BehaviourPenaltyWeight:    -10,
		BehaviourPenaltyThreshold: 6,
		BehaviourPenaltyDecay:     pubsub.ScoreParameterDecay(10 * time.Minute),
		DecayInterval:             pubsub.DefaultDecayInterval,
		DecayToZero:               pubsub.DefaultDecayToZero,
		// A graylisted peer that reconnects finds its score where it left
		// it; a fresh identity starts at zero, which is what P6 and the
		// per-peer rate limits are for.
		RetainScore: time.Hour,
		SeenMsgTTL:  SeenTTL,
	}
	thresholds := &pubsub.PeerScoreThresholds{
		GossipThreshold:             GossipThreshold,
		PublishThreshold:            PublishThreshold,
		GraylistThreshold:           GraylistThreshold,
		AcceptPXThreshold:           AcceptPXThreshold,
		OpportunisticGraftThreshold: OpportunisticGraftThreshold,
	}
	return params, thresholds
}

// topicScoreParams is the same for every topic: their traffic differs in
// volume, not in what counts as misbehaviour.
func topicScoreParams() *pubsub.TopicScoreParams {
	return &pubsub.TopicScoreParams{
		TopicWeight: 1,
		// P1: staying in the mesh earns up to +10 over an hour.
		TimeInMeshWeight:  10.0 / 3600,
		TimeInMeshQuantum: time.Second,
		TimeInMeshCap:     3600,
		// P2: being first to bring a valid message earns up to +20.
		FirstMessageDeliveriesWeight: 1,
		FirstMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(10 * time.Minute),
		FirstMessageDeliveriesCap:    20,
		// P3 and P3b stay off: our topics are quiet for long stretches
		// (a provider heartbeats every few seconds, jobs come when people
		// submit them), and a mesh-delivery quota would punish honest
		// peers for the silence of others. Lotus and the Ethereum clients
		// turn it off on their irregular topics for the same reason.
		MeshMessageDeliveriesDecay: pubsub.ScoreParameterDecay(time.Minute),
		MeshFailurePenaltyDecay:    pubsub.ScoreParameterDecay(time.Minute),
		// P4: every message our validators reject.
		InvalidMessageDeliveriesWeight: InvalidMessageWeight,
		InvalidMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(invalidMessageDecayTime),
	}
}

// Rate is a token bucket: PerSecond tokens a second, at most Burst held.
type Rate struct {
	PerSecond float64
	Burst     int
}

// DefaultLimits are the per-peer message rates of each topic (by short
// name). An honest forwarder relays every peer's messages, so the limit
// must cover the whole network's traffic, not one peer's: offers are a
// heartbeat per provider (one a second with the testnet's heartbeat,
// fewer in production), 200 a second covers 200 providers at that pace;
// the jobs topic carries declarations, requeues, leases and releases, far
// fewer, and is where a Sybil flood of declarations lands. The digest
// topic carries one digest a minute per shard of the whole network: 100 a
// second covers 6,000 shards.
func DefaultLimits() map[string]Rate {
	return map[string]Rate{
		TopicOffers: {PerSecond: 200, Burst: 400},
		TopicJobs:   {PerSecond: 100, Burst: 300},
		TopicDigest: {PerSecond: 100, Burst: 300},
	}
}

// Reasons a message is dropped by Guard, as counted by Guard.Limited.
const (
	// LimitRate: the sending peer exceeded the topic's message rate
	// (dropped before any check).
	LimitRate = "rate"
	// LimitNewSubmitter: the forwarding peer brought more declarations
	// from identities never seen before than its NewSubmitters rate
	// (ignored after the validator accepted them).
	LimitNewSubmitter = "new-submitter"
)

// LimitReasons lists the reasons of Guard.Limited.
func LimitReasons() []string { return []string{LimitRate, LimitNewSubmitter} }

// DefaultNewSubmitters is how many declarations from identities this node
// has not seen declare before one forwarding peer may bring: one a second,
// ten at once. Honest networks gain new submitters at the pace people join;
// a Sybil gains one per key it makes. A declaration refused here is
// ignored, not rejected (the forwarder may be honest, passing on what it
// could not judge), and its submitter's next re-announcement tries again.
func DefaultNewSubmitters() Rate { return Rate{PerSecond: 1, Burst: 10} }

// knownSubmitters bounds the identities Guard remembers as having
// declared; past it, a new identity is not remembered and pays again.
const knownSubmitters = 100_000

// knownFor is how long Guard remembers an identity that declared.
const knownFor = time.Hour

// GuardConfig configures NewGuard.
type GuardConfig struct {
	// Limits holds the per-peer rate of each topic, by short name; nil
	// means DefaultLimits. A topic without an entry is not limited.
	Limits map[string]Rate
	// ColocationWhitelist lists the networks exempt from the
	// IP-colocation penalty; nil means LoopbackNets.
	ColocationWhitelist []*net.IPNet
	// InspectEvery is how often the peer scores are read back; default 1s.
	InspectEvery time.Duration
	// Now is the clock of the buckets; default time.Now.
	Now func() time.Time
	// Declarations are the message kinds of the jobs topic by which a
	// submitter puts jobs in every view (declarations, re-announcements).
	// Each one signed by an identity not seen before costs its forwarder
	// a token of NewSubmitters. Empty: no such limit.
	Declarations []string
	// NewSubmitters is that rate per forwarding peer; zero means
	// DefaultNewSubmitters.
	NewSubmitters Rate
}

// Guard holds what stands between gossip and a misbehaving peer that
// NewGossip cannot express as a validator: the score parameters it gives
// gossipsub, the per-peer token buckets that drop a flood before any
// signature is checked, and the latest peer scores, for metrics and tests.
// Give one Guard to one Gossip.
type Guard struct {
	// Immutable after NewGuard.
	limits     map[string]Rate
	whitelist  []*net.IPNet
	every      time.Duration
	now        func() time.Time
	declKinds  map[string]bool
	newSubRate Rate

	mu      sync.Mutex // guards everything below
	buckets map[bucketKey]*bucket
	sweepAt time.Time
	limited map[string]map[string]uint64 // topic -> reason -> count
	scores  map[peer.ID]float64
	readAt  time.Time // when scores were read
	// known holds the identities whose declarations were admitted, and
	// when last; newSubs holds each forwarder's bucket of new identities.
	known   map[peer.ID]time.Time
	newSubs map[peer.ID]*bucket
	// received counts the messages each scored peer sent us, dropped or
	// not: with Limited and the scores, what a flood cost.
	received map[peer.ID]uint64
}

type bucketKey struct {
	from  peer.ID
	topic string
}

type bucket struct {
	tokens float64
	at     time.Time
}

// NewGuard returns a Guard.
func NewGuard(cfg GuardConfig) *Guard {
	if cfg.Limits == nil {
		cfg.Limits = DefaultLimits()
	}
	if cfg.ColocationWhitelist == nil {
		cfg.ColocationWhitelist = LoopbackNets()
	}
	if cfg.InspectEvery <= 0 {
		cfg.InspectEvery = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewSubmitters == (Rate{}) {
		cfg.NewSubmitters = DefaultNewSubmitters()
	}
	kinds := make(map[string]bool)
	for _, k := range cfg.Declarations {
		kinds[k] = true
	}
	return &Guard{
		declKinds:  kinds,
		newSubRate: cfg.NewSubmitters,
		known:      make(map[peer.ID]time.Time),
		newSubs:    make(map[peer.ID]*bucket),
		limits:     cfg.Limits,
		whitelist:  cfg.ColocationWhitelist,
		every:      cfg.InspectEvery,
		now:        cfg.Now,
		buckets:    make(map[bucketKey]*bucket),
		limited:    make(map[string]map[string]uint64),
		scores:     make(map[peer.ID]float64),
		received:   make(map[peer.ID]uint64),
	}
}

// options turns the guard on for a gossipsub instance of a network: peer
// scoring, the score inspector and the RPC inspector that applies the rate
// limits. It is one pubsub.Option so that NewGossip's list grows by one.
//
// A nil Guard stands for NewGuard's defaults: scoring is never off.
// received, if not nil, sees every incoming RPC whole, before the limits
// trim it: what the peer received, whatever it then drops.
//
// scope names the shard's topics (Shard.Scope), network the network's
// own, the digest topic's.
func (g *Guard) options(scope, network string, received func(*pubsub.RPC)) pubsub.Option {
	if g == nil {
		g = NewGuard(GuardConfig{})
	}
	return func(ps *pubsub.PubSub) error {
		params, thresholds := ScoreParams(scope, g.whitelist)
		params.Topics[TopicName(network, TopicDigest)] = topicScoreParams()
		short := func(name string) (string, bool) { return topicShort(network, name) }
		for _, o := range []pubsub.Option{
			pubsub.WithPeerScore(params, thresholds),
			pubsub.WithPeerScoreInspect(pubsub.PeerScoreInspectFn(g.setScores), g.every),
			pubsub.WithAppSpecificRpcInspector(func(from peer.ID, rpc *pubsub.RPC) error {
				if received != nil {
					received(rpc)
				}
				g.trim(from, rpc, short)
				return nil
			}),
		} {
			if err := o(ps); err != nil {
				return err
			}
		}
		return nil
	}
}

// trim drops from an incoming RPC the messages its sender has no tokens
// for. It runs in pubsub's event loop, before signatures are checked or
// validators queued, so a flood costs a map lookup per message. Control
// messages are kept: they are how the mesh heals, and scoring bounds them.
// A dropped message is not marked seen, so an honest copy of it arriving
// from another peer is still delivered.
func (g *Guard) trim(from peer.ID, rpc *pubsub.RPC, short func(name string) (string, bool)) {
	msgs := rpc.GetPublish()
	if len(msgs) == 0 {
		return
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweep(now)
	g.received[from] += uint64(len(msgs))
	kept := msgs[:0]
	for _, m := range msgs {
		topic, ok := short(m.GetTopic())
		if !ok || g.take(from, topic, now) {
			kept = append(kept, m)
			continue
		}
		g.count(topic, LimitRate)
	}
	rpc.Publish = kept
}

// Allow takes one token of from's bucket for a topic (short name) and
// reports whether there was one. Trim uses it for every message; it is
// exported for payloads that reach the node by other routes.
func (g *Guard) Allow(from peer.ID, topic string) bool {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweep(now)
	if g.take(from, topic, now) {
		return true
	}
	g.count(topic, LimitRate)
	return false
}

// take must be called with mu held.
func (g *Guard) take(from peer.ID, topic string, now time.Time) bool {
	r, ok := g.limits[topic]
	if !ok {
		return true
	}
	k := bucketKey{from, topic}
	b, ok := g.buckets[k]
	if !ok {
		b = &bucket{tokens: float64(r.Burst), at: now}
		g.buckets[k] = b
	}
	return b.take(r, now)
}

func (b *bucket) take(r Rate, now time.Time) bool {
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = math.Min(float64(r.Burst), b.tokens+dt*r.PerSecond)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// full reports whether b has refilled by now: it holds nothing a new
// bucket would not.
func (b *bucket) full(r Rate, now time.Time) bool {
	return b.tokens+now.Sub(b.at).Seconds()*r.PerSecond >= float64(r.Burst)
}

// wrap puts the bound on new submitters behind the jobs topic's
// validator: a declaration the validator accepted, signed by an identity
// not seen to declare before, costs its forwarder a token, and without one
// it is ignored. It runs after the validator so that only well-signed,
// valid declarations spend tokens: an invalid one is the validator's to
// reject (and P4's to punish), and must not drain an honest forwarder's
// bucket. A nil Guard, or one without Declarations, leaves v as it is.
func (g *Guard) wrap(short string, v pubsub.ValidatorEx) pubsub.ValidatorEx {
	if g == nil || short != TopicJobs || len(g.declKinds) == 0 {
		return v
	}
	return func(ctx context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
		res := v(ctx, from, msg)
		if res != pubsub.ValidationAccept || msg.Local {
			return res
		}
		s, ok := msg.ValidatorData.(Signed)
		if !ok || !g.declKinds[s.Message.Kind] {
			return res
		}
		if !g.admit(from, s.Signer) {
			return pubsub.ValidationIgnore
		}
		return res
	}
}

// admit reports whether a declaration by signer, forwarded by from, may
// enter the view, and remembers signer if so.
func (g *Guard) admit(from, signer peer.ID) bool {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweep(now)
	if _, ok := g.known[signer]; ok {
		g.known[signer] = now
		return true
	}
	b, ok := g.newSubs[from]
	if !ok {
		b = &bucket{tokens: float64(g.newSubRate.Burst), at: now}
		g.newSubs[from] = b
	}
	if !b.take(g.newSubRate, now) {
		g.count(TopicJobs, LimitNewSubmitter)
		return false
	}
	if len(g.known) < knownSubmitters {
		g.known[signer] = now
	}
	return true
}

// sweep forgets the buckets that have refilled: they hold nothing a new
// bucket would not, so memory follows the peers that sent recently. Must
// be called with mu held.
func (g *Guard) sweep(now time.Time) {
	if now.Before(g.sweepAt) {
		return
	}
	for k, b := range g.buckets {
		if b.full(g.limits[k.topic], now) {
			delete(g.buckets, k)
		}
	}
	for p, b := range g.newSubs {
		if b.full(g.newSubRate, now) {
			delete(g.newSubs, p)
		}
	}
	for p, at := range g.known {
		if now.Sub(at) > knownFor {
			delete(g.known, p)
		}
	}
	g.sweepAt = now.Add(10 * time.Second)
}

// count must be called with mu held.
func (g *Guard) count(topic, reason string) {
	m, ok := g.limited[topic]
	if !ok {
		m = make(map[string]uint64)
		g.limited[topic] = m
	}
	m[reason]++
}

// Limited returns how many messages were dropped before validation, by
// topic (short name) and reason.
func (g *Guard) Limited() map[string]map[string]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]map[string]uint64, len(g.limited))
	for t, m := range g.limited {
		c := make(map[string]uint64, len(m))
		for r, n := range m {
			c[r] = n
		}
		out[t] = c
	}
	return out
}

func (g *Guard) setScores(scores map[peer.ID]float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.scores = scores
	g.readAt = g.now()
	// Forget the counts of peers gossipsub no longer scores (gone for
	// longer than RetainScore), so memory follows the peers we know.
	for p := range g.received {
		if _, ok := scores[p]; !ok {
			delete(g.received, p)
		}
	}
}

// Received returns how many messages p has sent us, counted before any
// limit or score is applied, while p is scored.
func (g *Guard) Received(p peer.ID) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.received[p]
}

// Score returns a peer's gossip score as last read (every InspectEvery),
// and whether the peer was scored then.
func (g *Guard) Score(p peer.ID) (float64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.scores[p]
	return s, ok
}

// ScoreCounts counts the peers scored at the last reading by the
// threshold band they were in: "ok" (at or above GossipThreshold),
// "gossip", "publish" and "graylist" (below that threshold and not the
// next).
func (g *Guard) ScoreCounts() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]int{"ok": 0, "gossip": 0, "publish": 0, "graylist": 0}
	for _, s := range g.scores {
		out[ScoreBand(s)]++
	}
	return out
}

// ScoreBand names the threshold band of a score (see ScoreCounts).
func ScoreBand(s float64) string {
	switch {
	case s < GraylistThreshold:
		return "graylist"
	case s < PublishThreshold:
		return "publish"
	case s < GossipThreshold:
		return "gossip"
	}
	return "ok"
}

// ScoreBands lists the bands of ScoreBand, best first.
func ScoreBands() []string { return []string{"ok", "gossip", "publish", "graylist"} }
