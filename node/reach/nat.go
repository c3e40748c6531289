package reach

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/prometheus/client_golang/prometheus"
)

// NAT modes (node.Config.NAT).
const (
	NATAuto = "auto" // on unless every listen address is loopback
	NATOn   = "on"
	NATOff  = "off"
)

// Traverse says whether a node with these settings runs what lets it be
// reached from behind a NAT. A node that listens on loopback alone never
// does.
func Traverse(mode string, listen []string) (bool, error) {
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

// Relay is what a node serving as a relay for peers behind NATs carries
// (node.Config.Relay*).
type Relay struct {
	// Data lets circuits carry bulk data (staging, outputs, checkpoints)
	// between peers no hole can be punched between: no limit on bytes or
	// time per circuit. Off, a circuit carries 128 KiB each way for 2
	// minutes: a lease's messages, not its data.
	Data bool
	// CircuitsPerDay bounds the circuits one peer may open through the
	// relay in a day; 0: no bound.
	CircuitsPerDay int
	// Metrics, when set, receives the relay service's series
	// (libp2p_relaysvc_*: reservations, circuits, bytes carried; e31_relay_*:
	// what it refused and cut, and why).
	Metrics prometheus.Registerer
	// Peers says who the relay serves (p2p.RelayLimits.Peers): the node,
	// from the network's topics.
	Peers p2p.RelayPeers
	// BudgetPeer and BudgetIP bound the bytes Data circuits carry for one
	// peer and for one address in BudgetWindow (0: a day); 0 or negative:
	// no bound.
	BudgetPeer, BudgetIP int64
	BudgetWindow         time.Duration
	// Log and Panicked receive the relay's refusals and its recovered
	// panics.
	Log      *slog.Logger
	Panicked func(where string)
}

// Reachability is the host's NAT traversal: AutoNAT, port mapping, hole
// punching, and relay slots on the bootstrap peers, taken at once on a
// host that has no public address to listen on (behindNAT); or, for a
// relay service, serving as a relay at once, within relay. Hole punches
// are recorded in punches.
func Reachability(on, behindNAT bool, relay *Relay, boot []peer.AddrInfo, punches *Punches) p2p.Reachability {
	var r p2p.Reachability
	if on {
		r = p2p.Reachability{
			AutoNAT: true, AutoNATService: true, PortMap: true, HolePunch: true,
			RelayClient: len(boot) > 0, StaticRelays: boot,
			OnHolePunch: punches.record,
		}
		if behindNAT && r.RelayClient {
			// AutoNAT would take its boot delay and a few dial-backs to
			// say so, and no peer could reach the node meanwhile.
			r.Force = p2p.ReachPrivate
		}
	}
	if relay != nil {
		r.RelayService, r.Force = true, p2p.ReachPublic
		r.RelayLimits.CircuitsPerDay = relay.CircuitsPerDay
		r.RelayLimits.Metrics = relay.Metrics
		r.RelayLimits.Peers = relay.Peers
		r.RelayLimits.BudgetPeer, r.RelayLimits.BudgetPrefix = max(relay.BudgetPeer, 0), max(relay.BudgetIP, 0)
		r.RelayLimits.BudgetWindow = relay.BudgetWindow
		r.RelayLimits.Log, r.RelayLimits.Panicked = relay.Log, relay.Panicked
		if relay.Data {
			r.RelayLimits.Data = -1
		}
	}
	return r
}

// BehindNAT reports whether a host listening on listen (none: every
// interface) has no public address to be reached at: each address it
// listens on, or each of the machine's interfaces' for an unspecified
// one, is private or loopback. Such a host is behind a NAT, or reached by
// nobody outside its network.
func BehindNAT(listen []string) (bool, error) {
	var ifaces []ma.Multiaddr
	ifaceAddrs := func() ([]ma.Multiaddr, error) {
		if ifaces != nil {
			return ifaces, nil
		}
		var err error
		ifaces, err = manet.InterfaceMultiaddrs()
		return ifaces, err
	}
	if len(listen) == 0 {
		listen = []string{"/ip4/0.0.0.0", "/ip6/::"}
	}
	for _, a := range listen {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			return false, fmt.Errorf("listen address %q: %w", a, err)
		}
		ip, err := manet.ToIP(m)
		if err != nil {
			continue // not an IP address: says nothing of the NAT
		}
		if !ip.IsUnspecified() {
			if manet.IsPublicAddr(m) {
				return false, nil
			}
			continue
		}
		all, err := ifaceAddrs()
		if err != nil {
			return false, fmt.Errorf("list interface addresses: %w", err)
		}
		v4 := ip.To4() != nil
		for _, ia := range all {
			iip, err := manet.ToIP(ia)
			if err != nil || (iip.To4() != nil) != v4 {
				continue
			}
			if manet.IsPublicAddr(ia) {
				return false, nil
			}
		}
	}
	return true, nil
}

// Offered is how peers reach the node of host h, for its offer, and
// whether no peer can: behind a NAT with no relayed address. on says the
// node runs NAT traversal (Traverse); without it nothing is said.
func Offered(h host.Host, on bool) (reach string, unreachable bool) {
	if !on {
		return "", false
	}
	relayed := false
	for _, a := range h.Addrs() {
		if p2p.IsRelayed(a) {
			relayed = true
		}
	}
	switch p2p.HostReachability(h) {
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

// Punches keeps the last hole punch's outcome with each peer, so that a
// transfer that finds only a relayed path can say why.
type Punches struct {
	// wait is how long a circuit that carries data waits for a punch
	// before it is the path; immutable.
	wait time.Duration
	mu   sync.Mutex // guards last; memory only
	last map[peer.ID]punchLog
}

// punchLog is the last try of a hole punch with a peer, and how many tries
// in a row have failed, each within punchTriesApart of the one before.
type punchLog struct {
	p2p.HolePunchResult
	fails int
	at    time.Time
}

// punchTriesApart bounds the time between two failed tries of one punch:
// libp2p tries again at once, each try bounded by its direct dial's
// timeout. Failures further apart are of different punches.
const punchTriesApart = time.Minute

// failed reports whether the punch has failed: every try libp2p makes.
func (e punchLog) failed() bool { return !e.Success && e.fails >= p2p.HolePunchAttempts }

// NewPunches returns an empty log, under which a relay that carries data
// is the path wait after its circuit opened (0: p2p.RelayDataWait) unless
// a punch failed sooner.
func NewPunches(wait time.Duration) *Punches {
	if wait <= 0 {
		wait = p2p.RelayDataWait
	}
	return &Punches{wait: wait, last: make(map[peer.ID]punchLog)}
}

// record is called from libp2p's goroutines: memory only.
func (l *Punches) record(r p2p.HolePunchResult) {
	l.recordAt(r, time.Now())
}

func (l *Punches) recordAt(r p2p.HolePunchResult, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.last[r.Peer]
	if r.Success || now.Sub(e.at) > punchTriesApart {
		e.fails = 0
	}
	if !r.Success {
		e.fails++
	}
	e.HolePunchResult, e.at = r, now
	l.last[r.Peer] = e
}

// Path says how host h is connected to p: when through a relay that
// carries data, which relay (its peer ID); when only through one that does
// not, what the last hole punch with p said. A relay that carries data is
// the path only once a hole punch with p has failed (every try of it), or
// the wait after the circuit opened: until then the punch may still give a direct one,
// faster and sparing the relay's uplink, and the path is reported relayed.
func (l *Punches) Path(h host.Host, p peer.ID) (p2p.Path, string) {
	path, via := p2p.PeerPath(h, p)
	if path != p2p.PathRelayed && path != p2p.PathRelayedData {
		return path, ""
	}
	l.mu.Lock()
	r, ok := l.last[p]
	l.mu.Unlock()
	if path == p2p.PathRelayedData {
		if ok && r.failed() || time.Since(circuitOpened(h, p)) >= l.wait {
			return path, via.String()
		}
		return p2p.PathRelayed, "hole punch under way; relay " + via.String() + " carries the data should it fail"
	}
	switch {
	case !ok:
		return path, "no hole punch tried yet"
	case r.Success:
		return path, "hole punched, direct connection not yet in use"
	}
	if !r.failed() {
		return path, fmt.Sprintf("hole punch try %d of %d failed, trying again: %s", r.fails, p2p.HolePunchAttempts, strings.TrimSpace(r.Err))
	}
	return path, "hole punch failed: " + strings.TrimSpace(r.Err)
}

// circuitOpened is when the oldest circuit from h to p that carries data
// opened; now when there is none.
func circuitOpened(h host.Host, p peer.ID) time.Time {
	first := time.Now()
	for _, c := range h.Network().ConnsToPeer(p) {
		if st := c.Stat(); p2p.IsRelayed(c.RemoteMultiaddr()) && !st.Limited && st.Opened.Before(first) {
			first = st.Opened
		}
	}
	return first
}
