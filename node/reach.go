package node

import (
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// NAT modes (Config.NAT).
const (
	NATAuto = "auto" // on unless every listen address is loopback
	NATOn   = "on"
	NATOff  = "off"
)

// natOn says whether a node with these settings runs what lets it be
// reached from behind a NAT. A node that listens on loopback alone (a test,
// the testnet) never does: it must not send a packet beyond its addresses.
func natOn(mode string, listen []string) (bool, error) {
	switch mode {
	case NATOn:
		return true, nil
	case NATOff:
		return false, nil
	case NATAuto, "":
	default:
		return false, fmt.Errorf("--nat %q: want auto, on or off", mode)
	}
	if len(listen) == 0 {
		return true, nil // the default listens on every interface
	}
	for _, a := range listen {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			return false, fmt.Errorf("listen address %q: %w", a, err)
		}
		ip, err := manet.ToIP(m)
		if err != nil || !ip.IsLoopback() && !ip.Equal(net.IPv6loopback) {
			return true, nil
		}
	}
	return false, nil
}

// reachability is the host's NAT traversal: AutoNAT, port mapping, hole
// punching, and relay slots on the bootstrap peers; or, for a relay
// service, serving as a relay at once.
func reachability(on, relayService bool, boot []peer.AddrInfo, punches *punchLog) p2p.Reachability {
	var r p2p.Reachability
	if on {
		r = p2p.Reachability{
			AutoNAT: true, AutoNATService: true, PortMap: true, HolePunch: true,
			RelayClient: len(boot) > 0, StaticRelays: boot,
			OnHolePunch: punches.record,
		}
	}
	if relayService {
		r.RelayService, r.Force = true, p2p.ReachPublic
	}
	return r
}

// reach is how peers reach this node, for its offer, and whether no peer
// can: behind a NAT with no relayed address.
func (n *Node) reach() (reach string, unreachable bool) {
	if !n.natOn {
		return "", false
	}
	relayed := false
	for _, a := range n.host.Addrs() {
		if p2p.IsRelayed(a) {
			relayed = true
		}
	}
	switch p2p.HostReachability(n.host) {
	case p2p.ReachPublic:
		return wire.ReachPublic, false
	case p2p.ReachPrivate:
		if relayed {
			return wire.ReachRelayed, false
		}
		return wire.ReachPrivate, true
	}
	if relayed {
		return wire.ReachRelayed, false
	}
	return "", false
}

// punchLog keeps the last hole punch's outcome with each peer, so that a
// transfer that finds only a relayed path can say why.
type punchLog struct {
	mu   sync.Mutex // guards last
	last map[peer.ID]p2p.HolePunchResult
}

func newPunchLog() *punchLog { return &punchLog{last: make(map[peer.ID]p2p.HolePunchResult)} }

// record is called from libp2p's goroutines: memory only.
func (l *punchLog) record(r p2p.HolePunchResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[r.Peer] = r
}

// Path says how this node is connected to p, and, when only through a
// relay, what the last hole punch with p said.
func (n *Node) Path(p peer.ID) (p2p.Path, string) {
	path := p2p.PeerPath(n.host, p)
	if path != p2p.PathRelayed {
		return path, ""
	}
	n.punches.mu.Lock()
	r, ok := n.punches.last[p]
	n.punches.mu.Unlock()
	switch {
	case !ok:
		return path, "no hole punch tried yet"
	case r.Success:
		return path, "hole punched, direct connection not yet in use"
	}
	return path, "hole punch failed: " + strings.TrimSpace(r.Err)
}
