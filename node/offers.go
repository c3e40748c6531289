package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// kindOffer is the message kind of a provider's offer on the offers topic.
const kindOffer = "offer"

// missedHeartbeats is how many heartbeats a provider may miss before it
// leaves the view.
const missedHeartbeats = 3

// offerBody is the wire form of an offer. Heartbeat tells every peer how soon
// to expect the next one, so a provider's absence is judged by its own
// schedule rather than the receiver's.
type offerBody struct {
	Offer       market.Offer `json:"offer"`
	Addrs       []string     `json:"addrs"`
	HeartbeatMs int64        `json:"heartbeat_ms"`
}

// Bounds on what a remote offer may say, so one peer cannot bloat every view.
const (
	maxOfferGPUs  = 256
	maxOfferAddrs = 32
	maxStringLen  = 256
)

// validateOffer is the body validator of offers: structurally sound, and
// the provider named is the signer.
func validateOffer(s p2p.Signed) error {
	if s.Message.Kind != kindOffer {
		return fmt.Errorf("offers topic carries offers, not %q", s.Message.Kind)
	}
	var b offerBody
	if err := s.Decode(&b); err != nil {
		return err
	}
	return b.check(s.Signer)
}

func (b offerBody) check(signer peer.ID) error {
	if b.Offer.Provider != signer.String() {
		return fmt.Errorf("%w: offer names provider %q but is signed by %s", p2p.ErrForged, b.Offer.Provider, signer)
	}
	if len(b.Offer.GPUs) > maxOfferGPUs {
		return fmt.Errorf("offer lists %d GPUs, limit %d", len(b.Offer.GPUs), maxOfferGPUs)
	}
	if len(b.Addrs) > maxOfferAddrs {
		return fmt.Errorf("offer lists %d addresses, limit %d", len(b.Addrs), maxOfferAddrs)
	}
	if b.HeartbeatMs < 50 || b.HeartbeatMs > int64(time.Hour/time.Millisecond) {
		return fmt.Errorf("offer heartbeat %dms out of range", b.HeartbeatMs)
	}
	if b.Offer.CPUs < 0 {
		return errors.New("offer has negative CPUs")
	}
	seenIdx := map[int]bool{}
	seenUUID := map[string]bool{}
	for i, g := range b.Offer.GPUs {
		if g.UUID == "" || len(g.UUID) > maxStringLen || len(g.Model) > maxStringLen {
			return fmt.Errorf("offer gpus[%d]: bad uuid or model", i)
		}
		if g.Index < 0 || seenIdx[g.Index] || seenUUID[g.UUID] {
			return fmt.Errorf("offer gpus[%d]: duplicate or negative index/uuid", i)
		}
		seenIdx[g.Index], seenUUID[g.UUID] = true, true
	}
	for _, a := range b.Addrs {
		if len(a) > maxStringLen {
			return errors.New("offer address too long")
		}
	}
	return nil
}

// offerEntry is one provider in the view.
type offerEntry struct {
	offer     market.Offer
	addrs     []string
	signedAt  int64 // ms; an older offer never replaces a newer one
	lastSeen  time.Time
	heartbeat time.Duration
	// prev is the offer this one replaced and when it arrived, so that an
	// epoch's view can take the offer as it stood at the epoch's cutoff.
	prev         market.Offer
	prevSeen     time.Time
	prevSignedAt int64
}

// offerView is this node's view of every provider's latest offer.
type offerView struct {
	mu         sync.Mutex // guards byProvider
	byProvider map[string]*offerEntry
}

func newOfferView() *offerView {
	return &offerView{byProvider: make(map[string]*offerEntry)}
}

// apply records an offer; it reports whether the provider is new to the view.
func (v *offerView) apply(b offerBody, signedAt int64, now time.Time) (isNew bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.byProvider[b.Offer.Provider]
	if ok && signedAt < e.signedAt {
		return false
	}
	if !ok {
		e = &offerEntry{}
		v.byProvider[b.Offer.Provider] = e
	}
	if ok && e.lastSeen.Before(now) {
		e.prev, e.prevSeen, e.prevSignedAt = e.offer, e.lastSeen, e.signedAt
	}
	e.offer = b.Offer
	e.addrs = b.Addrs
	e.signedAt = signedAt
	e.lastSeen = now
	e.heartbeat = time.Duration(b.HeartbeatMs) * time.Millisecond
	return !ok
}

// expire drops providers silent for missedHeartbeats of their heartbeats and
// returns them.
func (v *offerView) expire(now time.Time) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var gone []string
	for id, e := range v.byProvider {
		if now.Sub(e.lastSeen) > missedHeartbeats*e.heartbeat {
			delete(v.byProvider, id)
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	return gone
}

// snapshot returns the entries sorted by provider.
func (v *offerView) snapshot() []offerEntry {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]offerEntry, 0, len(v.byProvider))
	for _, e := range v.byProvider {
		c := *e
		c.offer.GPUs = slices.Clone(e.offer.GPUs)
		c.addrs = slices.Clone(e.addrs)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b offerEntry) int { return strings.Compare(a.offer.Provider, b.offer.Provider) })
	return out
}

// signedOffer is an offer with the time its provider signed it.
type signedOffer struct {
	market.Offer
	signedAt int64 // ms
}

// at returns every provider's offer as it stood at cutoff, sorted.
func (v *offerView) at(cutoff time.Time) []signedOffer {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]signedOffer, 0, len(v.byProvider))
	for _, e := range v.byProvider {
		switch {
		case !e.lastSeen.After(cutoff):
			out = append(out, signedOffer{e.offer, e.signedAt})
		case !e.prevSeen.IsZero() && !e.prevSeen.After(cutoff):
			out = append(out, signedOffer{e.prev, e.prevSignedAt})
		}
	}
	slices.SortFunc(out, func(a, b signedOffer) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// get returns one provider's entry.
func (v *offerView) get(provider string) (offerEntry, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.byProvider[provider]
	if !ok {
		return offerEntry{}, false
	}
	c := *e
	c.offer.GPUs = slices.Clone(e.offer.GPUs)
	return c, true
}
