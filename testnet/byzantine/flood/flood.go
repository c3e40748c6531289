package flood

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Kind is one way of flooding.
type Kind string

// The kinds of flood.
const (
	Sybil     Kind = "sybil"
	Invalid   Kind = "invalid"
	Oversized Kind = "oversized"
)

// Config configures New.
type Config struct {
	// Network names the E31 network to flood.
	Network string
	// Listen is the host's listen address; default a free TCP port on
	// 127.0.0.1.
	Listen string
	// Label starts the name of every Sybil declaration ("LABEL-N"), so
	// that an observer can tell floods apart; default "sybil".
	Label string
}

// Peer is the flooding peer.
type Peer struct {
	// Immutable after New.
	h      host.Host
	key    crypto.PrivKey
	label  string
	topics map[string]*pubsub.Topic
}

// New starts a flooding peer, joined to both topics but connected to
// nobody yet.
func New(ctx context.Context, cfg Config) (*Peer, error) {
	if cfg.Network == "" {
		return nil, errors.New("flood: no network name")
	}
	if cfg.Listen == "" {
		cfg.Listen = "/ip4/127.0.0.1/tcp/0"
	}
	if cfg.Label == "" {
		cfg.Label = "sybil"
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, err
	}
	h, err := p2p.NewHost(p2p.HostConfig{Key: key, Listen: []string{cfg.Listen}, UserAgent: "e31-flood"})
	if err != nil {
		return nil, err
	}
	// Flood publishing sends every message to every peer on the topic,
	// not only to the mesh, which a peer stops being part of as soon as
	// its score turns negative: a flooder reaches every peer it can.
	// The network's own message options, or every message would be
	// refused before any validator saw it.
	ps, err := pubsub.NewGossipSub(ctx, h, append(p2p.MessageOptions(), pubsub.WithFloodPublish(true))...)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("flood: start gossipsub: %w", err)
	}
	p := &Peer{h: h, key: key, label: cfg.Label, topics: make(map[string]*pubsub.Topic)}
	for _, short := range []string{p2p.TopicOffers, p2p.TopicJobs} {
		t, err := ps.Join(p2p.TopicName(cfg.Network, short))
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("flood: join %s: %w", short, err)
		}
		// Subscribed, so that the daemons graft it into their meshes as
		// they would any peer.
		if _, err := t.Subscribe(); err != nil {
			h.Close()
			return nil, fmt.Errorf("flood: subscribe %s: %w", short, err)
		}
		p.topics[short] = t
	}
	return p, nil
}

// ID is the peer's host identity: the forwarder every receiver scores.
func (p *Peer) ID() peer.ID { return p.h.ID() }

// Connect dials peers given as multiaddrs ending in /p2p/ID.
func (p *Peer) Connect(ctx context.Context, addrs ...string) error {
	if err := p2p.Dial(ctx, p.h, addrs...); err != nil {
		return fmt.Errorf("flood: %w", err)
	}
	return nil
}

// TopicPeers counts the peers this one knows on a topic (short name).
func (p *Peer) TopicPeers(topic string) int { return len(p.topics[topic].ListPeers()) }

// Close stops the peer.
func (p *Peer) Close() error { return p.h.Close() }

// Sent counts the messages published, by kind.
type Sent map[Kind]int

// Total is the number of messages published.
func (s Sent) Total() int {
	n := 0
	for _, c := range s {
		n += c
	}
	return n
}

// Run publishes kinds in turn at rate messages a second until ctx ends
// or count messages were published (0: no count). It returns what it
// published; ctx ending is not an error.
func (p *Peer) Run(ctx context.Context, kinds []Kind, rate float64, count int) (Sent, error) {
	sent := make(Sent)
	if len(kinds) == 0 || rate <= 0 {
		return sent, errors.New("flood: nothing to send")
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := 0; count == 0 || i < count; i++ {
		select {
		case <-ctx.Done():
			return sent, nil
		case <-tick.C:
		}
		k := kinds[i%len(kinds)]
		if err := p.Publish(ctx, k, sent[k]); err != nil {
			if ctx.Err() != nil {
				return sent, nil
			}
			return sent, err
		}
		sent[k]++
	}
	return sent, nil
}

// Publish publishes the i-th message of a kind (the kinds that have
// variants take variant i modulo their number).
func (p *Peer) Publish(ctx context.Context, k Kind, i int) error {
	// The key a Sybil declaration is signed with goes no further than its
	// envelope: gossip carries no author.
	topic, data, _, err := p.message(k, i, time.Now())
	if err != nil {
		return err
	}
	if err := p.topics[topic].Publish(ctx, data); err != nil {
		return fmt.Errorf("flood: publish %s: %w", k, err)
	}
	return nil
}

// message builds the i-th message of a kind: its topic, its bytes, and
// the key it must be published under (nil: the peer's own).
func (p *Peer) message(k Kind, i int, now time.Time) (topic string, data []byte, author crypto.PrivKey, err error) {
	switch k {
	case Sybil:
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return "", nil, nil, err
		}
		d := market.NewDeclaration(fmt.Sprintf("%s-%d", p.label, i), []string{"true"}, 1, market.Duration(time.Minute.Milliseconds()), nil)
		d.Request.Memory = 64 * market.MiB
		s, err := p2p.Seal(key, wire.KindDeclaration, wire.DeclarationBody{Declaration: d}, now)
		if err != nil {
			return "", nil, nil, err
		}
		return p2p.TopicJobs, s.Raw, key, nil
	case Invalid:
		return p.invalid(i, now)
	case Oversized:
		// Larger than any E31 payload, yet well inside gossipsub's own
		// limit (1 MiB), so the validators, not the stream reader, refuse it.
		s, err := p2p.Seal(p.key, wire.KindDeclaration, strings.Repeat("x", p2p.MaxPayload/2), now)
		if err != nil {
			return "", nil, nil, err
		}
		pad := make([]byte, p2p.MaxPayload+1-len(s.Raw))
		return p2p.TopicJobs, append(s.Raw, pad...), nil, nil
	}
	return "", nil, nil, fmt.Errorf("flood: unknown kind %q", k)
}

// invalid builds one of three invalid messages, in turn.
func (p *Peer) invalid(i int, now time.Time) (string, []byte, crypto.PrivKey, error) {
	d := market.NewDeclaration(fmt.Sprintf("invalid-%d", i), []string{"true"}, 1, market.Duration(time.Minute.Milliseconds()), nil)
	switch i % 3 {
	case 0: // a declaration whose signature does not verify
		s, err := p2p.Seal(p.key, wire.KindDeclaration, wire.DeclarationBody{Declaration: d}, now)
		if err != nil {
			return "", nil, nil, err
		}
		bad := append([]byte(nil), s.Raw...)
		bad[len(bad)-1] ^= 0xff // the envelope ends with its signature
		return p2p.TopicJobs, bad, nil, nil
	case 1: // not an envelope at all
		return p2p.TopicJobs, []byte(fmt.Sprintf("junk %d", i)), nil, nil
	default: // a well-signed declaration on the offers topic
		s, err := p2p.Seal(p.key, wire.KindDeclaration, wire.DeclarationBody{Declaration: d}, now)
		if err != nil {
			return "", nil, nil, err
		}
		return p2p.TopicOffers, s.Raw, nil, nil
	}
}
