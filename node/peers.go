package node

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/e31network/e31/node/state"
	"github.com/libp2p/go-libp2p/core/peer"
)

type peerRecord struct {
	ID    string    `json:"id"`
	Addrs []string  `json:"addrs"`
	Seen  time.Time `json:"seen"`
}

// savedPeers is what rememberPeer last stored of each provider, and when;
// it belongs to the loop that receives offers.
type savedPeers map[peer.ID]savedPeer

type savedPeer struct {
	at    time.Time
	addrs []string
}

// due reports whether p's record must be written now, with addrs, and if
// so counts it written: the first time, when the addresses change, and
// peerSaveEvery after the last write.
func (s savedPeers) due(p peer.ID, addrs []string, now time.Time) bool {
	if sp, ok := s[p]; ok && now.Sub(sp.at) <= peerSaveEvery && slices.Equal(sp.addrs, addrs) {
		return false
	}
	s[p] = savedPeer{at: now, addrs: addrs}
	return true
}

// peerSaveEvery is how often a provider's record is written again with
// unchanged addresses: well within the day redialKnownPeers looks back.
const peerSaveEvery = time.Hour

// rememberPeer saves a provider's addresses (under state.PrefixPeer), so
// that after a restart this node can find the network again without waiting
// for others to dial it: a restarted bootstrap node has no bootstrap of its
// own.
func (n *Node) rememberPeer(p peer.ID, addrs []string) {
	if err := n.state.Put(state.PrefixPeer, p.String(), peerRecord{ID: p.String(), Addrs: addrs, Seen: time.Now()}); err != nil {
		n.log.Debug("remember peer", "peer", p, "err", err)
	}
}

// redialKnownPeers connects, in the background, to the providers seen in
// the last day before this start.
func (n *Node) redialKnownPeers(ctx context.Context) {
	var known []peerRecord
	err := n.state.Each(state.PrefixPeer, func(b []byte) error {
		var r peerRecord
		if json.Unmarshal(b, &r) == nil && time.Since(r.Seen) < 24*time.Hour {
			known = append(known, r)
		}
		return nil
	})
	if err != nil {
		n.log.Warn("read remembered peers", "err", err)
	}
	for _, r := range known {
		p, err := peer.Decode(r.ID)
		if err != nil || p == n.self {
			continue
		}
		n.learnAddrs(ctx, p, r.Addrs)
	}
}
