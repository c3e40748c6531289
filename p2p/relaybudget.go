package p2p

import (
	"net"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Kinds of byte budget a relay keeps for its data circuits: label values
// of e31_relay_budgets_spent_total.
const (
	// BudgetPeer is what one peer's circuits may carry in a window.
	BudgetPeer = "peer"
	// BudgetPrefix is what the circuits of every peer behind one address
	// prefix (RelayLimits.PrefixV4, PrefixV6) may carry in a window: what
	// bounds a Sybil, whose peer IDs are free but whose addresses are not.
	BudgetPrefix = "prefix"
)

// Default address prefixes a relay counts as one address: a home
// connection has one IPv4 address, and an IPv6 /64 (the least a provider
// hands a site).
const (
	DefaultPrefixV4 = 32
	DefaultPrefixV6 = 64
)

// DefaultBudgetWindow is the window a relay's byte budgets are spent over
// when RelayLimits.BudgetWindow is zero.
const DefaultBudgetWindow = 24 * time.Hour

// budgetKey names one budget: a peer's, or an address prefix's.
type budgetKey struct {
	kind string // BudgetPeer or BudgetPrefix
	id   string // the peer ID, or the prefix in CIDR form
}

// budgetUse is what a budget has carried in its window, which starts with
// its first byte: a fixed window per budget, so that what a peer may move
// is plain to read off a scrape (so much since then), and a new window
// gives the whole budget back.
type budgetUse struct {
	start time.Time
	bytes int64
}

// relayBudgets are the bytes a relay carries on data circuits, counted
// against the budget of each end's peer and each end's address prefix
// over a window, so that neither a peer nor a crowd of peers behind one
// address can make a relay that carries data carry more than its operator
// allowed.
type relayBudgets struct {
	// Immutable after newRelayBudgets. A zero bound is no bound.
	perPeer, perPrefix int64
	window             time.Duration
	now                func() time.Time

	mu sync.Mutex // guards used; memory only
	// used holds each budget that carried something in its window.
	used map[budgetKey]*budgetUse
}

// maxBudgets bounds the budgets a relay remembers at once: past it, those
// whose window has ended are forgotten, and while every one is still in
// its window, a budget not yet known counts as spent (the relay is full).
const maxBudgets = 1 << 15

func newRelayBudgets(perPeer, perPrefix int64, window time.Duration, now func() time.Time) *relayBudgets {
	if window <= 0 {
		window = DefaultBudgetWindow
	}
	return &relayBudgets{perPeer: perPeer, perPrefix: perPrefix, window: window, now: now, used: make(map[budgetKey]*budgetUse)}
}

// bounded reports whether any budget bounds the relay.
func (b *relayBudgets) bounded() bool { return b.perPeer > 0 || b.perPrefix > 0 }

// limit is the bound of a budget of kind; 0: none.
func (b *relayBudgets) limit(kind string) int64 {
	if kind == BudgetPeer {
		return b.perPeer
	}
	return b.perPrefix
}

// keys are the budgets a circuit between src and dest, each seen at its
// own address (prefix, as prefixOf gives; "" when it has none), is counted
// against: each end's peer and each end's prefix, each once, and only the
// kinds that are bounded.
func (b *relayBudgets) keys(src peer.ID, srcPrefix string, dest peer.ID, destPrefix string) []budgetKey {
	var out []budgetKey
	add := func(k budgetKey) {
		if k.id == "" || b.limit(k.kind) <= 0 {
			return
		}
		for _, o := range out {
			if o == k {
				return
			}
		}
		out = append(out, k)
	}
	add(budgetKey{BudgetPeer, string(src)})
	add(budgetKey{BudgetPeer, string(dest)})
	add(budgetKey{BudgetPrefix, srcPrefix})
	add(budgetKey{BudgetPrefix, destPrefix})
	return out
}

// spent returns a budget of keys that has nothing left in its window.
func (b *relayBudgets) spent(keys []budgetKey) (budgetKey, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for _, k := range keys {
		if b.leftLocked(k, now) <= 0 {
			return k, true
		}
	}
	return budgetKey{}, false
}

// charge counts n bytes against every budget of keys, and returns one that
// this left with nothing, with whether there is one. The bytes are counted
// in full even past a bound: they were carried.
func (b *relayBudgets) charge(keys []budgetKey, n int64) (budgetKey, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	var out budgetKey
	found := false
	for _, k := range keys {
		u := b.useLocked(k, now)
		if u == nil {
			out, found = k, true
			continue
		}
		u.bytes += n
		if u.bytes >= b.limit(k.kind) && !found {
			out, found = k, true
		}
	}
	return out, found
}

// leftLocked is what budget k has left at now. The caller holds b.mu.
func (b *relayBudgets) leftLocked(k budgetKey, now time.Time) int64 {
	u, ok := b.used[k]
	if !ok || !now.Before(u.start.Add(b.window)) {
		if !ok && len(b.used) >= maxBudgets && !b.pruneLocked(now) {
			return 0 // every budget remembered is still in its window: full
		}
		return b.limit(k.kind)
	}
	return b.limit(k.kind) - u.bytes
}

// useLocked is the use of budget k in the window that holds now, started
// now if none does; nil when the relay remembers as many budgets as it
// may, all still in their windows. The caller holds b.mu.
func (b *relayBudgets) useLocked(k budgetKey, now time.Time) *budgetUse {
	u, ok := b.used[k]
	if ok && now.Before(u.start.Add(b.window)) {
		return u
	}
	if !ok && len(b.used) >= maxBudgets && !b.pruneLocked(now) {
		return nil
	}
	u = &budgetUse{start: now}
	b.used[k] = u
	return u
}

// pruneLocked forgets the budgets whose window ended, and reports whether
// that made room. The caller holds b.mu.
func (b *relayBudgets) pruneLocked(now time.Time) bool {
	for k, u := range b.used {
		if !now.Before(u.start.Add(b.window)) {
			delete(b.used, k)
		}
	}
	return len(b.used) < maxBudgets
}

// prefixOf is the address prefix a reaches the relay from, in CIDR form,
// v4 bits of an IPv4 address or v6 of an IPv6 one; "" for an address
// without an IP.
func prefixOf(a ma.Multiaddr, v4, v6 int) string {
	if a == nil {
		return ""
	}
	ip, err := manet.ToIP(a)
	if err != nil {
		return ""
	}
	bits, size := v6, 128
	if ip4 := ip.To4(); ip4 != nil {
		ip, bits, size = ip4, v4, 32
	}
	bits = min(max(bits, 0), size)
	n := net.IPNet{IP: ip.Mask(net.CIDRMask(bits, size)), Mask: net.CIDRMask(bits, size)}
	return n.String()
}
