package p2p

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Gater refuses connections to and from blocked peers. A node uses it to
// cut itself off from chosen peers on request, which is how a test splits
// a network on one machine without touching its interfaces.
type Gater struct {
	mu      sync.Mutex // guards blocked
	blocked map[peer.ID]bool
}

// NewGater returns a gater that blocks nobody.
func NewGater() *Gater { return &Gater{blocked: make(map[peer.ID]bool)} }

// Block replaces the set of blocked peers.
func (g *Gater) Block(peers []peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blocked = make(map[peer.ID]bool, len(peers))
	for _, p := range peers {
		g.blocked[p] = true
	}
}

// Blocked reports whether p is blocked.
func (g *Gater) Blocked(p peer.ID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blocked[p]
}

func (g *Gater) InterceptPeerDial(p peer.ID) bool                 { return !g.Blocked(p) }
func (g *Gater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return !g.Blocked(p) }
func (g *Gater) InterceptAccept(network.ConnMultiaddrs) bool      { return true }
func (g *Gater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return !g.Blocked(p)
}
func (g *Gater) InterceptUpgraded(c network.Conn) (bool, control.DisconnectReason) {
	return !g.Blocked(c.RemotePeer()), 0
}
