package view

import (
	"fmt"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
)

func offerOf(provider string) wire.OfferBody {
	return wire.OfferBody{Offer: market.Offer{Provider: provider, GPUs: []market.GPU{{UUID: "GPU-" + provider, Model: "H100"}}}, HeartbeatMs: 1000}
}

// A provider that misses its heartbeats leaves the view and is listed
// lost, with its last offer and when it was dropped, for KeepLost or until
// it comes back; the list keeps the MaxLost most recently lost.
func TestLostProviders(t *testing.T) {
	v := NewOffers()
	t0 := time.Unix(1e9, 0)
	v.Apply(offerOf("a"), 1, t0)
	v.Apply(offerOf("b"), 1, t0.Add(2*time.Second))
	gone := v.Expire(t0.Add(3500 * time.Millisecond))
	if len(gone) != 1 || gone[0] != "a" {
		t.Fatalf("expired %v, want a", gone)
	}
	lost := v.Lost(t0.Add(4 * time.Second))
	if len(lost) != 1 || lost[0].Offer.Provider != "a" || !lost[0].LostAt.Equal(t0.Add(3500*time.Millisecond)) ||
		!lost[0].LastSeen.Equal(t0) || len(lost[0].Offer.GPUs) != 1 {
		t.Fatalf("lost %+v, want a, lost at 3.5s, last seen at 0, with its GPU", lost)
	}
	// Back: no longer lost.
	v.Apply(offerOf("a"), 2, t0.Add(5*time.Second))
	if lost := v.Lost(t0.Add(5 * time.Second)); len(lost) != 0 {
		t.Fatalf("a came back, yet lost lists %+v", lost)
	}
	// Gone again, then forgotten after KeepLost.
	v.Expire(t0.Add(9 * time.Second))
	at := t0.Add(9 * time.Second)
	if lost := v.Lost(at.Add(KeepLost)); len(lost) != 2 {
		t.Fatalf("within KeepLost: %+v, want a and b", lost)
	}
	if lost := v.Lost(at.Add(KeepLost + time.Second)); len(lost) != 0 {
		t.Fatalf("past KeepLost: %+v, want none", lost)
	}
	// Bounded: the newest MaxLost.
	for i := range MaxLost + 5 {
		p := fmt.Sprintf("p%03d", i)
		v.Apply(offerOf(p), 1, at)
		v.Expire(at.Add(time.Duration(4+i) * time.Second))
	}
	lost = v.Lost(at.Add(time.Minute))
	if len(lost) != MaxLost || lost[0].Offer.Provider != "p005" {
		t.Fatalf("kept %d lost, first %s; want %d from p005", len(lost), lost[0].Offer.Provider, MaxLost)
	}
}
