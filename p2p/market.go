package p2p

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ErrLeft is the error of a Market's methods once it has been left.
var ErrLeft = errors.New("the market's topics have been left")

// Market is a market's offers and jobs topics joined while the gossip
// runs (Gossip.Join), besides those of the shard the node takes part in:
// a submitter follows the market of each of its open jobs this way. Its
// topics are validated, scored, rate-limited and metered as the node's
// own. Leave ends it; a market may be joined again after.
type Market struct {
	// Immutable after Join.
	g      *Gossip
	shard  Shard
	scope  string
	topics map[string]*pubsub.Topic // TopicOffers and TopicJobs

	mu   sync.Mutex
	subs []*Subscription // guarded by mu: every Subscribe's, cancelled by Leave
	left bool            // guarded by mu
}

// Join joins the offers and jobs topics of the market s, with a body
// validator per topic (short name, as GossipConfig.Validators; a topic
// without one accepts any well-signed body). It fails for the shard the
// node takes part in (its topics are the Gossip's own) and for a shard
// already joined and not yet left.
func (g *Gossip) Join(s Shard, validators map[string]BodyValidator) (*Market, error) {
	if err := s.Valid(); err != nil {
		return nil, fmt.Errorf("join market: %w", err)
	}
	scope := s.Scope(g.network)
	if scope == g.scope {
		return nil, fmt.Errorf("join market %s: it is the node's own market, joined from the start", s)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.joined[scope]; ok {
		return nil, fmt.Errorf("join market %s: already joined", s)
	}
	m := &Market{g: g, shard: s, scope: scope, topics: make(map[string]*pubsub.Topic, 2)}
	for _, short := range []string{TopicOffers, TopicJobs} {
		name := TopicName(scope, short)
		t, err := g.join(short, name, validators[short])
		if err == nil {
			err = t.SetScoreParams(topicScoreParams())
		}
		if err != nil {
			m.close()
			if t != nil {
				_ = t.Close()
				_ = g.ps.UnregisterTopicValidator(name)
			}
			return nil, fmt.Errorf("join market %s: %w", s, err)
		}
		m.topics[short] = t
	}
	g.joined[scope] = m
	return m, nil
}

// Joined is the market s as joined by Join and not yet left.
func (g *Gossip) Joined(s Shard) (*Market, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.joined[s.Scope(g.network)]
	return m, ok
}

// Shard is the market m's topics are of.
func (m *Market) Shard() Shard { return m.shard }

// Publish signs body as a message of kind and publishes it on one of the
// market's topics (TopicOffers or TopicJobs).
func (m *Market) Publish(ctx context.Context, topic, kind string, body any) (Signed, error) {
	s, err := Seal(m.g.key, kind, body, m.g.now())
	if err != nil {
		return Signed{}, err
	}
	return s, m.PublishRaw(ctx, topic, s.Raw)
}

// PublishRaw publishes an already sealed envelope on one of the market's
// topics; the topic's validator still runs on it.
func (m *Market) PublishRaw(ctx context.Context, topic string, raw []byte) error {
	t, err := m.topic(topic)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if err := t.Publish(ctx, raw); err != nil {
		return fmt.Errorf("publish on %s of %s: %w", topic, m.shard, err)
	}
	return nil
}

// Subscribe starts delivering the accepted messages of one of the
// market's topics, this node's own included, until the subscription is
// cancelled or the market left.
func (m *Market) Subscribe(topic string) (*Subscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left {
		return nil, fmt.Errorf("subscribe to %s of %s: %w", topic, m.shard, ErrLeft)
	}
	t, ok := m.topics[topic]
	if !ok {
		return nil, fmt.Errorf("subscribe: unknown topic %q of a market", topic)
	}
	sub, err := t.Subscribe(pubsub.WithBufferSize(1024))
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s of %s: %w", topic, m.shard, err)
	}
	s := &Subscription{sub: sub}
	m.subs = append(m.subs, s)
	return s, nil
}

// Unsubscribe cancels s, a subscription made by Subscribe: once the last
// subscription to a topic is cancelled, the node stops receiving it
// (gossipsub tells its peers), but may still publish on it.
func (m *Market) Unsubscribe(s *Subscription) {
	m.mu.Lock()
	m.subs = slices.DeleteFunc(m.subs, func(x *Subscription) bool { return x == s })
	m.mu.Unlock()
	s.Cancel()
}

// TopicPeers lists the peers known on one of the market's topics, sorted;
// none once it is left.
func (m *Market) TopicPeers(topic string) []peer.ID {
	if _, err := m.topic(topic); err != nil {
		return nil
	}
	ps := m.g.ps.ListPeers(TopicName(m.scope, topic))
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// Leave cancels every subscription to the market's topics and leaves
// them: the node stops receiving, forwarding and validating their
// messages. Leaving twice is no error.
func (m *Market) Leave() error {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	if cur, ok := m.g.joined[m.scope]; !ok || cur != m {
		return nil
	}
	delete(m.g.joined, m.scope)
	if err := m.close(); err != nil {
		return fmt.Errorf("leave market %s: %w", m.shard, err)
	}
	return nil
}

// close cancels m's subscriptions and closes its topics; g.mu is held.
// A topic closes only without subscriptions: pubsub takes a cancel on an
// unbuffered channel of its one event loop, so each is done when Cancel
// returns, before the loop reads the topic's close.
func (m *Market) close() error {
	m.mu.Lock()
	m.left = true
	subs := m.subs
	m.subs = nil
	m.mu.Unlock()
	for _, s := range subs {
		s.Cancel()
	}
	var errs []error
	for _, short := range []string{TopicOffers, TopicJobs} {
		t, ok := m.topics[short]
		if !ok {
			continue
		}
		if err := t.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := m.g.ps.UnregisterTopicValidator(t.String()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// topic is one of m's topics, unless m has been left.
func (m *Market) topic(short string) (*pubsub.Topic, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left {
		return nil, fmt.Errorf("%s of %s: %w", short, m.shard, ErrLeft)
	}
	t, ok := m.topics[short]
	if !ok {
		return nil, fmt.Errorf("unknown topic %q of a market", short)
	}
	return t, nil
}
