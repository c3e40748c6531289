package p2p

import (
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
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
	// RelayService serves as a circuit v2 relay for others while this host
	// is public (set Force to ReachPublic to serve without waiting for
	// AutoNAT). Off by default.
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
	// limit, neither on bytes nor on time (a relay told to carry bulk data).
	Data int64
	// Duration is how long a relayed connection may last. Zero: 2 minutes.
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
	// Metrics, when set, receives the relay service's series
	// (libp2p_relaysvc_*): reservations, circuits, bytes carried.
	Metrics prometheus.Registerer
}

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
		opts = append(opts, libp2p.EnableAutoRelayWithStaticRelays(r.StaticRelays))
	}
	if r.RelayService {
		ro := []relay.Option{relay.WithResources(r.RelayLimits.resources())}
		if n := r.RelayLimits.CircuitsPerDay; n > 0 {
			ro = append(ro, relay.WithACL(newCircuitQuota(n, 24*time.Hour, time.Now)))
		}
		if r.RelayLimits.Metrics != nil {
			ro = append(ro, relay.WithMetricsTracer(relay.NewMetricsTracer(relay.WithRegisterer(r.RelayLimits.Metrics))))
		}
		opts = append(opts, libp2p.EnableRelayService(ro...))
	}
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
