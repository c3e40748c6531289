package flood

import (
	"context"
	"crypto/rand"
	"log/slog"
	"testing"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// A daemon's gossip, as the node configures it, graylists a peer that
// mixes valid declarations with invalid and oversized messages: after six
// rejections nothing more from it is even validated.
func TestByzantineMixedFloodGraylisted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p2p.NewHost(p2p.HostConfig{Key: key, Listen: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	guard := p2p.NewGuard(p2p.GuardConfig{InspectEvery: 100 * time.Millisecond, Declarations: []string{wire.KindDeclaration, wire.KindRequeue}})
	g, err := p2p.NewGossip(ctx, h, key, p2p.GossipConfig{
		Network: "test", Log: slog.New(slog.DiscardHandler), Guard: guard,
		Validators: map[string]p2p.BodyValidator{p2p.TopicJobs: wire.ValidateJobMessage, p2p.TopicOffers: wire.ValidateOffer},
	})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := g.Subscribe(p2p.TopicJobs) // as the node does: a topic is announced once subscribed
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	f, err := New(ctx, Config{Network: "test", Label: "mixed"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var addrs []string
	for _, a := range h.Addrs() {
		addrs = append(addrs, a.String()+"/p2p/"+h.ID().String())
	}
	if err := f.Connect(ctx, addrs...); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.TopicPeers(p2p.TopicJobs) == 0 || len(g.TopicPeers(p2p.TopicJobs)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the flooder never joined the topic")
		}
		time.Sleep(10 * time.Millisecond)
	}
	sent, err := f.Run(ctx, []Kind{Sybil, Invalid, Oversized}, 200, 300)
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		s, ok := guard.Score(f.ID())
		if ok && s < p2p.GraylistThreshold {
			t.Logf("flooder scored %.0f after %d messages; rejections %v", s, sent.Total(), g.Rejections())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flooder scored %.0f (%v) after %d messages; rejections %v", s, ok, sent.Total(), g.Rejections())
		}
		time.Sleep(10 * time.Millisecond)
	}
	rejected := uint64(0)
	for _, n := range g.Rejections() {
		rejected += n
	}
	if rejected > 8 {
		t.Fatalf("%d messages rejected: the flooder was validated long after it was graylisted", rejected)
	}
}
