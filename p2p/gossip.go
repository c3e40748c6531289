package p2p

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The gossip topics of the protocol, by short name. Offers and jobs are
// a shard's (GossipConfig.Shard); the digest topic is the whole
// network's, whatever the shard: every peer hears each shard's digest.
const (
	TopicOffers = "offers"
	TopicJobs   = "jobs"
	TopicDigest = "digest"
)

// TopicName is the full pubsub topic of a short name on a network.
func TopicName(network, short string) string {
	return "/e31/" + network + "/" + short + "/1"
}

// topicShort is the short name of name, a topic of network
// (TopicName(scope, short) for the scope of any of its shards, or the
// digest topic); ok is false for any other topic.
func topicShort(network, name string) (short string, ok bool) {
	rest, found := strings.CutPrefix(name, "/e31/"+network+"/")
	if !found {
		return "", false
	}
	if rest == TopicDigest+"/1" {
		return TopicDigest, true
	}
	for _, short := range []string{TopicOffers, TopicJobs} {
		if scope, found := strings.CutSuffix(rest, short+"/1"); found && (scope == "" || strings.HasSuffix(scope, "/") && (strings.HasPrefix(scope, "class-") || strings.HasPrefix(scope, "shard-"))) {
			return short, true
		}
	}
	return "", false
}

// JobsValidations bounds the jobs topic's messages being validated at
// once; past it pubsub drops what arrives (throttled) until one is done.
// A requeue carries a hundred declarations or more, each a signature to
// check, and holds a quarter of a MiB while it is checked: pubsub's own
// bound, 1,024, let a flood of valid requeues from fresh identities hold
// hundreds of MiB in validators waiting for a core (node/view, "Bounds").
const JobsValidations = 64

// Rejection reasons, as counted by Gossip.Rejections.
const (
	ReasonOversized = "oversized"
	ReasonMalformed = "malformed"
	ReasonUnsigned  = "unsigned"
	ReasonForged    = "forged"
	ReasonStale     = "stale"
	ReasonReplayed  = "replayed"
	ReasonUnwanted  = "unwanted"
	ReasonInvalid   = "invalid"
)

var reasons = []string{ReasonOversized, ReasonMalformed, ReasonUnsigned, ReasonForged, ReasonStale, ReasonReplayed, ReasonUnwanted, ReasonInvalid}

// BodyValidator checks a message's body for one topic. Returning an error
// wrapping ErrForged counts the message as forged (the body claims to come
// from someone other than its signer); any other error counts as invalid.
type BodyValidator func(s Signed) error

// GossipConfig configures NewGossip.
type GossipConfig struct {
	// Network names the E31 network; peers on other networks never meet.
	Network string
	// Shard is the part of the network's market the peer takes part in;
	// its topics are those of the shard. Zero: the whole network.
	Shard Shard
	// MaxAge and MaxSkew bound a message's signing time; defaults 2m and 30s.
	MaxAge, MaxSkew time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Log receives rejections at debug level.
	Log *slog.Logger
	// Validators holds the body validator of each topic (by short name). A
	// topic without one accepts any well-signed body.
	Validators map[string]BodyValidator
	// Guard scores peers and limits their message rates; nil: NewGuard's defaults.
	Guard *Guard
	// Extra pubsub options, applied after the network's own: a tracer, or
	// a benchmark's baseline.
	Extra []pubsub.Option
	// Panicked, if set, is told of every panic recovered from a topic's
	// validation (where PanicGossipValidate); the node counts them. Nil:
	// they are only logged, at error level on Log.
	Panicked func(where string)
	// Accepted, if set, is told of every message a topic's validation
	// accepted (this node's own included), before pubsub delivers or
	// forwards it: a relay learns a newcomer from its first message
	// before any peer it is forwarded to can dial that newcomer through
	// the relay. It runs in pubsub's validation goroutines and must not
	// block; a panic in it is recovered as the validation's.
	Accepted func(topic string, s Signed)
}

// PanicGossipValidate is the where of a panic recovered from the
// validation of a gossip message (GossipConfig.Panicked).
const PanicGossipValidate = "gossip-validate"

// Gossip publishes and receives signed envelopes on the E31 topics.
type Gossip struct {
	// Immutable after NewGossip.
	ps       *pubsub.PubSub
	key      crypto.PrivKey
	self     peer.ID
	network  string
	shard    Shard  // the market the node takes part in (GossipConfig.Shard)
	scope    string // the topics' network and shard (Shard.Scope)
	now      func() time.Time
	log      *slog.Logger
	panicked func(where string) // nil: panics are only logged
	checker  *Checker
	topics   map[string]*pubsub.Topic
	rejected map[string]*atomic.Uint64
	meter    *meter // what the gossip carried (Counts)
	guard    *Guard // nil: no declaration bound (Guard.wrap)
	accepted func(topic string, s Signed)

	mu     sync.Mutex
	joined map[string]*Market // guarded by mu: the markets joined while running, by scope
}

// NewGossip starts gossipsub on h and joins the shard's two topics and
// the network's digest topic.
func NewGossip(ctx context.Context, h host.Host, key crypto.PrivKey, cfg GossipConfig) (*Gossip, error) {
	if cfg.Network == "" {
		return nil, errors.New("gossip: no network name")
	}
	if err := cfg.Shard.Valid(); err != nil {
		return nil, fmt.Errorf("gossip: %w", err)
	}
	scope := cfg.Shard.Scope(cfg.Network)
	if cfg.MaxAge == 0 {
		cfg.MaxAge = 2 * time.Minute
	}
	if cfg.MaxSkew == 0 {
		cfg.MaxSkew = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := newMeter(scope, cfg.Network)
	opts := append(MessageOptions(),
		pubsub.WithPeerExchange(true),
		pubsub.WithFloodPublish(true),
		pubsub.WithGossipSubParams(RouterParams()),
		cfg.Guard.options(scope, cfg.Network, m.received),
		pubsub.WithLogger(slog.New(pubsubLog{cfg.Log.Handler()}).With("component", "pubsub")),
	)
	opts = append(opts, pubsub.WithRawTracer(m))
	opts = append(opts, cfg.Extra...)
	ps, err := pubsub.NewGossipSub(ctx, h, opts...)
	if err != nil {
		return nil, fmt.Errorf("start gossipsub: %w", err)
	}
	g := &Gossip{
		ps:       ps,
		key:      key,
		self:     h.ID(),
		network:  cfg.Network,
		shard:    cfg.Shard,
		scope:    scope,
		now:      cfg.Now,
		log:      cfg.Log,
		panicked: cfg.Panicked,
		checker:  NewChecker(cfg.MaxAge, cfg.MaxSkew),
		topics:   make(map[string]*pubsub.Topic),
		rejected: make(map[string]*atomic.Uint64),
		meter:    m,
		guard:    cfg.Guard,
		accepted: cfg.Accepted,
		joined:   make(map[string]*Market),
	}
	for _, r := range reasons {
		g.rejected[r] = new(atomic.Uint64)
	}
	for _, short := range []string{TopicOffers, TopicJobs, TopicDigest} {
		name := TopicName(scope, short)
		if short == TopicDigest {
			name = TopicName(cfg.Network, short)
		}
		t, err := g.join(short, name, cfg.Validators[short])
		if err != nil {
			return nil, err
		}
		g.topics[short] = t
	}
	return g, nil
}

// join registers the validator of the topic name, of short name short,
// and joins it.
func (g *Gossip) join(short, name string, bv BodyValidator) (*pubsub.Topic, error) {
	v := g.guard.wrap(short, g.validator(short, bv))
	if g.accepted != nil {
		v = telling(short, v, g.accepted)
	}
	var opts []pubsub.ValidatorOpt
	if short == TopicJobs {
		opts = append(opts, pubsub.WithValidatorConcurrency(JobsValidations))
	}
	if err := g.ps.RegisterTopicValidator(name, g.recovering(short, v), opts...); err != nil {
		return nil, fmt.Errorf("register validator for %s: %w", name, err)
	}
	t, err := g.ps.Join(name)
	if err != nil {
		_ = g.ps.UnregisterTopicValidator(name)
		return nil, fmt.Errorf("join %s: %w", name, err)
	}
	return t, nil
}

// messageID names a gossip message by its topic and bytes. Messages carry no
// pubsub author or sequence number (the envelope inside says who signed it),
// so the seen-cache recognises a copy by its content: a second copy of the
// same bytes is dropped before any validator runs, and a re-encoded copy of
// a message already accepted is caught by the Checker's nonce.
// MessageOptions are the gossipsub options that decide what a message is on
// the wire: no pubsub signature and no author, since the envelope is signed
// and checked by Validate (a pubsub signature around it would make every
// peer verify each message twice), and an ID that is the hash of the topic
// and bytes, so that a copy is dropped before any validator runs. A peer
// without them is not understood by the network.
func MessageOptions() []pubsub.Option {
	return []pubsub.Option{
		pubsub.WithSeenMessagesTTL(SeenTTL),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithNoAuthor(),
		pubsub.WithMessageIdFn(messageID),
	}
}

// RouterParams are gossipsub's defaults but for IDONTWANT, which is sent
// only for messages over IDontWantAbove.
func RouterParams() pubsub.GossipSubParams {
	p := pubsub.DefaultGossipSubParams()
	p.IDontWantMessageThreshold = IDontWantAbove
	return p
}

// IDontWantAbove is the size from which a peer, on first receipt of a
// message, tells each of its mesh peers not to send it a copy (gossipsub
// v1.2's IDONTWANT). Each such notice is an RPC of its own to every mesh
// peer, and saves at most one copy from each: it pays only when a copy
// costs far more than an RPC. gossipsub's default of 1 KiB takes in every
// declaration and lease, and in ten peers it doubled the RPCs per message
// and cost a third more CPU (BenchmarkGossipFanout). Envelopes are at most
// MaxPayload.
const IDontWantAbove = 16 << 10

// SeenTTL is how long pubsub remembers a message it has seen, so as not to
// validate or forward it twice: three times gossipsub's message history (5
// heartbeats), past which no peer offers it again, and far shorter than
// pubsub's two minutes, since the envelope's own replay check
// (Checker) remembers every nonce for the whole age window anyway and a
// busy node otherwise holds two minutes of message IDs three times over
// (seen, delivered, and the scores' delivery records).
const SeenTTL = 15 * time.Second

func messageID(m *pb.Message) string {
	h := sha256.New()
	h.Write([]byte(m.GetTopic()))
	h.Write([]byte{0})
	h.Write(m.GetData())
	return string(h.Sum(nil))
}

// Validate runs every check of an incoming payload: size, envelope,
// signature, freshness, replay and the topic's body validator. It is what
// the pubsub validator calls, exposed so that payloads arriving by other
// routes (and fuzz tests) get the same treatment. The author of a payload is
// its envelope's signer, whoever forwarded it; a body that claims another
// peer is for the body validator to reject as forged.
func (g *Gossip) Validate(data []byte, bv BodyValidator) (Signed, error) {
	s, err := Open(data)
	if err != nil {
		return Signed{}, err
	}
	if err := g.checker.Check(s, g.now()); err != nil {
		return Signed{}, err
	}
	if bv != nil {
		if err := bv(s); err != nil {
			return Signed{}, err
		}
	}
	return s, nil
}

func (g *Gossip) validator(short string, bv BodyValidator) pubsub.ValidatorEx {
	return func(ctx context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
		s, err := g.Validate(msg.GetData(), bv)
		if err == nil {
			msg.ValidatorData = s
			return pubsub.ValidationAccept
		}
		reason := reasonOf(err)
		g.rejected[reason].Add(1)
		g.log.Debug("gossip payload rejected", "topic", short, "reason", reason, "forwarder", from, "err", err)
		switch reason {
		case ReasonStale, ReasonReplayed, ReasonUnwanted:
			// Not necessarily the forwarder's fault (clocks drift, paths
			// differ, views differ): drop without penalising it.
			return pubsub.ValidationIgnore
		}
		return pubsub.ValidationReject
	}
}

// telling tells accepted of each message v accepts on topic short.
func telling(short string, v pubsub.ValidatorEx, accepted func(string, Signed)) pubsub.ValidatorEx {
	return func(ctx context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
		res := v(ctx, from, msg)
		if s, ok := msg.ValidatorData.(Signed); ok && res == pubsub.ValidationAccept {
			accepted(short, s)
		}
		return res
	}
}

// recovering makes a panic in v (the body validator, the checks, the
// Guard's) fail only the one message it was validating: logged with its
// stack, told to Panicked, and the message ignored. Pubsub runs
// validators in goroutines of its own without recovering, so without
// this one message that finds a bug would end the daemon, and every
// daemon it reached. Ignored, not rejected: the fault is ours, not
// proof that the forwarder misbehaved, and a rejection would cost every
// honest peer that forwards such a message its score (P4).
func (g *Gossip) recovering(short string, v pubsub.ValidatorEx) pubsub.ValidatorEx {
	return func(ctx context.Context, from peer.ID, msg *pubsub.Message) (res pubsub.ValidationResult) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			g.log.Error("panic recovered", "where", PanicGossipValidate, "panic", fmt.Sprint(p), "topic", short, "forwarder", from, "stack", string(debug.Stack()))
			if g.panicked != nil {
				g.panicked(PanicGossipValidate)
			}
			msg.ValidatorData = nil
			res = pubsub.ValidationIgnore
		}()
		return v(ctx, from, msg)
	}
}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, ErrOversized):
		return ReasonOversized
	case errors.Is(err, ErrUnsigned):
		return ReasonUnsigned
	case errors.Is(err, ErrForged):
		return ReasonForged
	case errors.Is(err, ErrStale):
		return ReasonStale
	case errors.Is(err, ErrReplayed):
		return ReasonReplayed
	case errors.Is(err, ErrUnwanted):
		return ReasonUnwanted
	case errors.Is(err, ErrMalformed):
		return ReasonMalformed
	}
	return ReasonInvalid
}

// Rejections returns how many payloads were rejected, by reason.
func (g *Gossip) Rejections() map[string]uint64 {
	out := make(map[string]uint64, len(g.rejected))
	for r, c := range g.rejected {
		out[r] = c.Load()
	}
	return out
}

// Publish signs body as a message of kind and publishes it on a topic.
func (g *Gossip) Publish(ctx context.Context, topic, kind string, body any) (Signed, error) {
	s, err := Seal(g.key, kind, body, g.now())
	if err != nil {
		return Signed{}, err
	}
	return s, g.PublishRaw(ctx, topic, s.Raw)
}

// PublishRaw publishes an already sealed envelope; the validators still run
// on it, so a caller cannot spread what others would reject.
func (g *Gossip) PublishRaw(ctx context.Context, topic string, raw []byte) error {
	t, ok := g.topics[topic]
	if !ok {
		return fmt.Errorf("publish: unknown topic %q", topic)
	}
	if err := t.Publish(ctx, raw); err != nil {
		return fmt.Errorf("publish on %s: %w", topic, err)
	}
	return nil
}

// Subscription delivers the accepted messages of one topic.
type Subscription struct{ sub *pubsub.Subscription }

// Subscribe starts delivering a topic's accepted messages, including this
// node's own.
func (g *Gossip) Subscribe(topic string) (*Subscription, error) {
	t, ok := g.topics[topic]
	if !ok {
		return nil, fmt.Errorf("subscribe: unknown topic %q", topic)
	}
	sub, err := t.Subscribe(pubsub.WithBufferSize(1024))
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", topic, err)
	}
	return &Subscription{sub: sub}, nil
}

// Next waits for the next accepted message.
func (s *Subscription) Next(ctx context.Context) (Signed, error) {
	for {
		msg, err := s.sub.Next(ctx)
		if err != nil {
			return Signed{}, err
		}
		if sg, ok := msg.ValidatorData.(Signed); ok {
			return sg, nil
		}
	}
}

// Cancel stops the subscription.
func (s *Subscription) Cancel() { s.sub.Cancel() }

// TopicPeers lists the peers known on a topic, sorted.
func (g *Gossip) TopicPeers(topic string) []peer.ID {
	name := TopicName(g.scope, topic)
	if t, ok := g.topics[topic]; ok {
		name = t.String()
	}
	ps := g.ps.ListPeers(name)
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}
