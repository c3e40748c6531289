package p2p

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
)

// RelayPeers is what a relay service asks of the network it serves. A
// relay is open to anyone who can dial it, yet its slots and its uplink
// are the network's: p2p sees only connections, and the node, which reads
// the network's topics, says who belongs and who holds a lease with whom.
// Its methods are called on the relay's goroutines, for every reservation
// and circuit and, while a circuit carries bytes, about once a second:
// they must answer from memory, at once.
type RelayPeers interface {
	// Member reports whether p has been seen as a peer of the network:
	// the signer of a message accepted on its topics, or a party of a
	// lease announced there.
	Member(p peer.ID) bool
	// Paired reports whether a and b may move a lease's data between
	// them now: the two parties of a lease announced and not yet
	// released, or the providers of two parts of one gang.
	Paired(a, b peer.ID) bool
	// Joined returns a channel closed the next time a peer becomes a
	// member, so that a reservation waiting for its peer looks again at
	// once rather than on a timer.
	Joined() <-chan struct{}
}

// Why a relay refused a reservation or a circuit, or ended a circuit:
// label values of e31_relay_reservations_refused_total,
// e31_relay_circuits_refused_total and e31_relay_circuits_ended_total.
const (
	// relayStranger: a peer never seen as a member of the network (a
	// reservation, after RelayLimits.ReserveWait; either end of a circuit).
	relayStranger = "stranger"
	// relayBusy: as many reservations wait for their peers to be seen as
	// the relay lets wait, from everyone or from the peer's address.
	relayBusy = "busy"
	// relayFull: every slot is taken (RelayLimits.MaxReservations).
	relayFull = "full"
	// relayCrowded: the peer's address prefix holds as many slots as one
	// address may.
	relayCrowded = "address"
	// relayOverRelay: asked over a relayed connection.
	relayOverRelay = "relayed"
	// relayNoSlot: a circuit to a peer that holds no slot.
	relayNoSlot = "no-reservation"
	// relayQuota: the source's circuits of the day are spent
	// (RelayLimits.CircuitsPerDay).
	relayQuota = "quota"
	// relayCircuits: an end has as many circuits open as one peer may.
	relayCircuits = "circuits"
	// relayMalformed: a request the relay could not read.
	relayMalformed = "malformed"
	// relayBudget: refused, a circuit between a lease's parties gets no
	// data (it is marked limited) for an end's spent byte budget; ended,
	// a budget ran out on a data circuit.
	relayBudget = "budget"
	// relayAllowance: a circuit between members who hold no live lease
	// together carried what a limited circuit may (RelayLimits.Data's
	// default, 128 KiB each way), and no lease came within PairWait.
	relayAllowance = "allowance"
	// relayUnpaired: such a circuit lasted as long as a limited one may
	// (2 minutes) with no live lease between its ends.
	relayUnpaired = "unpaired"
)

// What a relay's bytes were counted against: label values of
// e31_relay_bytes_total.
const (
	// relayBytesData: carried between a live lease's parties on a
	// circuit that carries data, counted against the byte budgets.
	relayBytesData = "data"
	// relayBytesControl: carried on a limited circuit, or between peers
	// with no live lease together, counted against each circuit's own
	// allowance.
	relayBytesControl = "control"
)

// circuitClass is what a relay lets a circuit carry.
type circuitClass int

const (
	// circuitLimited: marked limited, so its ends send it only their
	// control messages (a proposal, a hole punch's coordination), within
	// the relay's limit on a circuit.
	circuitLimited circuitClass = iota + 1
	// circuitMember: unmarked, between two members of the network on a
	// relay that carries data. It carries a lease's data while its ends
	// are paired, counted against their byte budgets, and otherwise no
	// more than a limited circuit would.
	circuitMember
)

// Bounds on the reservations a relay holds open while their peers are not
// yet seen (RelayLimits.ReserveWait): each is a stream and a goroutine.
const (
	maxWaiting          = 1024
	maxWaitingPerPrefix = 8
)

// relayGate decides, for a relay service, who gets a slot and what each
// circuit may carry: go-libp2p's circuit relay gives every circuit the
// same limit, and E31's must tell the network's peers from strangers and
// a lease's parties from other members.
type relayGate struct {
	// Immutable after newRelayGate.
	peers RelayPeers    // nil: every peer a member, every pair paired
	data  bool          // circuits between members may carry data
	wait  time.Duration // how long a reservation waits for its peer to be seen
	// pairWait is how long a member circuit past its allowance waits for
	// its ends to be paired before it is cut.
	pairWait time.Duration
	quota    *circuitQuota // nil: no bound on circuits a day
	budgets  *relayBudgets
	v4, v6   int
	stats    *relayStats
	log      *slog.Logger

	mu sync.Mutex // guards waiting and waitingFrom; memory only
	// waiting counts the reservations waiting for their peers to be
	// seen, waitingFrom the same by address prefix.
	waiting     int
	waitingFrom map[string]int
}

// DefaultReserveWait is how long a relay holds the reservation of a peer
// it has not seen in the network's topics (RelayLimits.ReserveWait's
// zero): under a minute, the time a libp2p host waits for the answer
// (circuitv2/client's ReserveTimeout).
const DefaultReserveWait = 45 * time.Second

// DefaultPairWait is how long a circuit between members that carried
// its allowance waits, its bytes unread, for its ends' lease to be
// announced before it is cut (RelayLimits.PairWait's zero): a lease's data
// may start a moment before its announcement reaches the relay, and a
// submitter announces its array's task leases in batches, about once a
// second.
const DefaultPairWait = 5 * time.Second

func newRelayGate(l RelayLimits, stats *relayStats) *relayGate {
	g := &relayGate{
		peers:       l.Peers,
		data:        l.Data < 0,
		wait:        l.ReserveWait,
		budgets:     newRelayBudgets(l.BudgetPeer, l.BudgetPrefix, l.BudgetWindow, time.Now),
		v4:          l.PrefixV4,
		v6:          l.PrefixV6,
		stats:       stats,
		log:         l.Log,
		waitingFrom: make(map[string]int),
	}
	if g.wait == 0 {
		g.wait = DefaultReserveWait
	}
	if g.pairWait = l.PairWait; g.pairWait <= 0 {
		g.pairWait = DefaultPairWait
	}
	if g.v4 == 0 {
		g.v4 = DefaultPrefixV4
	}
	if g.v6 == 0 {
		g.v6 = DefaultPrefixV6
	}
	if n := l.CircuitsPerDay; n > 0 {
		g.quota = newCircuitQuota(n, 24*time.Hour, time.Now)
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	return g
}

func (g *relayGate) member(p peer.ID) bool { return g.peers == nil || g.peers.Member(p) }

func (g *relayGate) paired(a, b peer.ID) bool { return g.peers == nil || g.peers.Paired(a, b) }

// prefix is the address prefix a counts as, for budgets and slots.
func (g *relayGate) prefix(a ma.Multiaddr) string { return prefixOf(a, g.v4, g.v6) }

// reserve decides the reservation of p, which reaches the relay at a; it
// returns why not when it refuses. A member gets its slot at once. A peer
// not yet seen waits up to g.wait for its first message to arrive: a node
// behind a NAT asks for its slots the moment it starts, before its first
// offer or declaration can have reached the relay, and a refused host asks
// again only RelaySlotRetry later. ctx ends the wait with the relay.
func (g *relayGate) reserve(ctx context.Context, p peer.ID, a ma.Multiaddr) (bool, string) {
	if g.member(p) {
		return true, ""
	}
	if g.wait < 0 {
		return false, relayStranger
	}
	prefix := g.prefix(a)
	if !g.startWait(prefix) {
		return false, relayBusy
	}
	defer g.endWait(prefix)
	deadline := time.NewTimer(g.wait)
	defer deadline.Stop()
	for {
		// Joined before Member: a peer that joins in between closes
		// this channel, not the next.
		joined := g.peers.Joined()
		if g.member(p) {
			return true, ""
		}
		select {
		case <-ctx.Done():
			return false, relayStranger
		case <-deadline.C:
			return g.member(p), relayStranger
		case <-joined:
		}
	}
}

func (g *relayGate) startWait(prefix string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.waiting >= maxWaiting || g.waitingFrom[prefix] >= maxWaitingPerPrefix {
		return false
	}
	g.waiting++
	g.waitingFrom[prefix]++
	return true
}

func (g *relayGate) endWait(prefix string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting--
	if g.waitingFrom[prefix]--; g.waitingFrom[prefix] <= 0 {
		delete(g.waitingFrom, prefix)
	}
}

// circuit decides a circuit from src to dest, each reaching the relay
// from its prefix: refused (why), limited, or, on a relay that carries
// data, a member circuit counted against budgets.
func (g *relayGate) circuit(src peer.ID, srcPrefix string, dest peer.ID, destPrefix string) (circuitClass, []budgetKey, string) {
	switch {
	case !g.member(src), !g.member(dest):
		return 0, nil, relayStranger
	case g.quota != nil && !g.quota.AllowConnect(src, nil, dest):
		return 0, nil, relayQuota
	case !g.data:
		return circuitLimited, nil, ""
	}
	keys := g.budgets.keys(src, srcPrefix, dest, destPrefix)
	if k, spent := g.budgets.spent(keys); spent {
		// Its ends may still exchange a lease's messages; a lease's data
		// waits for a hole, then fails naming why, as with a relay that
		// carries none.
		if g.paired(src, dest) {
			g.stats.circuitsRefused.WithLabelValues(relayBudget).Inc()
			g.log.Debug("relay gives a limited circuit: a byte budget is spent", "src", src, "dest", dest, "budget", k.kind, "of", k.id)
		}
		return circuitLimited, nil, ""
	}
	return circuitMember, keys, ""
}

// charge counts n bytes of a data circuit against keys, and reports
// whether a budget is now spent.
func (g *relayGate) charge(keys []budgetKey, n int64) bool {
	g.stats.bytes.WithLabelValues(relayBytesData).Add(float64(n))
	if len(keys) == 0 {
		return false
	}
	k, spent := g.budgets.charge(keys, n)
	if spent {
		g.stats.budgetsSpent.WithLabelValues(k.kind).Inc()
		g.log.Info("relay byte budget spent: data circuits refused until its window ends", "budget", k.kind, "of", k.id,
			"bytes", g.budgets.limit(k.kind), "window", g.budgets.window)
	}
	return spent
}

// relayStats are a relay's E31 series, beside libp2p's libp2p_relaysvc_*.
type relayStats struct {
	reservationsRefused *prometheus.CounterVec // by reason
	circuitsRefused     *prometheus.CounterVec // by reason
	circuitsEnded       *prometheus.CounterVec // by reason
	bytes               *prometheus.CounterVec // by circuit: data or control
	budgetsSpent        *prometheus.CounterVec // by budget: peer or prefix
}

// newRelayStats makes a relay's series, every label value at 0, and
// registers them in reg (none: they count unseen). A series reg holds
// already, from a relay that ran before on the same host, goes on.
func newRelayStats(reg prometheus.Registerer) *relayStats {
	vec := func(name, help, label string, values ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
		for _, x := range values {
			v.WithLabelValues(x)
		}
		if reg == nil {
			return v
		}
		if err := reg.Register(v); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if old, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					return old
				}
			}
		}
		return v
	}
	return &relayStats{
		reservationsRefused: vec("e31_relay_reservations_refused_total",
			"Relay slots this relay refused, by reason: stranger (never seen in the network's topics), busy, full, address (too many from one address prefix), relayed.",
			"reason", relayStranger, relayBusy, relayFull, relayCrowded, relayOverRelay),
		circuitsRefused: vec("e31_relay_circuits_refused_total",
			"Circuits this relay refused, by reason: stranger (an end never seen in the network's topics), no-reservation, quota (circuits a day), circuits (too many open), relayed, malformed; budget counts a lease's circuit given no data for a spent byte budget.",
			"reason", relayStranger, relayNoSlot, relayQuota, relayCircuits, relayOverRelay, relayMalformed, relayBudget),
		circuitsEnded: vec("e31_relay_circuits_ended_total",
			"Circuits this relay cut, by reason: allowance and unpaired (peers with no live lease together past what a limited circuit carries), budget (a byte budget ran out).",
			"reason", relayAllowance, relayUnpaired, relayBudget),
		bytes: vec("e31_relay_bytes_total",
			"Bytes this relay carried, by what they counted against: data (a live lease's parties, against the byte budgets of each end's peer and address prefix) or control (each circuit's own limit).",
			"circuit", relayBytesData, relayBytesControl),
		budgetsSpent: vec("e31_relay_budgets_spent_total",
			"Byte budgets that ran out, by kind: peer or prefix (an address prefix).",
			"budget", BudgetPeer, BudgetPrefix),
	}
}
