package node

import (
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// With EpochDelay unset the node takes the delay from the offers at the
// epoch's announcement cut; a configured delay stays as set.
func TestEpochDelayAdaptsUnlessSet(t *testing.T) {
	cfg, err := Config{DataDir: t.TempDir()}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.EpochDelay != 0 {
		t.Fatalf("default epoch delay %s, want 0 (adaptive)", cfg.EpochDelay)
	}
	n := &Node{cfg: cfg, offers: view.NewOffers()}
	delay := func(start time.Time) time.Duration { return newClock(n.cfg, n.offers).Delay(start) }
	start := time.UnixMilli(1_700_000_001_000)
	if got := delay(start); got != view.DefaultFallbackDelay {
		t.Fatalf("no offers: delay %s, want %s", got, view.DefaultFallbackDelay)
	}
	announce := func(provider string, p99 int64, signed time.Time) {
		n.offers.Apply(wire.OfferBody{Offer: market.Offer{Provider: provider}, HeartbeatMs: 1000, GossipP99Ms: p99},
			signed.UnixMilli(), signed.Add(50*time.Millisecond))
	}
	announce("a", 80, start.Add(-2*time.Second))
	announce("b", 200, start.Add(-700*time.Millisecond))
	// Signed after the announcement cut: counts from the next epoch.
	announce("c", 400, start.Add(-300*time.Millisecond))
	if got, want := delay(start), 250*time.Millisecond; got != want {
		t.Fatalf("delay %s, want %s (200ms announced, plus a quarter)", got, want)
	}
	if got, want := delay(start.Add(cfg.Epoch)), 500*time.Millisecond; got != want {
		t.Fatalf("next epoch: delay %s, want %s (400ms + 100ms, at half the epoch)", got, want)
	}
	n.cfg.EpochDelay = 90 * time.Millisecond
	if got := delay(start); got != 90*time.Millisecond {
		t.Fatalf("configured 90ms, got %s", got)
	}
	if _, err := (Config{DataDir: t.TempDir(), EpochDelay: -time.Millisecond}).withDefaults(); err == nil {
		t.Fatal("a negative epoch delay was accepted")
	}
	if _, err := (Config{DataDir: t.TempDir(), Epoch: view.MaxEpoch}).withDefaults(); err != nil {
		t.Fatalf("the longest epoch refused: %v", err)
	}
	if _, err := (Config{DataDir: t.TempDir(), Epoch: view.MaxEpoch + time.Millisecond}).withDefaults(); err == nil || !strings.Contains(err.Error(), "longer than the longest") {
		t.Fatalf("an epoch over view.MaxEpoch: %v", err)
	}
}

// A node counts the gossip delays of messages from other peers signed once
// it has settled in the mesh: its own come back without crossing the
// network, and older ones reach a newcomer as history.
func TestObserveDelayLeavesOutOwnAndHistory(t *testing.T) {
	started := time.UnixMilli(1_700_000_000_000)
	self, other := peer.ID("self"), peer.ID("other")
	f := &gossipFeed{self: self, started: started, delays: view.NewGossipDelays(view.DefaultDelayWindow)}
	msg := func(from peer.ID, signed time.Time) p2p.Signed {
		return p2p.Signed{Signer: from, Message: p2p.Message{Time: signed.UnixMilli()}}
	}
	settled := started.Add(joinHistory)
	f.observeDelay(msg(other, started.Add(time.Second)), settled.Add(time.Second)) // history: 4s old
	f.observeDelay(msg(self, settled.Add(time.Second)), settled.Add(time.Second+time.Millisecond))
	if got := f.delays.Announced(); got != 0 {
		t.Fatalf("announced %dms from history and own messages, want no figure", got)
	}
	f.observeDelay(msg(other, settled), settled.Add(40*time.Millisecond))
	if got := f.delays.Announced(); got != 40 {
		t.Fatalf("announced %dms, want 40", got)
	}
}

// A job's first epoch is the first whose cut, with the delay that epoch
// uses, holds the job's stamp.
func TestFirstEpochUsesTheEpochsDelay(t *testing.T) {
	cfg, err := Config{DataDir: t.TempDir()}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	clock := newClock(cfg, view.NewOffers())
	s := time.UnixMilli(1_700_000_000_000) // an epoch's start
	for _, c := range []struct {
		name            string
		signed, arrived time.Duration // after s
		want            time.Duration
	}{
		{"well before the next cutoff", 100 * time.Millisecond, 120 * time.Millisecond, time.Second},
		{"signed after the next cutoff (150ms before it)", 900 * time.Millisecond, 910 * time.Millisecond, 2 * time.Second},
		{"signed in time, arrived after the next start", 800 * time.Millisecond, 1100 * time.Millisecond, 2 * time.Second},
	} {
		at := view.Stamp{Signed: s.Add(c.signed), Arrived: s.Add(c.arrived)}
		if got := clock.First(at); !got.Equal(s.Add(c.want)) {
			t.Errorf("%s: first epoch starts %s after s, want %s", c.name, got.Sub(s), c.want)
		}
	}
}
