package view

import (
	"slices"
	"strings"
	"time"
)

// KeepLost is how long the view remembers a provider that left it for
// missed heartbeats, so that a person sees it lost rather than gone
// without a word; MaxLost bounds how many it remembers, the most recently
// lost kept.
const (
	KeepLost = time.Hour
	MaxLost  = 64
)

// LostEntry is a provider that left the view: its last offer as the view
// held it, and when it was dropped.
type LostEntry struct {
	OfferEntry
	LostAt time.Time
}

// lostBook remembers the providers Expire dropped, newest last. Guarded
// by the Offers' mu.
type lostBook struct {
	entries []LostEntry
}

// add records e as lost at now, replacing an older record of it, and
// forgets the oldest past MaxLost.
func (b *lostBook) add(e OfferEntry, now time.Time) {
	b.drop(e.Offer.Provider)
	e.past = nil
	b.entries = append(b.entries, LostEntry{OfferEntry: e, LostAt: now})
	if len(b.entries) > MaxLost {
		b.entries = slices.Delete(b.entries, 0, len(b.entries)-MaxLost)
	}
}

// drop forgets provider: it came back.
func (b *lostBook) drop(provider string) {
	b.entries = slices.DeleteFunc(b.entries, func(l LostEntry) bool { return l.Offer.Provider == provider })
}

// forget drops what was lost more than KeepLost before now.
func (b *lostBook) forget(now time.Time) {
	b.entries = slices.DeleteFunc(b.entries, func(l LostEntry) bool { return now.Sub(l.LostAt) > KeepLost })
}

// Lost returns the providers that left the view for missed heartbeats
// within KeepLost of now and have not come back, sorted by provider.
func (v *Offers) Lost(now time.Time) []LostEntry {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lost.forget(now)
	out := make([]LostEntry, len(v.lost.entries))
	for i, l := range v.lost.entries {
		l.Offer.GPUs = slices.Clone(l.Offer.GPUs)
		l.Addrs = slices.Clone(l.Addrs)
		out[i] = l
	}
	slices.SortFunc(out, func(a, b LostEntry) int { return strings.Compare(a.Offer.Provider, b.Offer.Provider) })
	return out
}
