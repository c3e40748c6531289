package wire

import (
	"errors"
	"fmt"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/p2p/peertext"
	"github.com/libp2p/go-libp2p/core/peer"
)

// KindOffer is the message kind of a provider's offer on the offers topic.
const KindOffer = "offer"

// OfferBody is the wire form of an offer. Heartbeat tells every peer how soon
// to expect the next one, so a provider's absence is judged by its own
// schedule rather than the receiver's. GossipP99Ms is the p99 of the gossip
// delays the provider observed, 0 before it has any: every peer derives an
// epoch's delay from these announcements (view.DelayRule).
type OfferBody struct {
	Offer       market.Offer `json:"offer"`
	Addrs       []string     `json:"addrs"`
	HeartbeatMs int64        `json:"heartbeat_ms"`
	// Reach is how peers reach the provider, as it knows it: "public"
	// (dialled directly), "relayed" (behind a NAT, through a relay, direct
	// once a hole is punched), "private" (behind a NAT, no relay: the offer
	// is then marked Unreachable), or "" (not known).
	Reach       string `json:"reach,omitempty"`
	GossipP99Ms int64  `json:"gossip_p99_ms,omitempty"`
	// Currency names the unit of the offer's price (e31d --currency),
	// the same on every peer of a network; "" where the offer has none.
	Currency string `json:"currency,omitempty"`
}

// MaxCurrency bounds a currency's name.
const MaxCurrency = 16

// CurrencyName reports whether s may name a currency: at most
// MaxCurrency lowercase ASCII letters, digits and dashes, starting with a
// letter.
func CurrencyName(s string) bool {
	if len(s) > MaxCurrency {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return s != ""
}

// How a provider says peers reach it (OfferBody.Reach).
const (
	ReachPublic  = "public"
	ReachRelayed = "relayed"
	ReachPrivate = "private"
)

// MaxGossipP99Ms bounds an announced gossip delay. The delay rule clamps to
// half an epoch anyway; the bound only rejects nonsense.
const MaxGossipP99Ms = int64(time.Minute / time.Millisecond)

// Bounds on what a remote offer may say, so one peer cannot bloat every view.
const (
	MaxOfferGPUs  = 256
	MaxOfferAddrs = 32
	MaxStringLen  = 256
)

// ValidateOffer is the body validator of offers: structurally sound, and
// the provider named is the signer.
func ValidateOffer(s p2p.Signed) error {
	if s.Message.Kind != KindOffer {
		return fmt.Errorf("offers topic carries offers, not %q", s.Message.Kind)
	}
	var b OfferBody
	if err := s.Decode(&b); err != nil {
		return err
	}
	return b.Check(s.Signer)
}

// DecodeOffer is the body of an offer that ValidateOffer accepted (pubsub
// runs it before it delivers a message), with what a terminal would obey
// rather than show stripped from its GPUs' models (peertext.Clean). It does
// not check again what the validator checked: an offer with holdings costs
// a third more to check than to decode, and every heartbeat is decoded.
//
// A model is the driver's name for a device, shown by e31 nodes and the
// dashboard and compared by Match, and no signature covers it but the
// offer's envelope, already checked: so it is cleaned rather than refused,
// and every peer that decodes offers here holds the same view, free of
// escape sequences. Text that names something (a GPU's UUID, an address)
// is refused by Check instead: changed, it would name something else.
func DecodeOffer(s p2p.Signed) (OfferBody, error) {
	var b OfferBody
	if err := s.Decode(&b); err != nil {
		return OfferBody{}, err
	}
	for i := range b.Offer.GPUs {
		b.Offer.GPUs[i].Model = peertext.Clean(b.Offer.GPUs[i].Model)
	}
	return b, nil
}

// Check is what an offer must be to be believed: named for its signer,
// within the bounds that keep one peer from bloating every view, and with
// no control or bidi character in a GPU's UUID or an address, which name
// things and so cannot be cleaned (DecodeOffer cleans the models).
func (b OfferBody) Check(signer peer.ID) error {
	if b.Offer.Provider != signer.String() {
		return fmt.Errorf("%w: offer names provider %q but is signed by %s", p2p.ErrForged, b.Offer.Provider, signer)
	}
	if len(b.Offer.GPUs) > MaxOfferGPUs {
		return fmt.Errorf("offer lists %d GPUs, limit %d", len(b.Offer.GPUs), MaxOfferGPUs)
	}
	if len(b.Addrs) > MaxOfferAddrs {
		return fmt.Errorf("offer lists %d addresses, limit %d", len(b.Addrs), MaxOfferAddrs)
	}
	if err := b.Offer.Price.Check(); err != nil {
		return fmt.Errorf("offer price: %w", err)
	}
	if b.Currency != "" && !CurrencyName(b.Currency) {
		return fmt.Errorf("offer currency %q: want at most %d lowercase letters, digits or dashes", b.Currency, MaxCurrency)
	}
	switch b.Reach {
	case "", ReachPublic, ReachRelayed, ReachPrivate:
	default:
		return fmt.Errorf("offer reach %q: want public, relayed, private or nothing", b.Reach)
	}
	if b.HeartbeatMs < 50 || b.HeartbeatMs > int64(time.Hour/time.Millisecond) {
		return fmt.Errorf("offer heartbeat %dms out of range", b.HeartbeatMs)
	}
	if b.GossipP99Ms < 0 || b.GossipP99Ms > MaxGossipP99Ms {
		return fmt.Errorf("offer gossip p99 %dms out of range", b.GossipP99Ms)
	}
	if b.Offer.CPUs < 0 {
		return errors.New("offer has negative CPUs")
	}
	if !noDiskWord(b.Offer.NoDisk) {
		return fmt.Errorf("offer no_disk %q: want a word of at most %d lower-case letters and dashes", b.Offer.NoDisk, maxNoDiskLen)
	}
	if err := b.Offer.Holdings.Check(); err != nil {
		return fmt.Errorf("offer holdings: %w", err)
	}
	seenIdx := map[int]bool{}
	seenUUID := map[string]bool{}
	for i, g := range b.Offer.GPUs {
		if g.UUID == "" || len(g.UUID) > MaxStringLen || len(g.Model) > MaxStringLen {
			return fmt.Errorf("offer gpus[%d]: bad uuid or model", i)
		}
		if err := peertext.Check(g.UUID); err != nil {
			return fmt.Errorf("offer gpus[%d].uuid: %w", i, err)
		}
		if g.Index < 0 || seenIdx[g.Index] || seenUUID[g.UUID] {
			return fmt.Errorf("offer gpus[%d]: duplicate or negative index/uuid", i)
		}
		seenIdx[g.Index], seenUUID[g.UUID] = true, true
	}
	for i, a := range b.Addrs {
		if len(a) > MaxStringLen {
			return errors.New("offer address too long")
		}
		if err := peertext.Check(a); err != nil {
			return fmt.Errorf("offer addrs[%d]: %w", i, err)
		}
	}
	return nil
}

// maxNoDiskLen bounds the word an offer gives for lending no disk.
const maxNoDiskLen = 32

// noDiskWord reports whether s can be an offer's NoDisk: empty, or a short
// word such as market.DiskFull. Match treats any word alike, so a provider
// newer than this node may name a reason it does not know; e31 nodes shows
// it, so it is kept to letters and dashes.
func noDiskWord(s string) bool {
	if len(s) > maxNoDiskLen {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && c != '-' {
			return false
		}
	}
	return true
}
