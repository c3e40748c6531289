package p2p

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
)

// Reachability says how a host that may sit behind a NAT or a firewall is
// still reached by its peers. The zero value turns everything off, which is
// what tests and the testnet on loopback use: with it a host never asks a
// router for a port, never dials a relay, and sends nothing to an address it
// was not given. A production daemon turns on what its operator asked for;
// see doc.go for what each switch does on the wire.
type Reachability struct {
	// AutoNAT runs AutoNAT v2: the host asks peers to dial each of its
	// addresses back, so it learns which of them are reachable, and answers
	// such requests from others. Off by default.
	AutoNAT bool
	// AutoNATService answers AutoNAT v1 dial-back requests from peers that
	// are still learning whether they are reachable. It only runs while the
	// host itself is public. Off by default.
	AutoNATService bool
	// Force skips detection and fixes the host's reachability: ReachPublic
	// for a bootstrap peer on a public address (so that its relay service
	// starts at once), ReachPrivate for a host known to be behind a NAT (so
	// that it reserves relay slots at once). ReachUnknown (the default) lets
	// AutoNAT decide.
	Force Reach
	// PortMap asks the home router for a port mapping over UPnP or NAT-PMP,
	// and advertises the mapped address. Off by default.
	PortMap bool
	// HolePunch runs DCUtR: two hosts connected through a relay dial each
	// other at the same moment to open a direct connection through both
	// NATs. Off by default.
	HolePunch bool
	// HolePunchTimeout bounds each direct dial of a hole punch. Zero means
	// libp2p's default (10 s).
	HolePunchTimeout time.Duration
	// OnHolePunch, if set, is told the outcome of every hole punch this host
	// takes part in, so the daemon can say why a transfer waits. It is called
	// from libp2p's goroutines and must not block.
	OnHolePunch func(HolePunchResult)
	// RelayClient lets the host dial and accept connections through circuit
	// relay v2, and, while AutoNAT (or Force) finds it private, reserve a
	// slot on relays and advertise the relayed addresses. The relays come
	// from StaticRelays (usually the bootstrap peers). Off by default.
	RelayClient bool
	// StaticRelays are the relays a private host reserves slots on. Required
	// when RelayClient is on.
	StaticRelays []peer.AddrInfo
	// RelayRetry is how soon the relay client asks a relay that refused it
	// a slot again. Zero: RelaySlotRetry.
	RelayRetry time.Duration
	// RelayService serves as a circuit v2 relay for others while this host
	// is public (set Force to ReachPublic to serve without waiting for
	// AutoNAT), to the peers RelayLimits.Peers names. Off by default.
	RelayService bool
	// RelayLimits bounds the relay service. Zero fields take libp2p's
	// defaults.
	RelayLimits RelayLimits
}

// RelayLimits bound what a relay service spends on others. libp2p's defaults
// fit control traffic only: 128 KiB and 2 minutes per relayed connection,
// which is too little for staging a data set and is meant to be: bulk data
// should go over a hole-punched direct connection.
type RelayLimits struct {
	// Data is how many bytes each relayed connection may carry in each
	// direction before the relay resets it. Zero: 128 KiB. Negative: no
	// limit, neither on bytes nor on time, for a circuit whose ends hold a
	// live lease together (a relay told to carry bulk data; see Peers); a
	// circuit between other members carries 128 KiB each way.
	Data int64
	// Duration is how long a relayed connection may last; on a relay that
	// carries data, how long a circuit lasts with no live lease between
	// its ends. Zero: 2 minutes.
	Duration time.Duration
	// MaxReservations is how many peers may hold a slot at once. Zero: 128.
	MaxReservations int
	// MaxCircuits is how many relayed connections one peer may have open at
	// once. Zero: 16.
	MaxCircuits int
	// ReservationTTL is how long a slot lasts before the peer must refresh
	// it. Zero: 1 hour.
	ReservationTTL time.Duration
	// CircuitsPerDay is how many relayed connections one peer may open in
	// any 24 hours. Zero: no bound.
	CircuitsPerDay int
	// Metrics, when set, receives the relay service's series: libp2p's
	// libp2p_relaysvc_* (reservations, circuits, bytes carried) and E31's
	// e31_relay_* (what it refused and cut, and why; bytes by what they
	// counted against).
	Metrics prometheus.Registerer

	// Peers says who the relay serves: a slot only to a member of the
	// network, a circuit only between two members, and, where Data is
	// negative, a lease's data only between a pair it calls paired. Nil
	// serves anyone, and lets any circuit carry data (a relay with no
	// network to ask, as in tests of the relay itself).
	Peers RelayPeers
	// PairWait is how long, on a relay that carries data, a circuit
	// between members that carried what a limited circuit may holds its
	// next bytes, unread, for its ends to be paired before it is cut.
	// Zero: DefaultPairWait.
	PairWait time.Duration
	// ReserveWait is how long the reservation of a peer not yet a member
	// is held open for it to become one before it is refused. Zero:
	// DefaultReserveWait; negative: refused at once.
	ReserveWait time.Duration
	// BudgetPeer and BudgetPrefix bound, in bytes, what the data circuits
	// of one peer, and of every peer behind one address prefix, may carry
	// in BudgetWindow (zero: DefaultBudgetWindow); a circuit carries data
	// while its ends hold a live lease together, and each byte counts
	// against the budgets of both ends. Once one is spent, the circuit is
	// cut and its peers' circuits are marked limited until the window
	// ends. Zero: no bound.
	BudgetPeer, BudgetPrefix int64
	BudgetWindow             time.Duration
	// PrefixV4 and PrefixV6 are the bits of an address that make one
	// address prefix, for BudgetPrefix and for the slots one address may
	// hold (MaxReservationsPerIP). Zero: DefaultPrefixV4 (32: one IPv4
	// address) and DefaultPrefixV6 (64). Every host of a test on
	// 127.0.0.1 is one prefix; PrefixV4 8 makes all of 127/8 one, and
	// hosts on 127.0.0.1 and 127.0.0.2 are two with the default.
	PrefixV4, PrefixV6 int
	// Log receives the relay's refusals and cuts at debug level, a spent
	// budget at info. Nil: discarded.
	Log *slog.Logger
	// Panicked, if set, is told of every panic recovered from the relay's
	// handling of a request or a circuit (where PanicRelay).
	Panicked func(where string)
}

// RelaySlotRetry is how soon a relay client asks a relay that refused it a
// slot again (go-libp2p's autorelay waits an hour). A relay of an E31
// network refuses a peer it has not yet seen in the network's topics once
// RelayLimits.ReserveWait has passed, as it may for a node that has sent
// nothing yet (a submitter before its first job): its next try, this much
// later, is answered at once if a message of its has arrived meanwhile.
const RelaySlotRetry = 15 * time.Second

// relayPeerSourceEvery bounds how often autorelay reads the static relays
// again (its WithMinInterval, 30 s by default): a refused relay comes back
// as a candidate at that pace once its retry is due.
const relayPeerSourceEvery = 5 * time.Second

// HolePunchAttempts is how many times libp2p's hole punching tries with a
// peer before it gives up (its holepunch maxRetries): each try ends in a
// HolePunchResult, so one failure is not yet the punch's.
const HolePunchAttempts = 3

// HolePunchResult is the outcome of one try of a hole punch with a peer.
type HolePunchResult struct {
	Peer    peer.ID
	Success bool
	Elapsed time.Duration
	// Err says why the punch failed; empty on success.
	Err string
}

// Reach is a host's reachability as AutoNAT last reported it.
type Reach int

const (
	// ReachUnknown: not yet learned (or AutoNAT could not tell).
	ReachUnknown Reach = iota
	// ReachPublic: peers can dial this host directly.
	ReachPublic
	// ReachPrivate: peers cannot dial this host; it needs a relay or a hole
	// punch to be reached.
	ReachPrivate
)

func (r Reach) String() string {
	switch r {
	case ReachPublic:
		return "public"
	case ReachPrivate:
		return "private"
	default:
		return "unknown"
	}
}

// ErrNoStaticRelays is returned by NewHost when the relay client is on but no
// relay is named.
var ErrNoStaticRelays = errors.New("relay client needs at least one static relay")

// options turns the reachability settings into libp2p options. The zero value
// gives exactly the options a host had before any of this existed: relay
// transport off, no port mapping, no hole punching.
func (r Reachability) options() ([]libp2p.Option, error) {
	var opts []libp2p.Option
	if r.RelayClient || r.RelayService {
		// The relay transport is needed to dial through a relay, to accept a
		// relayed connection, and by the relay service itself.
		opts = append(opts, libp2p.EnableRelay())
	} else {
		opts = append(opts, libp2p.DisableRelay())
	}
	if r.RelayClient {
		if len(r.StaticRelays) == 0 {
			return nil, ErrNoStaticRelays
		}
		retry := r.RelayRetry
		if retry <= 0 {
			retry = RelaySlotRetry
		}
		opts = append(opts, libp2p.EnableAutoRelayWithStaticRelays(r.StaticRelays,
			autorelay.WithBackoff(retry), autorelay.WithMinInterval(min(retry, relayPeerSourceEvery))))
	}
	// The relay service is E31's own (serveRelay), started by NewHost on
	// the host libp2p builds: go-libp2p's gives every circuit one limit.
	if r.AutoNAT {
		opts = append(opts, libp2p.EnableAutoNATv2())
	}
	if r.AutoNATService {
		opts = append(opts, libp2p.EnableNATService())
	}
	switch r.Force {
	case ReachUnknown:
	case ReachPublic:
		opts = append(opts, libp2p.ForceReachabilityPublic())
	case ReachPrivate:
		opts = append(opts, libp2p.ForceReachabilityPrivate())
	default:
		return nil, fmt.Errorf("reachability: unknown forced value %d", r.Force)
	}
	if r.PortMap {
		opts = append(opts, libp2p.NATPortMap())
	}
	if r.HolePunch {
		var hp []holepunch.Option
		if r.HolePunchTimeout > 0 {
			hp = append(hp, holepunch.DirectDialTimeout(r.HolePunchTimeout))
		}
		if r.OnHolePunch != nil {
			hp = append(hp, holepunch.WithTracer(holePunchTracer(r.OnHolePunch)))
		}
		opts = append(opts, libp2p.EnableHolePunching(hp...))
	}
	return opts, nil
}

// allowance is what a limited circuit carries each way, and for how long;
// on a relay that carries data, what a circuit carries while its ends hold
// no live lease together: Data and Duration where set, else libp2p's
// defaults.
func (l RelayLimits) allowance() relay.RelayLimit {
	a := *relay.DefaultLimit()
	if l.Data > 0 {
		a.Data = l.Data
	}
	if l.Duration > 0 {
		a.Duration = l.Duration
	}
	return a
}

func (l RelayLimits) resources() relay.Resources {
	rc := relay.DefaultResources()
	switch {
	case l.Data < 0:
		rc.Limit = nil // relay.Resources: a nil Limit means unlimited circuits
	default:
		if l.Data > 0 {
			rc.Limit.Data = l.Data
		}
		if l.Duration > 0 {
			rc.Limit.Duration = l.Duration
		}
	}
	if l.MaxReservations > 0 {
		rc.MaxReservations = l.MaxReservations
	}
	if l.MaxCircuits > 0 {
		rc.MaxCircuits = l.MaxCircuits
	}
	if l.ReservationTTL > 0 {
		rc.ReservationTTL = l.ReservationTTL
	}
	return rc
}

// holePunchTracer reports only the end of each punch: the events before it
// are libp2p's bookkeeping and say nothing a caller can act on.
type holePunchTracer func(HolePunchResult)

func (f holePunchTracer) Trace(evt *holepunch.Event) {
	end, ok := evt.Evt.(*holepunch.EndHolePunchEvt)
	if !ok {
		return
	}
	f(HolePunchResult{Peer: evt.Remote, Success: end.Success, Elapsed: end.EllapsedTime, Err: end.Error})
}

// HostReachability returns the reachability that AutoNAT last reported for
// h in its EvtLocalReachabilityChanged events, or ReachUnknown before the
// first. The host follows those events in the background, so a report
// reaches this function a moment after AutoNAT emits it; to act on changes
// as they happen, subscribe to the event on h.EventBus() instead.
func HostReachability(h host.Host) Reach {
	rh, ok := h.(interface{ Reachability() network.Reachability })
	if !ok {
		return ReachUnknown
	}
	return reachFrom(rh.Reachability())
}

func reachFrom(r network.Reachability) Reach {
	switch r {
	case network.ReachabilityPublic:
		return ReachPublic
	case network.ReachabilityPrivate:
		return ReachPrivate
	default:
		return ReachUnknown
	}
}

// Path is how this host is connected to a peer right now.
type Path int

const (
	// PathNone: no open connection.
	PathNone Path = iota
	// PathRelayed: connected only through a circuit relay, whose limits fit
	// control messages and not bulk data.
	PathRelayed
	// PathRelayedData: connected only through a circuit relay that sets no
	// limit on the circuit (its operator opted in to carry data): bulk data
	// may go over it when no direct path comes.
	PathRelayedData
	// PathDirect: at least one connection goes straight to the peer (dialled
	// normally, through a port mapping, or hole-punched).
	PathDirect
)

func (p Path) String() string {
	switch p {
	case PathRelayed:
		return "relayed"
	case PathRelayedData:
		return "relayed-data"
	case PathDirect:
		return "direct"
	default:
		return "none"
	}
}

// PeerPath reports whether h reaches p directly, only through a relay
// (one whose circuit carries data, or one that limits it to control
// messages), or not at all; and, for a relayed path, through which relay.
func PeerPath(h host.Host, p peer.ID) (Path, peer.ID) {
	path, via := PathNone, peer.ID("")
	for _, c := range h.Network().ConnsToPeer(p) {
		if !IsRelayed(c.RemoteMultiaddr()) {
			return PathDirect, ""
		}
		switch {
		case !c.Stat().Limited:
			path, via = PathRelayedData, relayOf(c.RemoteMultiaddr())
		case path != PathRelayedData:
			path, via = PathRelayed, relayOf(c.RemoteMultiaddr())
		}
	}
	return path, via
}

// relayOf is the relay a circuit address goes through: the peer named
// before /p2p-circuit.
func relayOf(a ma.Multiaddr) peer.ID {
	var relay peer.ID
	for _, c := range a {
		switch c.Code() {
		case ma.P_P2P:
			if id, err := peer.Decode(c.Value()); err == nil {
				relay = id
			}
		case ma.P_CIRCUIT:
			return relay
		}
	}
	return ""
}

// IsRelayed reports whether a goes through a circuit relay.
func IsRelayed(a ma.Multiaddr) bool {
	if a == nil {
		return false
	}
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// RelayOf is the relay a circuit address goes through: the peer named
// before /p2p-circuit; empty for an address that goes through none.
func RelayOf(a ma.Multiaddr) peer.ID { return relayOf(a) }

// ServesRelay reports whether peer p, as identify last described it to h,
// serves as a circuit v2 relay (speaks the hop protocol).
func ServesRelay(h host.Host, p peer.ID) bool {
	in, err := h.Peerstore().SupportsProtocols(p, proto.ProtoIDv2Hop)
	return err == nil && len(in) > 0
}
