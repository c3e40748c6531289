package view

import (
	"cmp"
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
	Offer market.Offer
	Addrs []string
	Reach string // how peers reach the provider (wire.OfferBody.Reach)
	// Currency names the unit of the offer's price (wire.OfferBody.Currency).
	Currency  string
	SignedAt  int64 // ms; an older offer never replaces a newer one
	LastSeen  time.Time
	Heartbeat time.Duration
	// GossipP99Ms is the p99 gossip delay the provider announced (0: none
	// yet); see DelayRule.
	GossipP99Ms int64
	// FirstSeen is when its first offer arrived, since it last joined the
	// view: how long this node has known it (Bounds.SeenSince).
	FirstSeen time.Time
	// past holds the offers this one replaced (and any older ones that
	// arrived after it), oldest first, so that an
	// epoch's view can take the offer as it stood at the epoch's cutoff even
	// when the provider re-published within the epoch delay.
	past []offerVersion
}

// offerVersion is one offer a provider published, as the cut needs it.
type offerVersion struct {
	offer       market.Offer
	signedAt    int64 // ms
	seen        time.Time
	gossipP99Ms int64
}

// keptOfferVersions bounds the past offers kept per provider: enough for a
// provider that changes its offer a few times within half an epoch (every
// lease and release does), and small, since every view holds it for every
// provider.
const keptOfferVersions = 4

// stamp is what an epoch's cut needs of an offer.
func stamp(signedAt int64, seen time.Time) Stamp {
	return Stamp{Signed: time.UnixMilli(signedAt), Arrived: seen}
}

// Offers is this node's view of every provider's latest offer.
type Offers struct {
	mu         sync.Mutex // guards byProvider and lost; a state lock, held only over memory
	byProvider map[string]*OfferEntry
	lost       lostBook // the providers Expire dropped, for a while
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
		// Overtaken on the way: it is no longer the provider's word, but
		// it may be the offer an epoch's cut needs.
		e.keep(offerVersion{b.Offer, signedAt, now, b.GossipP99Ms})
		return false
	}
	if !ok {
		e = &OfferEntry{FirstSeen: now}
		v.byProvider[b.Offer.Provider] = e
		v.lost.drop(b.Offer.Provider)
	}
	if ok {
		e.keep(offerVersion{e.Offer, e.SignedAt, e.LastSeen, e.GossipP99Ms})
	}
	e.Offer = b.Offer
	e.Addrs = b.Addrs
	e.Reach, e.Currency = b.Reach, b.Currency
	e.SignedAt = signedAt
	e.LastSeen = now
	e.Heartbeat = time.Duration(b.HeartbeatMs) * time.Millisecond
	e.GossipP99Ms = b.GossipP99Ms
	return !ok
}

// keep adds a past offer in signing order, keeping the newest
// keptOfferVersions.
func (e *OfferEntry) keep(o offerVersion) {
	i, _ := slices.BinarySearchFunc(e.past, o.signedAt, func(p offerVersion, t int64) int { return cmp.Compare(p.signedAt, t) })
	e.past = slices.Insert(e.past, i, o)
	if len(e.past) > keptOfferVersions {
		e.past = slices.Delete(e.past, 0, len(e.past)-keptOfferVersions)
	}
}

// Expire drops providers silent for MissedHeartbeats of their heartbeats and
// returns them; Lost lists them for a while.
func (v *Offers) Expire(now time.Time) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var gone []string
	for id, e := range v.byProvider {
		if now.Sub(e.LastSeen) > MissedHeartbeats*e.Heartbeat {
			delete(v.byProvider, id)
			v.lost.add(*e, now)
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	return gone
}

// Len is how many providers the view holds.
func (v *Offers) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.byProvider)
}

// Snapshot returns the entries sorted by provider.
func (v *Offers) Snapshot() []OfferEntry {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]OfferEntry, 0, len(v.byProvider))
	for _, e := range v.byProvider {
		c := *e
		c.Offer.GPUs = slices.Clone(e.Offer.GPUs)
		c.past = nil
		c.Addrs = slices.Clone(e.Addrs)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b OfferEntry) int { return strings.Compare(a.Offer.Provider, b.Offer.Provider) })
	return out
}

// SignedOffer is an offer with the time its provider signed it and the
// gossip delay it announced.
type SignedOffer struct {
	market.Offer
	SignedAt    int64 // ms
	GossipP99Ms int64
}

// At returns every provider's offer as the epoch starting at start sees it
// at cutoff, sorted: the newest offer that counts (Stamp.In). Peers whose
// gossip brought them every offer signed by the cutoff before the start
// hold the same offers, whatever order those arrived in and however late
// they cut.
func (v *Offers) At(cutoff, start time.Time) []SignedOffer {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]SignedOffer, 0, len(v.byProvider))
	for _, e := range v.byProvider {
		if stamp(e.SignedAt, e.LastSeen).In(cutoff, start) {
			out = append(out, SignedOffer{e.Offer, e.SignedAt, e.GossipP99Ms})
			continue
		}
		for i := len(e.past) - 1; i >= 0; i-- {
			if p := e.past[i]; stamp(p.signedAt, p.seen).In(cutoff, start) {
				out = append(out, SignedOffer{p.offer, p.signedAt, p.gossipP99Ms})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b SignedOffer) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// FirstSeen is when provider's first offer arrived, if it is in the view:
// the Market's Bounds.SeenSince. It takes only the Offers lock, so a
// Market may call it with its own held.
func (v *Offers) FirstSeen(provider string) (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.byProvider[provider]
	if !ok {
		return time.Time{}, false
	}
	return e.FirstSeen, true
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
	c.past = nil
	return c, true
}
