package reach

import (
	"fmt"
	"slices"
	"strings"

	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// The states of a node's reachability (Status.State).
const (
	// StatePublic: peers dial the node directly.
	StatePublic = "public"
	// StateRelayed: the node is behind a NAT and holds a slot on a relay,
	// through which peers reach it until a hole is punched.
	StateRelayed = "relayed"
	// StateUnreachable: behind a NAT with no relay slot: no peer can
	// reach the node, so it is offered no work.
	StateUnreachable = "unreachable"
	// StateUnknown: not learned yet.
	StateUnknown = "unknown"
	// StateOff: the node runs no NAT traversal (--nat off, or it listens
	// on loopback alone) and so never learns its reachability.
	StateOff = "off"
)

// NoWork begins what an unreachable node is told.
const NoWork = "no peer can reach this node: it gets no work"

// Status is how peers reach this node, as its contributor is told it: in
// the log, by e31 id, by e31d doctor and on the dashboard.
type Status struct {
	State string
	// Relays are the relays the node holds a slot on (peer IDs), when
	// relayed.
	Relays []string
	// Why says what the state rests on; Fix, for an unreachable node,
	// what its owner can change.
	Why, Fix string
}

// Line is the status in one line: "no peer can reach this node: it gets
// no work; WHY; fix: FIX" for an unreachable node.
func (s Status) Line() string {
	switch s.State {
	case StateUnreachable:
		return NoWork + "; " + s.Why + "; fix: " + s.Fix
	case StateRelayed:
		return "relayed through " + strings.Join(s.Relays, ", ") + ": " + s.Why
	}
	return s.State + ": " + s.Why
}

// Facts are what a node's reachability is judged from (Observe reads
// them from a host).
type Facts struct {
	// Traversal says the node runs NAT traversal (Traverse).
	Traversal bool
	// Reach is what AutoNAT (or the forced setting) last said.
	Reach p2p.Reach
	// Relays are the relays the node holds a slot on: those its relayed
	// addresses go through.
	Relays []peer.ID
	// Boot is how many bootstrap peers the node names; BootConnected how
	// many it is connected to; BootRelays how many of those serve as a
	// relay.
	Boot, BootConnected, BootRelays int
	// Ports are the TCP and UDP ports it listens on beyond loopback
	// ("tcp/4001"), for the fix.
	Ports []string
}

// Observe reads the facts of the node of host h, which runs NAT traversal
// where on says so, from its addresses and its bootstrap peers boot.
func Observe(h host.Host, on bool, boot []peer.AddrInfo) Facts {
	f := Facts{Traversal: on, Reach: p2p.HostReachability(h), Boot: len(boot)}
	for _, a := range h.Addrs() {
		if r := p2p.RelayOf(a); r != "" && !slices.Contains(f.Relays, r) {
			f.Relays = append(f.Relays, r)
		}
	}
	for _, b := range boot {
		if h.Network().Connectedness(b.ID) != network.Connected {
			continue
		}
		f.BootConnected++
		if p2p.ServesRelay(h, b.ID) {
			f.BootRelays++
		}
	}
	f.Ports = listenPorts(h.Network().ListenAddresses())
	return f
}

// listenPorts are the ports of addrs beyond loopback, "tcp/N" or "udp/N",
// once each, sorted: the host lists its listeners in no set order, and
// the advice that names them reads the same each time.
func listenPorts(addrs []ma.Multiaddr) []string {
	var out []string
	for _, a := range addrs {
		if ip, err := manet.ToIP(a); err == nil && ip.IsLoopback() {
			continue
		}
		for _, proto := range []int{ma.P_TCP, ma.P_UDP} {
			if v, err := a.ValueForProtocol(proto); err == nil {
				port := ma.ProtocolWithCode(proto).Name + "/" + v
				if !slices.Contains(out, port) {
					out = append(out, port)
				}
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// Explain judges facts f: the state, and for an unreachable node why and
// what to change.
func Explain(f Facts) Status {
	switch {
	case !f.Traversal:
		return Status{State: StateOff, Why: "NAT traversal is off (--nat off, or every --listen address is loopback): the node does not learn whether peers can reach it"}
	case f.Reach != p2p.ReachPublic && len(f.Relays) > 0:
		relays := make([]string, len(f.Relays))
		for i, r := range f.Relays {
			relays[i] = r.String()
		}
		return Status{State: StateRelayed, Relays: relays,
			Why: "behind a NAT, peers reach this node through a relay slot; a hole punched to each peer then gives a direct path where the router allows"}
	case f.Reach == p2p.ReachPublic:
		return Status{State: StatePublic, Why: "peers dial this node directly"}
	case f.Reach == p2p.ReachUnknown:
		return Status{State: StateUnknown, Why: "AutoNAT has not yet learned whether peers can dial this node"}
	}
	s := Status{State: StateUnreachable}
	behind := "behind a NAT or a firewall (AutoNAT: private)"
	switch {
	case f.Boot == 0:
		s.Why = behind + ", with no bootstrap peer to hold a relay slot on"
	case f.BootConnected == 0:
		s.Why = fmt.Sprintf("%s, and connected to none of its %d bootstrap peers, the relays it would hold a slot on", behind, f.Boot)
	case f.BootRelays == 0:
		s.Why = fmt.Sprintf("%s, and none of the %d bootstrap peers it is connected to serves as a relay", behind, f.BootConnected)
	default:
		s.Why = fmt.Sprintf("%s, and none of the %d bootstrap peers that serve as a relay has given it a slot yet (a relay grants one once this node's first offer reaches it)", behind, f.BootRelays)
	}
	ports := "e31d's --listen port"
	if len(f.Ports) > 0 {
		ports = strings.Join(f.Ports, " and ")
	}
	s.Fix = "forward " + ports + " on the router to this machine (or turn on UPnP/NAT-PMP there), or bootstrap from a peer that runs e31d --relay-service (docs/daemon.md, \"Behind a NAT\")"
	return s
}
