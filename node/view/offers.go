package view

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
)

// MissedHeartbeats is how many heartbeats a provider may miss before it
// leaves the view.
const MissedHeartbeats = 3

// OfferEntry is one provider in the view.
type OfferEntry struct {
	Offer     market.Offer
	Addrs     []string
	Reach     string // how peers reach the provider (wire.OfferBody.Reach)
	SignedAt  int64  // ms; an older offer never replaces a newer one
	LastSeen  time.Time
	Heartbeat time.Duration
	// prev is the offer this one replaced and when it arrived, so that an
	// epoch's view can take the offer as it stood at the epoch's cutoff.
	prev         market.Offer
	prevSeen     time.Time
	prevSignedAt int64
}

// Offers is this node's view of every provider's latest offer.
type Offers struct {
	mu         sync.Mutex // guards byProvider
	byProvider map[string]*OfferEntry
}

// NewOffers returns an empty view.
func NewOffers() *Offers {
	return &Offers{byProvider: make(map[string]*OfferEntry)}
}

// Apply records an offer; it reports whether the provider is new to the view.
func (v *Offers) Apply(b wire.OfferBody, signedAt int64, now time.Time) (isNew bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.byProvider[b.Offer.Provider]
	if ok && signedAt < e.SignedAt {
		return false
	}
	if !ok {
		e = &OfferEntry{}
		v.byProvider[b.Offer.Provider] = e
	}
	if ok && e.LastSeen.Before(now) {
		e.prev, e.prevSeen, e.prevSignedAt = e.Offer, e.LastSeen, e.SignedAt
	}
	e.Offer = b.Offer
	e.Addrs = b.Addrs
	e.Reach = b.Reach
	e.SignedAt = signedAt
	e.LastSeen = now
	e.Heartbeat = time.Duration(b.HeartbeatMs) * time.Millisecond
	return !ok
}

// Expire drops providers silent for MissedHeartbeats of their heartbeats and
// returns them.
func (v *Offers) Expire(now time.Time) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var gone []string
	for id, e := range v.byProvider {
		if now.Sub(e.LastSeen) > MissedHeartbeats*e.Heartbeat {
			delete(v.byProvider, id)
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	return gone
}

// Snapshot returns the entries sorted by provider.
func (v *Offers) Snapshot() []OfferEntry {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]OfferEntry, 0, len(v.byProvider))
	for _, e := range v.byProvider {
		c := *e
		c.Offer.GPUs = slices.Clone(e.Offer.GPUs)
		c.Addrs = slices.Clone(e.Addrs)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b OfferEntry) int { return strings.Compare(a.Offer.Provider, b.Offer.Provider) })
	return out
}

// SignedOffer is an offer with the time its provider signed it.
type SignedOffer struct {
	market.Offer
	SignedAt int64 // ms
}

// At returns every provider's offer as it stood at cutoff, sorted.
func (v *Offers) At(cutoff time.Time) []SignedOffer {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]SignedOffer, 0, len(v.byProvider))
	for _, e := range v.byProvider {
		switch {
		case !e.LastSeen.After(cutoff):
			out = append(out, SignedOffer{e.Offer, e.SignedAt})
		case !e.prevSeen.IsZero() && !e.prevSeen.After(cutoff):
			out = append(out, SignedOffer{e.prev, e.prevSignedAt})
		}
	}
	slices.SortFunc(out, func(a, b SignedOffer) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// Get returns one provider's entry.
func (v *Offers) Get(provider string) (OfferEntry, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.byProvider[provider]
	if !ok {
		return OfferEntry{}, false
	}
	c := *e
	c.Offer.GPUs = slices.Clone(e.Offer.GPUs)
	return c, true
}
