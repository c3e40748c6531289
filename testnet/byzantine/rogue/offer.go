package rogue

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// offered is the offer the rogue publishes; it belongs to the Rogue and
// is guarded by its mu.
type offered struct {
	offer market.Offer
	// stop ends the heartbeat loop.
	stop context.CancelFunc
}

// GPUs makes n GPUs of a model, each with memory bytes, for an offer:
// UUIDs of the rogue's own, so that two rogues never name the same GPU.
func (r *Rogue) GPUs(model string, n int, memory uint64) []market.GPU {
	out := make([]market.GPU, n)
	for i := range out {
		out[i] = market.GPU{Index: i, UUID: fmt.Sprintf("GPU-rogue-%s-%d", r.self.String()[len(r.self.String())-8:], i), Model: model, MemoryBytes: memory, Free: true}
	}
	return out
}

// Offer publishes an offer of gpus, with room for any job's CPUs and
// memory, now and every heartbeat until Unoffer or Close: the rogue is a
// provider in every view, as long as it keeps saying so. A second call
// replaces the offer.
func (r *Rogue) Offer(ctx context.Context, gpus []market.GPU) error {
	o := market.Offer{Provider: r.self.String(), GPUs: slices.Clone(gpus), CPUs: 64, MemoryBytes: 256 << 30}
	return r.setOffer(ctx, o)
}

// Drain publishes the current offer as draining: the rogue takes nothing
// new, and Match gives it nothing, while it stays in every view.
func (r *Rogue) Drain(ctx context.Context) error {
	r.mu.Lock()
	if r.offer == nil {
		r.mu.Unlock()
		return nil
	}
	o := r.offer.offer
	r.mu.Unlock()
	o.Draining = true
	return r.setOffer(ctx, o)
}

func (r *Rogue) setOffer(ctx context.Context, o market.Offer) error {
	lctx, stop := context.WithCancel(r.ctx)
	r.mu.Lock()
	if r.offer != nil {
		r.offer.stop()
	}
	r.offer = &offered{offer: o, stop: stop}
	r.mu.Unlock()
	if err := r.publishOffer(ctx, o); err != nil {
		return err
	}
	r.wg.Go(func() {
		task.Every(lctx, r.cfg.Heartbeat, func(time.Time) {
			if err := r.publishOffer(lctx, o); err != nil && lctx.Err() == nil {
				r.cfg.Log.Warn("rogue: publish offer", "err", err)
			}
		})
	})
	return nil
}

// Unoffer stops the heartbeats: the offer leaves every view once a few are
// missed.
func (r *Rogue) Unoffer() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.offer != nil {
		r.offer.stop()
		r.offer = nil
	}
}

// offerNow is the offer published, if any.
func (r *Rogue) offerNow() (market.Offer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.offer == nil {
		return market.Offer{}, false
	}
	return r.offer.offer, true
}

func (r *Rogue) publishOffer(ctx context.Context, o market.Offer) error {
	body := wire.OfferBody{Offer: o, Addrs: r.Addrs(), HeartbeatMs: r.cfg.Heartbeat.Milliseconds(), Reach: wire.ReachPublic}
	if _, err := r.gossip.Publish(ctx, p2p.TopicOffers, wire.KindOffer, body); err != nil {
		return fmt.Errorf("rogue: publish offer: %w", err)
	}
	return nil
}
