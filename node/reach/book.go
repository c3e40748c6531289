package reach

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"time"

	"github.com/e31network/e31/node/state"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Book is where this node's peers are: the addresses they published about
// themselves, kept in the host's peerstore for direct streams and, for
// providers, in the state store (under state.PrefixPeer) so that after a
// restart the node can find the network again without waiting for others
// to dial it: a restarted bootstrap node has no bootstrap of its own. Its
// fields are set before first use and never changed after.
type Book struct {
	Host           host.Host
	Self           peer.ID
	Records        *state.Store
	ConnectTimeout time.Duration // bounds one dial
	Log            *slog.Logger
	// Go runs fn as one of the node's short tasks, named task, about peer
	// p: in a goroutine the node's shutdown waits for, where a panic fails
	// that task only.
	Go func(task string, p peer.ID, fn func())
	// Relays are the relays this node takes slots on, behind a NAT (its
	// bootstrap peers); nil without NAT traversal. Every peer it learns
	// of may be dialled through them too: a peer behind a NAT that
	// announced its addresses before it held a relay slot there (a job
	// submitted in its first seconds) is still reached, once it does.
	Relays []peer.AddrInfo
}

// peerAddrTTL is how long learned addresses are kept.
const peerAddrTTL = time.Hour

// maxDialedPeers caps the connections a node opens on its own to providers it
// learns of; beyond it gossip's mesh is already well connected.
const maxDialedPeers = 32

// Learn keeps a provider's addresses so that a direct stream can reach it,
// and connects to it, in the background, so that gossip does not hang on
// the bootstrap peers alone.
func (b *Book) Learn(ctx context.Context, p peer.ID, addrs []string) {
	if p == b.Self {
		return
	}
	info, ok := addrInfo(p, addrs)
	if !ok {
		return
	}
	info.Addrs = append(info.Addrs, b.viaRelays(p)...)
	b.Host.Peerstore().AddAddrs(p, info.Addrs, peerAddrTTL)
	if len(b.Host.Network().Peers()) >= maxDialedPeers {
		return
	}
	b.Go("connect", p, func() {
		cctx, cancel := context.WithTimeout(ctx, b.ConnectTimeout)
		defer cancel()
		if err := b.Host.Connect(cctx, info); err != nil && ctx.Err() == nil {
			b.Log.Debug("connect to provider", "peer", p, "err", err)
		}
	})
}

// Reach connects to p, unless connected already, at the addresses the
// peerstore holds for it (those it published, relay circuits among them),
// within ConnectTimeout.
func (b *Book) Reach(ctx context.Context, p peer.ID) error {
	if b.Host.Network().Connectedness(p) == network.Connected {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, b.ConnectTimeout)
	defer cancel()
	return b.Host.Connect(cctx, peer.AddrInfo{ID: p, Addrs: b.viaRelays(p)})
}

// viaRelays are the addresses of p through each of this node's relays:
// /ip4/…/p2p/RELAY/p2p-circuit. libp2p dials a relayed address only after
// the direct ones have had their chance, and a relay where p holds no slot
// refuses at once.
func (b *Book) viaRelays(p peer.ID) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, r := range b.Relays {
		if r.ID == p || r.ID == b.Self {
			continue
		}
		tail, err := ma.NewMultiaddr("/p2p/" + r.ID.String() + "/p2p-circuit")
		if err != nil {
			continue
		}
		for _, a := range r.Addrs {
			out = append(out, a.Encapsulate(tail))
		}
	}
	return out
}

// AddAddrs records a peer's addresses without dialling it.
func (b *Book) AddAddrs(p peer.ID, addrs []string) {
	if p == b.Self {
		return
	}
	if info, ok := addrInfo(p, addrs); ok {
		b.Host.Peerstore().AddAddrs(p, append(info.Addrs, b.viaRelays(p)...), peerAddrTTL)
	}
}

// addrInfo parses the /p2p/ multiaddrs a peer published about itself,
// keeping only those that name it.
func addrInfo(p peer.ID, addrs []string) (peer.AddrInfo, bool) {
	info := peer.AddrInfo{ID: p}
	for _, a := range addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			continue
		}
		if ai, err := peer.AddrInfoFromP2pAddr(m); err == nil && ai.ID == p {
			info.Addrs = append(info.Addrs, ai.Addrs...)
		}
	}
	return info, len(info.Addrs) > 0
}

type peerRecord struct {
	ID    string    `json:"id"`
	Addrs []string  `json:"addrs"`
	Seen  time.Time `json:"seen"`
}

// Remember saves a provider's addresses. It writes to the state store:
// never call it from a loop that must not wait on a disk (Go it).
func (b *Book) Remember(p peer.ID, addrs []string) {
	if err := b.Records.Put(state.PrefixPeer, p.String(), peerRecord{ID: p.String(), Addrs: addrs, Seen: time.Now()}); err != nil {
		b.Log.Debug("remember peer", "peer", p, "err", err)
	}
}

// Redial connects, in the background, to the providers seen in the last
// day before this start.
func (b *Book) Redial(ctx context.Context) {
	var known []peerRecord
	err := b.Records.Each(state.PrefixPeer, func(raw []byte) error {
		var r peerRecord
		if json.Unmarshal(raw, &r) == nil && time.Since(r.Seen) < 24*time.Hour {
			known = append(known, r)
		}
		return nil
	})
	if err != nil {
		b.Log.Warn("read remembered peers", "err", err)
	}
	for _, r := range known {
		p, err := peer.Decode(r.ID)
		if err != nil || p == b.Self {
			continue
		}
		b.Learn(ctx, p, r.Addrs)
	}
}

// Saved is what Remember last stored of each provider, and when; it
// belongs to the loop that receives offers, and has no lock.
type Saved map[peer.ID]savedPeer

type savedPeer struct {
	at    time.Time
	addrs []string
}

// Due reports whether p's record must be written now, with addrs, and if
// so counts it written: the first time, when the addresses change, and
// saveEvery after the last write.
func (s Saved) Due(p peer.ID, addrs []string, now time.Time) bool {
	if sp, ok := s[p]; ok && now.Sub(sp.at) <= saveEvery && slices.Equal(sp.addrs, addrs) {
		return false
	}
	s[p] = savedPeer{at: now, addrs: addrs}
	return true
}

// saveEvery is how often a provider's record is written again with
// unchanged addresses: well within the day Redial looks back.
const saveEvery = time.Hour
