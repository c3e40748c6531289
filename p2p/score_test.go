package p2p

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestScoreParamsAreAcceptedByGossipsub(t *testing.T) {
	h, _ := newTestHost(t)
	params, thresholds := ScoreParams("test", LoopbackNets())
	if _, err := pubsub.NewGossipSub(context.Background(), h, pubsub.WithPeerScore(params, thresholds)); err != nil {
		t.Fatal(err)
	}
	// The bands are ordered as gossipsub requires.
	if !(GraylistThreshold < PublishThreshold && PublishThreshold < GossipThreshold && GossipThreshold < 0) {
		t.Fatal("thresholds out of order")
	}
	// The sixth invalid message graylists a peer with the best score it can
	// hold; five do not graylist a peer at zero.
	if 36*InvalidMessageWeight+topicScoreCap >= GraylistThreshold {
		t.Fatal("six invalid messages do not graylist a peer at the topic score cap")
	}
	if 5*5*InvalidMessageWeight < GraylistThreshold {
		t.Fatal("five invalid messages graylist a peer")
	}
}

func TestGuardTokenBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	g := NewGuard(GuardConfig{Limits: map[string]Rate{TopicJobs: {PerSecond: 10, Burst: 5}}, Now: func() time.Time { return now }})
	a, b := peer.ID("a"), peer.ID("b")
	for i := range 5 {
		if !g.Allow(a, TopicJobs) {
			t.Fatalf("message %d of the burst refused", i)
		}
	}
	if g.Allow(a, TopicJobs) {
		t.Fatal("sixth message of a burst of five allowed")
	}
	if !g.Allow(b, TopicJobs) {
		t.Fatal("another peer's bucket was drained by the first")
	}
	if !g.Allow(a, TopicOffers) {
		t.Fatal("a topic without a limit was limited")
	}
	now = now.Add(250 * time.Millisecond) // 2.5 tokens back
	if !g.Allow(a, TopicJobs) || !g.Allow(a, TopicJobs) || g.Allow(a, TopicJobs) {
		t.Fatal("refill after 250ms at 10/s is not two messages")
	}
	if got := g.Limited()[TopicJobs][LimitRate]; got != 2 {
		t.Fatalf("counted %d rate drops, want 2", got)
	}
	// Idle buckets are forgotten once full again; a returning peer starts
	// with a full burst, which is what it would have had anyway.
	now = now.Add(time.Minute)
	if !g.Allow(b, TopicJobs) {
		t.Fatal("refused after a minute idle")
	}
	g.mu.Lock()
	n := len(g.buckets)
	g.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d buckets kept after the sweep, want 1", n)
	}
}

// rawPeer is a gossipsub host with no validators: what a stranger running
// its own software can be.
type rawPeer struct {
	h      host.Host
	key    crypto.PrivKey
	topics map[string]*pubsub.Topic
}

func newRawPeer(t *testing.T, ctx context.Context, network string) *rawPeer {
	t.Helper()
	h, sk := newTestHost(t)
	ps, err := pubsub.NewGossipSub(ctx, h, MessageOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	r := &rawPeer{h: h, key: sk, topics: make(map[string]*pubsub.Topic)}
	for _, short := range []string{TopicOffers, TopicJobs} {
		tp, err := ps.Join(TopicName(network, short))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tp.Subscribe(); err != nil {
			t.Fatal(err)
		}
		r.topics[short] = tp
	}
	return r
}

type honest struct {
	h     host.Host
	g     *Gossip
	guard *Guard
	sub   *Subscription
}

func newHonest(t *testing.T, ctx context.Context, cfg GossipConfig, limits map[string]Rate) *honest {
	t.Helper()
	cfg.Guard = NewGuard(GuardConfig{Limits: limits, InspectEvery: 100 * time.Millisecond})
	p := newGossipPeer(t, ctx, cfg, TopicOffers)
	return &honest{h: p.h, g: p.g, guard: cfg.Guard, sub: p.sub}
}

// gossipPeer is a host on loopback with gossip, subscribed to one topic.
type gossipPeer struct {
	h   host.Host
	g   *Gossip
	sub *Subscription
}

func newGossipPeer(tb testing.TB, ctx context.Context, cfg GossipConfig, topic string) *gossipPeer {
	tb.Helper()
	h, sk := newTestHost(tb)
	g, err := NewGossip(ctx, h, sk, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	sub, err := g.Subscribe(topic)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(sub.Cancel)
	return &gossipPeer{h: h, g: g, sub: sub}
}

func connect(t testing.TB, ctx context.Context, a, b host.Host) {
	t.Helper()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
}

func hasPeer(ps []peer.ID, p peer.ID) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

type whoBody struct{ Who string }

func whoValidator(s Signed) error {
	var b whoBody
	if err := s.Decode(&b); err != nil {
		return err
	}
	if b.Who != s.Signer.String() {
		return fmt.Errorf("%w: body names %s", ErrForged, b.Who)
	}
	return nil
}

// nextFrom waits for the next message on sub signed by who, skipping others.
func nextFrom(ctx context.Context, sub *Subscription, who peer.ID) (Signed, error) {
	for {
		s, err := sub.Next(ctx)
		if err != nil || s.Signer == who {
			return s, err
		}
	}
}

// A peer whose messages the validators reject is graylisted: after enough
// of them its valid messages are dropped unread, while an honest peer's go
// through.
func TestByzantineInvalidPublisherGraylisted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := GossipConfig{Network: "test", Log: slog.New(slog.DiscardHandler), Validators: map[string]BodyValidator{TopicOffers: whoValidator}}
	a := newHonest(t, ctx, cfg, nil)
	b := newHonest(t, ctx, cfg, nil)
	f := newRawPeer(t, ctx, "test")
	connect(t, ctx, a.h, b.h)
	connect(t, ctx, f.h, a.h)
	poll.Until(t, "A to see B and F on the topic", 10*time.Second, func() bool {
		ps := a.g.TopicPeers(TopicOffers)
		return hasPeer(ps, b.h.ID()) && hasPeer(ps, f.h.ID())
	})
	poll.Until(t, "F to see A on the topic", 10*time.Second, func() bool { return len(f.topics[TopicOffers].ListPeers()) > 0 })

	// F is an ordinary peer until it misbehaves: its valid messages arrive.
	valid := func() []byte {
		s, err := Seal(f.key, "offer", whoBody{Who: f.h.ID().String()}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return s.Raw
	}
	poll.Until(t, "a valid message from F to reach A", 10*time.Second, func() bool {
		if err := f.topics[TopicOffers].Publish(ctx, valid()); err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer rcancel()
		_, err := nextFrom(rctx, a.sub, f.h.ID())
		return err == nil
	})

	// Then it sends forgeries, one at a time, until A graylists it.
	forged := 0
	for ; forged < 20; forged++ {
		if s, ok := a.guard.Score(f.h.ID()); ok && s < GraylistThreshold {
			break
		}
		before := a.g.Rejections()[ReasonForged]
		s, _ := Seal(f.key, "offer", whoBody{Who: b.h.ID().String()}, time.Now())
		if err := f.topics[TopicOffers].Publish(ctx, s.Raw); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "the forgery to be rejected", 10*time.Second, func() bool { return a.g.Rejections()[ReasonForged] == before+1 })
		// The score is read back every InspectEvery; wait for a reading
		// that includes this rejection.
		want := -float64((forged+1)*(forged+1)) * -InvalidMessageWeight
		poll.Until(t, "the score to follow", 10*time.Second, func() bool {
			s, ok := a.guard.Score(f.h.ID())
			return ok && s <= want+topicScoreCap
		})
	}
	s, _ := a.guard.Score(f.h.ID())
	t.Logf("F graylisted after %d rejected messages (score %.0f, threshold %.0f)", forged, s, GraylistThreshold)
	if forged != 6 {
		t.Fatalf("graylisted after %d invalid messages, want 6", forged)
	}

	// F's next valid message reaches A's router and is dropped unread;
	// B's message, sent after it, is delivered.
	seen := a.guard.Received(f.h.ID())
	if err := f.topics[TopicOffers].Publish(ctx, valid()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "A to receive F's message", 10*time.Second, func() bool { return a.guard.Received(f.h.ID()) > seen })
	if _, err := b.g.Publish(ctx, TopicOffers, "offer", whoBody{Who: b.h.ID().String()}); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	for {
		got, err := a.sub.Next(rctx)
		if err != nil {
			t.Fatalf("B's message not delivered: %v", err)
		}
		if got.Signer == f.h.ID() {
			t.Fatal("a graylisted peer's message was delivered")
		}
		if got.Signer == b.h.ID() {
			break
		}
	}
	if n := a.guard.ScoreCounts()["graylist"]; n != 1 {
		t.Fatalf("%d peers graylisted, want 1 (F)", n)
	}
	if s, _ := a.guard.Score(b.h.ID()); ScoreBand(s) != "ok" {
		t.Fatalf("honest B's score %.1f is in band %s", s, ScoreBand(s))
	}
}

// Honest peers publishing as fast as they can, beyond the rate limits, are
// slowed by the limits but never scored below the gossip threshold.
func TestByzantineHonestHighRateNotGraylisted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := GossipConfig{Network: "test", Log: slog.New(slog.DiscardHandler), Validators: map[string]BodyValidator{TopicOffers: whoValidator}}
	var ns []*honest
	for range 4 {
		// Limits well under what this machine can publish, so that the
		// load exceeds them whatever else it is doing.
		ns = append(ns, newHonest(t, ctx, cfg, map[string]Rate{TopicOffers: {PerSecond: 20, Burst: 40}}))
	}
	for i := range ns {
		for j := i + 1; j < len(ns); j++ {
			connect(t, ctx, ns[i].h, ns[j].h)
		}
	}
	for _, n := range ns {
		poll.Until(t, "every peer on the topic", 10*time.Second, func() bool { return len(n.g.TopicPeers(TopicOffers)) == len(ns)-1 })
	}
	// Every peer publishes 1,000 messages as fast as it can: 4,000 in
	// all, against a burst of 40 and 20 a second per sending peer.
	const each = 1000
	errs := make(chan error, len(ns))
	for _, n := range ns {
		go func() {
			for range each {
				if _, err := n.g.Publish(ctx, TopicOffers, "offer", whoBody{Who: n.h.ID().String()}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	worst := math.Inf(1)
	check := func() {
		for _, n := range ns {
			for _, m := range ns {
				if m == n {
					continue
				}
				if s, ok := n.guard.Score(m.h.ID()); ok {
					worst = min(worst, s)
					if ScoreBand(s) != "ok" {
						t.Fatalf("honest peer scored %.1f by another under load", s)
					}
				}
			}
		}
	}
	for range ns {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		check()
	}
	// Broken IWANT promises (P7) are the one penalty honest traffic could
	// earn, when a limit drops a message a peer asked for; they count once
	// the follow-up time has passed. Keep checking until every peer has
	// read its scores after that.
	settled := time.Now().Add(pubsub.GossipSubIWantFollowupTime + time.Second)
	for _, n := range ns {
		poll.Until(t, "scores read after the promises expired", 30*time.Second, func() bool {
			check()
			n.guard.mu.Lock()
			defer n.guard.mu.Unlock()
			return n.guard.readAt.After(settled)
		})
	}
	check()
	var limited uint64
	for _, n := range ns {
		limited += n.guard.Limited()[TopicOffers][LimitRate]
	}
	t.Logf("lowest honest score %.2f; %d copies dropped by rate limits, of %d messages published", worst, limited, len(ns)*each)
	if limited == 0 {
		t.Fatal("no message was rate-limited: the load did not exceed the limits")
	}
}

func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, _ := newTestHost(t)
	b, _ := newTestHost(t)
	nobody, _ := peer.IDFromPrivateKey(newKey(t))
	err := Call(ctx, a, nobody, "/e31/test/1", struct{}{}, nil)
	if err == nil || !Unreachable(err) {
		t.Fatalf("a peer with no address: %v, want unreachable", err)
	}
	// B is there but does not speak the protocol: not unreachable.
	a.Peerstore().AddAddrs(b.ID(), b.Addrs(), time.Minute)
	err = Call(ctx, a, b.ID(), "/e31/test/1", struct{}{}, nil)
	if err == nil || Unreachable(err) {
		t.Fatalf("a peer that answers: %v, want an error that is not unreachable", err)
	}
}

// A forwarder brings at most NewSubmitters declarations from identities
// never seen before; identities already admitted cost nothing, other
// kinds are not counted, and other forwarders have buckets of their own.
func TestGuardNewSubmitters(t *testing.T) {
	now := time.Unix(1000, 0)
	g := NewGuard(GuardConfig{Declarations: []string{"declaration"}, NewSubmitters: Rate{PerSecond: 1, Burst: 2}, Now: func() time.Time { return now }})
	var signer peer.ID
	kind := "declaration"
	v := g.wrap(TopicJobs, func(_ context.Context, _ peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
		msg.ValidatorData = Signed{Signer: signer, Message: Message{Kind: kind}}
		return pubsub.ValidationAccept
	})
	deliver := func(from, by peer.ID) pubsub.ValidationResult {
		signer = by
		return v(context.Background(), from, &pubsub.Message{Message: &pb.Message{}})
	}
	fwd, other := peer.ID("forwarder"), peer.ID("other")
	if deliver(fwd, "s1") != pubsub.ValidationAccept || deliver(fwd, "s2") != pubsub.ValidationAccept {
		t.Fatal("the burst of new identities refused")
	}
	if got := deliver(fwd, "s3"); got != pubsub.ValidationIgnore {
		t.Fatalf("third new identity in a burst of two: %v, want ignored", got)
	}
	if deliver(fwd, "s1") != pubsub.ValidationAccept {
		t.Fatal("an admitted identity refused")
	}
	if deliver(other, "s3") != pubsub.ValidationAccept {
		t.Fatal("another forwarder's bucket was drained by the first")
	}
	kind = "lease"
	if deliver(fwd, "s4") != pubsub.ValidationAccept {
		t.Fatal("a message that is not a declaration was limited")
	}
	kind = "declaration"
	now = now.Add(time.Second)
	if deliver(fwd, "s5") != pubsub.ValidationAccept || deliver(fwd, "s6") != pubsub.ValidationIgnore {
		t.Fatal("refill of one a second not applied")
	}
	if got := g.Limited()[TopicJobs][LimitNewSubmitter]; got != 2 {
		t.Fatalf("counted %d new-submitter drops, want 2", got)
	}
	if g.wrap(TopicOffers, nil) != nil {
		t.Fatal("the offers topic was wrapped")
	}
}

// What may be nobody's fault is ignored, not rejected: a peer that relays
// stale and replayed messages, many more than would graylist it were they
// invalid, keeps a score in the "ok" band and its next message arrives.
func TestByzantineStaleAndReplayedAreNotPunished(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := GossipConfig{Network: "test", Log: slog.New(slog.DiscardHandler), Validators: map[string]BodyValidator{TopicOffers: whoValidator}}
	a := newHonest(t, ctx, cfg, nil)
	f := newRawPeer(t, ctx, "test")
	connect(t, ctx, f.h, a.h)
	poll.Until(t, "F to see A on the topic", 10*time.Second, func() bool { return len(f.topics[TopicOffers].ListPeers()) > 0 })
	seal := func(at time.Time) []byte {
		s, err := Seal(f.key, "offer", whoBody{Who: f.h.ID().String()}, at)
		if err != nil {
			t.Fatal(err)
		}
		return s.Raw
	}
	first := seal(time.Now())
	poll.Until(t, "a valid message from F to reach A", 10*time.Second, func() bool {
		if err := f.topics[TopicOffers].Publish(ctx, seal(time.Now())); err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer rcancel()
		_, err := nextFrom(rctx, a.sub, f.h.ID())
		return err == nil
	})
	if err := f.topics[TopicOffers].Publish(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := nextFrom(ctx, a.sub, f.h.ID()); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		raw := seal(time.Now().Add(-time.Hour)) // stale
		if i%2 == 1 {
			// The same envelope again, with an unknown protobuf field
			// appended so that its bytes, and so its message ID, are
			// new: an identical copy is dropped before any validator.
			raw = append(bytes.Clone(first), 0x78, byte(i))
		}
		if err := f.topics[TopicOffers].Publish(ctx, raw); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "every stale and replayed message counted", 10*time.Second, func() bool {
		r := a.g.Rejections()
		return r[ReasonStale]+r[ReasonReplayed] == n
	})
	settled := time.Now()
	poll.Until(t, "a score reading after them", 10*time.Second, func() bool {
		a.guard.mu.Lock()
		defer a.guard.mu.Unlock()
		return a.guard.readAt.After(settled)
	})
	if s, ok := a.guard.Score(f.h.ID()); !ok || ScoreBand(s) != "ok" {
		t.Fatalf("F scored %.1f (%v) for stale and replayed messages", s, ok)
	}
	if err := f.topics[TopicOffers].Publish(ctx, seal(time.Now())); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if _, err := nextFrom(rctx, a.sub, f.h.ID()); err != nil {
		t.Fatalf("F's valid message after them: %v", err)
	}
}
