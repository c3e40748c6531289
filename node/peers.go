package node

import (
	"context"
	"encoding/json"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// prefixPeer holds the addresses of providers this node has seen, so that
// after a restart it can find the network again without waiting for others
// to dial it: a restarted bootstrap node has no bootstrap of its own.
const prefixPeer = "peer/"

type peerRecord struct {
	ID    string    `json:"id"`
	Addrs []string  `json:"addrs"`
	Seen  time.Time `json:"seen"`
}

// rememberPeer saves a provider's addresses.
func (n *Node) rememberPeer(p peer.ID, addrs []string) {
	if err := n.state.put(prefixPeer, p.String(), peerRecord{ID: p.String(), Addrs: addrs, Seen: time.Now()}); err != nil {
		n.log.Debug("remember peer", "peer", p, "err", err)
	}
}

// redialKnownPeers connects, in the background, to the providers seen in
// the last day before this start.
func (n *Node) redialKnownPeers(ctx context.Context) {
	var known []peerRecord
	_ = n.state.each(prefixPeer, func(b []byte) error {
		var r peerRecord
		if json.Unmarshal(b, &r) == nil && time.Since(r.Seen) < 24*time.Hour {
			known = append(known, r)
		}
		return nil
	})
	for _, r := range known {
		p, err := peer.Decode(r.ID)
		if err != nil || p == n.self {
			continue
		}
		n.learnAddrs(ctx, p, r.Addrs)
	}
}
