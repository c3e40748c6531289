package offer

import (
	"context"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/market"
	"github.com/ipfs/go-cid"
)

// minHeldBytes is the smallest root an offer names as held: below it,
// fetching costs less than a worse fit, and small roots would only crowd
// the summary's filter.
const minHeldBytes = 1 << 20

// holdingsCheckEvery is how often the publishing loop looks for a change in
// what the store holds, between heartbeats: a listing of the pins, and a
// size for each new one.
const holdingsCheckEvery = time.Second

// HeldStore is what the offer's holdings are read from (content.Store).
type HeldStore interface {
	Pins(ctx context.Context) ([]content.Pin, error)
	PinGeneration() uint64
	Size(ctx context.Context, root cid.Cid) (int64, error)
}

// heldContent summarizes, for the offer, every DAG the store keeps pinned:
// the inputs and images staged for leases (kept for the retention window
// after their release), their outputs and checkpoints, which a later job may
// read, and whatever this node submitted. Pins come and go with staging and
// retention; the publishing loop rebuilds the summary every
// holdingsCheckEvery and publishes the offer when it changed, so an offer
// names staged data within about a second. It belongs to that goroutine
// and has no lock.
type heldContent struct {
	store HeldStore
	sizes map[cid.Cid]int64 // of pinned roots, each sized once
	// last is the summary of the pins at generation gen; complete says
	// every root in it could be sized, so that nothing changes until the
	// pins do.
	last     market.Holdings
	gen      uint64
	complete bool
}

func newHeldContent(store HeldStore) *heldContent {
	return &heldContent{store: store, sizes: make(map[cid.Cid]int64)}
}

// summary returns the holdings to offer. A root whose DAG cannot be sized
// (not complete yet) is left out until it can; a failure to list the pins
// offers nothing rather than something stale.
func (h *heldContent) summary(ctx context.Context) (market.Holdings, error) {
	gen := h.store.PinGeneration()
	if h.complete && gen == h.gen {
		return h.last, nil
	}
	pins, err := h.store.Pins(ctx)
	if err != nil {
		h.complete = false
		return market.Holdings{}, err
	}
	complete := true
	pinned := make(map[cid.Cid]bool, len(pins))
	var held []market.Datum
	for _, p := range pins {
		pinned[p.Root] = true
		n, ok := h.sizes[p.Root]
		if !ok {
			if n, err = h.store.Size(ctx, p.Root); err != nil {
				complete = false
				continue
			}
			h.sizes[p.Root] = n
		}
		if n >= minHeldBytes {
			held = append(held, market.Datum{Root: p.Root.String(), Size: uint64(min(n, market.MaxInputSize))})
		}
	}
	for c := range h.sizes {
		if !pinned[c] {
			delete(h.sizes, c)
		}
	}
	h.last, h.gen, h.complete = market.NewHoldings(held), gen, complete
	return h.last, nil
}
