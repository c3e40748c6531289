package node

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
)

// A provider leaves the view once it has missed its heartbeats, judged by
// the heartbeat its own offer announced.
func TestOfferExpiryLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &gossipFeed{heartbeat: time.Second, offers: view.NewOffers(), log: slog.New(slog.DiscardHandler)}
		fast := wire.OfferBody{Offer: market.Offer{Provider: "fast"}, HeartbeatMs: 1000}
		slow := wire.OfferBody{Offer: market.Offer{Provider: "slow"}, HeartbeatMs: 10_000}
		now := time.Now()
		f.offers.Apply(fast, now.UnixMilli(), now)
		f.offers.Apply(slow, now.UnixMilli(), now)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); f.expireOffers(ctx) }()

		time.Sleep(2900 * time.Millisecond)
		synctest.Wait()
		if len(f.offers.Snapshot()) != 2 {
			t.Fatal("a provider left before missing three heartbeats")
		}
		time.Sleep(700 * time.Millisecond)
		synctest.Wait()
		if got := f.offers.Snapshot(); len(got) != 1 || got[0].Offer.Provider != "slow" {
			t.Fatalf("after 3.6s the view holds %v, want only the provider with the 10s heartbeat", got)
		}
		time.Sleep(27 * time.Second)
		synctest.Wait()
		if got := f.offers.Snapshot(); len(got) != 0 {
			t.Fatalf("after 30.6s the view still holds %d providers", len(got))
		}
		cancel()
		<-done
	})
}
