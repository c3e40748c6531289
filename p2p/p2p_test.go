package p2p

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestIdentityPersists(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Equals(b) {
		t.Fatal("identity changed across loads")
	}
	fi, err := os.Stat(filepath.Join(dir, IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestIdentityCorruptIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, IdentityFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateIdentity(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt key: got %v, want an error naming corruption", err)
	}
	// The bad file is left as it was, not replaced by a new identity.
	data, _ := os.ReadFile(filepath.Join(dir, IdentityFile))
	if string(data) != "not a key" {
		t.Fatal("corrupt key file was overwritten")
	}
}

func newKey(t testing.TB) crypto.PrivKey {
	sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

func TestSealOpen(t *testing.T) {
	sk := newKey(t)
	now := time.Now()
	s, err := Seal(sk, "offer", map[string]int{"gpus": 2}, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(s.Raw)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := peer.IDFromPrivateKey(sk)
	if got.Signer != want || got.Message.Kind != "offer" || got.Message.Time != now.UnixMilli() {
		t.Fatalf("opened %+v", got)
	}
	var body map[string]int
	if err := got.Decode(&body); err != nil || body["gpus"] != 2 {
		t.Fatalf("body %v, err %v", body, err)
	}

	// Any flipped byte in the payload breaks the signature or the structure.
	for i := range s.Raw {
		bad := append([]byte(nil), s.Raw...)
		bad[i] ^= 0x01
		if _, err := Open(bad); err == nil {
			t.Fatalf("flipped byte %d accepted", i)
		}
	}
}

func TestOpenRejections(t *testing.T) {
	sk := newKey(t)
	big := strings.Repeat("x", MaxPayload)
	if _, err := Seal(sk, "offer", big, time.Now()); !errors.Is(err, ErrOversized) {
		t.Fatalf("oversized seal: %v", err)
	}
	if _, err := Open(make([]byte, MaxPayload+1)); !errors.Is(err, ErrOversized) {
		t.Fatalf("oversized open: %v", err)
	}
	if _, err := Open([]byte("garbage")); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsigned) {
		t.Fatalf("garbage: %v", err)
	}
	if _, err := Open(nil); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("empty: %v", err)
	}
}

func TestCheckerStaleAndReplay(t *testing.T) {
	sk := newKey(t)
	c := NewChecker(time.Minute, 10*time.Second)
	now := time.Now()
	s, _ := Seal(sk, "offer", 1, now)
	if err := c.Check(s, now); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(s, now.Add(time.Second)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay: %v", err)
	}
	old, _ := Seal(sk, "offer", 1, now.Add(-2*time.Minute))
	if err := c.Check(old, now); !errors.Is(err, ErrStale) {
		t.Fatalf("old: %v", err)
	}
	future, _ := Seal(sk, "offer", 1, now.Add(time.Minute))
	if err := c.Check(future, now); !errors.Is(err, ErrStale) {
		t.Fatalf("future: %v", err)
	}
}

// After a burst, the replay cache is made anew once most of it has
// expired, and still catches a replay of what it kept.
func TestCheckerShrinksAfterABurst(t *testing.T) {
	sk := newKey(t)
	c := NewChecker(time.Minute, 10*time.Second)
	now := time.Now()
	for i := range 4 * shrinkAbove {
		s, _ := Seal(sk, "offer", i, now)
		if err := c.Check(s, now); err != nil {
			t.Fatal(err)
		}
	}
	later := now.Add(2 * time.Minute)
	kept, _ := Seal(sk, "offer", "kept", later)
	if err := c.Check(kept, later); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	n, peak := len(c.seen), c.peak
	c.mu.Unlock()
	if n != 1 || peak > 1 {
		t.Fatalf("after the burst expired: %d nonces, peak %d; want 1 and 1", n, peak)
	}
	if err := c.Check(kept, later.Add(time.Second)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay after the cache was made anew: %v", err)
	}
}

// newTestHost starts a real libp2p host on loopback.
func newTestHost(t testing.TB) (host.Host, crypto.PrivKey) {
	t.Helper()
	sk := newKey(t)
	h, err := NewHost(HostConfig{Key: sk, Listen: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, sk
}

func TestGossipRejectsBadPayloads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	ha, ka := newTestHost(t)
	hb, kb := newTestHost(t)
	// Body validator: the body's "who" must be the signer.
	bv := func(s Signed) error {
		var b struct{ Who string }
		if err := s.Decode(&b); err != nil {
			return err
		}
		if b.Who != s.Signer.String() {
			return ErrForged
		}
		return nil
	}
	cfg := GossipConfig{Network: "test", Log: log, Validators: map[string]BodyValidator{TopicOffers: bv}}
	ga, err := NewGossip(ctx, ha, ka, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := NewGossip(ctx, hb, kb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	subB, err := gb.Subscribe(TopicOffers)
	if err != nil {
		t.Fatal(err)
	}
	if err := ha.Connect(ctx, peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "topic peers", 10*time.Second, func() bool { return len(ga.TopicPeers(TopicOffers)) == 1 })

	type body struct{ Who string }
	// A good message arrives.
	_, err = ga.Publish(ctx, TopicOffers, "offer", body{Who: ha.ID().String()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	got, err := subB.Next(rctx)
	rcancel()
	if err != nil || got.Signer != ha.ID() {
		t.Fatalf("good message: %v %v", got.Signer, err)
	}

	// A raw gossipsub node with no validators of its own, speaking the same
	// unsigned, content-addressed pubsub, sends each bad payload; B must
	// reject and count every one under its reason.
	hc, kc := newTestHost(t)
	psC, err := pubsub.NewGossipSub(ctx, hc, pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithNoAuthor(), pubsub.WithMessageIdFn(messageID))
	if err != nil {
		t.Fatal(err)
	}
	topicC, err := psC.Join(TopicName("test", TopicOffers))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topicC.Subscribe(); err != nil {
		t.Fatal(err)
	}
	if err := hc.Connect(ctx, peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "B to see C on the topic", 10*time.Second, func() bool {
		for _, p := range gb.TopicPeers(TopicOffers) {
			if p == hc.ID() {
				return true
			}
		}
		return false
	})
	poll.Until(t, "C to see B on the topic", 10*time.Second, func() bool { return len(topicC.ListPeers()) > 0 })

	// The path from C to B is up once a valid message gets through; the
	// first publishes can be dropped while the routers exchange state.
	warm := func() bool {
		w, _ := Seal(kc, "offer", body{Who: hc.ID().String()}, time.Now())
		if err := topicC.Publish(ctx, w.Raw); err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer rcancel()
		_, err := subB.Next(rctx)
		return err == nil
	}
	poll.Until(t, "a message from C to reach B", 10*time.Second, warm)

	claimB, _ := Seal(kc, "offer", body{Who: hb.ID().String()}, time.Now()) // signed by C, claims B
	signedByA, _ := Seal(ka, "offer", body{Who: ha.ID().String()}, time.Now())
	stale, _ := Seal(kc, "offer", body{Who: hc.ID().String()}, time.Now().Add(-time.Hour))
	fresh, _ := Seal(kc, "offer", body{Who: hc.ID().String()}, time.Now())
	badSig, _ := Seal(kc, "offer", body{Who: hc.ID().String()}, time.Now())
	badSig.Raw[len(badSig.Raw)-1] ^= 0xff // the signature is the envelope's last field
	// The same envelope with an unknown protobuf field appended: other
	// bytes, so another pubsub message ID, but the same signed message.
	reencoded := append(bytes.Clone(fresh.Raw), 0x78, 0x01)
	cases := []struct {
		name, reason string
		raw          []byte
		signer       peer.ID // of an accepted payload
	}{
		{"first copy accepted", "", fresh.Raw, hc.ID()},
		{"body claims another peer", ReasonForged, claimB.Raw, ""},
		{"another peer's envelope, forwarded", "", signedByA.Raw, ha.ID()},
		{"signature does not verify", ReasonForged, badSig.Raw, ""},
		{"garbage", ReasonMalformed, []byte("\x0a\x02garbage"), ""},
		{"empty", ReasonUnsigned, []byte{}, ""},
		{"oversized", ReasonOversized, make([]byte, MaxPayload+10), ""},
		{"stale", ReasonStale, stale.Raw, ""},
		{"same envelope re-encoded", ReasonReplayed, reencoded, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := gb.Rejections()
			if err := topicC.Publish(ctx, c.raw); err != nil {
				t.Fatal(err)
			}
			if c.reason == "" {
				rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
				defer rcancel()
				got, err := subB.Next(rctx)
				if err != nil || got.Signer != c.signer {
					t.Fatalf("valid payload not delivered: %v %v", got.Signer, err)
				}
				return
			}
			poll.Until(t, c.reason+" counted", 10*time.Second, func() bool {
				return gb.Rejections()[c.reason] == before[c.reason]+1
			})
			for r, n := range gb.Rejections() {
				if r != c.reason && n != before[r] {
					t.Fatalf("also counted as %s", r)
				}
			}
		})
	}

	// The same bytes again are a copy the seen-cache drops before any
	// validator: nothing is delivered and nothing is counted, and the next
	// new message is the next one B gets.
	t.Run("same bytes again", func(t *testing.T) {
		before := gb.Rejections()
		if err := topicC.Publish(ctx, fresh.Raw); err != nil {
			t.Fatal(err)
		}
		next, _ := Seal(kc, "offer", body{Who: hc.ID().String()}, time.Now())
		if err := topicC.Publish(ctx, next.Raw); err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		got, err := subB.Next(rctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Message.Nonce != next.Message.Nonce {
			t.Fatalf("got nonce %d, want the next message's %d: the copy was delivered", got.Message.Nonce, next.Message.Nonce)
		}
		if after := gb.Rejections(); !maps.Equal(after, before) {
			t.Fatalf("the copy was validated: rejections %v, before %v", after, before)
		}
	})
}

func TestMessageIDIsTopicAndContent(t *testing.T) {
	topic, other := TopicName("test", TopicJobs), TopicName("test", TopicOffers)
	msg := func(topic, data string) *pb.Message { return &pb.Message{Topic: &topic, Data: []byte(data)} }
	if messageID(msg(topic, "a")) != messageID(msg(topic, "a")) {
		t.Error("the same bytes on the same topic have two IDs")
	}
	if messageID(msg(topic, "a")) == messageID(msg(topic, "b")) {
		t.Error("different bytes share an ID")
	}
	if messageID(msg(topic, "a")) == messageID(msg(other, "a")) {
		t.Error("the same bytes on two topics share an ID")
	}
}

// TestIDontWantOnlyForLargeMessages: a message the size of a declaration
// draws no IDONTWANT from the peers it reaches; one over IDontWantAbove
// does.
func TestIDontWantOnlyForLargeMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	counter := &rpcCounter{}
	const n = 4
	var peers []*gossipPeer
	for range n {
		p := newGossipPeer(t, ctx, GossipConfig{Network: "idw", Extra: []pubsub.Option{pubsub.WithRawTracer(counter)}}, TopicJobs)
		for _, o := range peers {
			connect(t, ctx, p.h, o.h)
		}
		peers = append(peers, p)
	}
	// The mesh: every peer has grafted every other.
	poll.Until(t, "a full mesh", 10*time.Second, func() bool { return counter.grafts.Load() >= n*(n-1) })
	publish := func(size int) {
		t.Helper()
		if _, err := peers[0].g.Publish(ctx, TopicJobs, "pad", struct{ Pad string }{strings.Repeat("p", size)}); err != nil {
			t.Fatal(err)
		}
		for i, p := range peers {
			if _, err := p.sub.Next(ctx); err != nil {
				t.Fatalf("peer %d: %v", i, err)
			}
		}
	}
	publish(1200)
	if got := counter.idontwant.Load(); got != 0 {
		t.Fatalf("a 1.2 KB message drew %d IDONTWANT notices", got)
	}
	publish(IDontWantAbove + 1024)
	poll.Until(t, "IDONTWANT for a large message", 10*time.Second, func() bool { return counter.idontwant.Load() > 0 })
}
