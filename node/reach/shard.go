package reach

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// ShardMates keeps a node of a sharded network connected to enough peers
// of its own shard for its topics to form a mesh. Bootstrap peers and the
// peers a node first meets may all be in other shards, and gossip's peer
// exchange only ever names peers of topics the node already shares: when
// the node meets fewer than WantShardPeers peers in its shard's topics, it
// asks the peers it is connected to for peers in its shard
// (wire.ProtoShardPeers) and dials those. Every node of a sharded network
// answers the question for any shard (Answer), from the peers it is
// connected to and their shard markers (p2p.ShardMarker). Its fields are
// set before Run and never changed after.
type ShardMates struct {
	Host    host.Host
	Network string
	Shard   p2p.Shard
	// InShard counts the peers this node meets in its shard's topics.
	InShard        func() int
	ConnectTimeout time.Duration
	Log            *slog.Logger
	// Every is how often the count is checked; default 10 s.
	Every time.Duration
}

// WantShardPeers is how many peers of its shard a node looks for: gossip's
// mesh degree.
const WantShardPeers = 6

// maxAsked bounds the peers asked in one round.
const maxAsked = 4

// Mark registers the node's shard marker, so that identify tells its peers
// which shard it is in.
func (s *ShardMates) Mark() {
	s.Host.SetStreamHandler(p2p.ShardMarker(s.Network, s.Shard), func(st network.Stream) { _ = st.Reset() })
}

// Run looks for peers of the shard whenever too few are met, and says
// which peers this node's market will never meet (see note), until ctx
// ends.
func (s *ShardMates) Run(ctx context.Context) {
	sub, err := s.Host.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted))
	if err != nil {
		s.Log.Warn("watch peers' shards", "err", err)
		return
	}
	defer sub.Close()
	every := s.Every
	if every == 0 {
		every = 10 * time.Second
	}
	// The first look is soon: a node that has just met its bootstrap peers
	// has nobody else to ask. A node of one shard never looks.
	t := time.NewTimer(time.Second)
	defer t.Stop()
	var tick <-chan time.Time
	if !s.Shard.Whole() {
		tick = t.C
	}
	noted := map[peer.ID]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-sub.Out():
			if ev, ok := e.(event.EvtPeerIdentificationCompleted); ok {
				s.note(ev, noted)
			}
		case <-tick:
			if s.InShard() < WantShardPeers {
				s.look(ctx)
			}
			t.Reset(every)
		}
	}
}

// look asks up to maxAsked connected peers for peers of the shard and dials
// those it is not connected to yet.
func (s *ShardMates) look(ctx context.Context) {
	conns := s.Host.Network().Peers()
	rand.Shuffle(len(conns), func(i, j int) { conns[i], conns[j] = conns[j], conns[i] })
	dialled := map[peer.ID]bool{}
	for _, p := range conns[:min(len(conns), maxAsked)] {
		cctx, cancel := context.WithTimeout(ctx, s.ConnectTimeout)
		var raw json.RawMessage
		err := p2p.Call(cctx, s.Host, p, wire.ProtoShardPeers, wire.ShardPeersRequest{Shard: s.Shard}, &raw)
		cancel()
		if err != nil {
			s.Log.Debug("ask for shard peers", "peer", p, "err", err)
			continue
		}
		infos, err := wire.DecodeShardPeersReply(raw)
		if err != nil {
			s.Log.Debug("shard peers reply", "peer", p, "err", err)
			continue
		}
		for _, info := range infos {
			if info.ID == s.Host.ID() || dialled[info.ID] || s.Host.Network().Connectedness(info.ID) == network.Connected {
				continue
			}
			dialled[info.ID] = true
			cctx, cancel := context.WithTimeout(ctx, s.ConnectTimeout)
			if err := s.Host.Connect(cctx, info); err != nil {
				s.Log.Debug("connect to shard peer", "peer", info.ID, "err", err)
			}
			cancel()
			if len(dialled) >= WantShardPeers {
				return
			}
		}
	}
}

// Answer is the ProtoShardPeers handler: up to wire.MaxShardPeers peers
// this node is connected to whose marker says they are in the shard asked
// for, the asker aside.
func (s *ShardMates) Answer(_ context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	shard, err := wire.DecodeShardPeersRequest(raw)
	if err != nil {
		return nil, err
	}
	marker := p2p.ShardMarker(s.Network, shard)
	conns := s.Host.Network().Peers()
	rand.Shuffle(len(conns), func(i, j int) { conns[i], conns[j] = conns[j], conns[i] })
	rep := wire.ShardPeersReply{Peers: []wire.ShardPeer{}}
	for _, p := range conns {
		if len(rep.Peers) == wire.MaxShardPeers {
			break
		}
		if p == from {
			continue
		}
		if in, err := s.Host.Peerstore().SupportsProtocols(p, marker); err != nil || len(in) == 0 {
			continue
		}
		sp := wire.ShardPeer{ID: p.String()}
		for _, a := range s.Host.Peerstore().Addrs(p) {
			if len(sp.Addrs) == wire.MaxShardPeerAddrs {
				break
			}
			sp.Addrs = append(sp.Addrs, a.String())
		}
		if len(sp.Addrs) > 0 {
			rep.Peers = append(rep.Peers, sp)
		}
	}
	return rep, nil
}

// maxNoted bounds the peers watch remembers having logged.
const maxNoted = 1024

// note logs, once a peer, an e31d that can never be in this node's market,
// and says why: it is on another network, it splits the network into
// another number of shards than this node (every peer of a network needs
// the same --shards), or it marks no shard at all (an older version),
// naming the version it says it runs.
func (s *ShardMates) note(ev event.EvtPeerIdentificationCompleted, noted map[peer.ID]bool) {
	if noted[ev.Peer] || !strings.HasPrefix(ev.AgentVersion, "e31d/") {
		return
	}
	why, theirs := Mismatch(s.Network, s.Shard, ev.Protocols)
	if why == "" {
		return
	}
	if len(noted) == maxNoted {
		clear(noted)
	}
	noted[ev.Peer] = true
	s.Log.Warn("peer "+ev.Peer.String()+" is in no market this node takes part in: "+why, "peer", ev.Peer, "version", ev.AgentVersion,
		"why", why, "its_shard", theirs, "network", s.Network, "shard", s.Shard.String())
}

// Mismatch says why a peer advertising protos can never be in the market
// of a node of network in shard, or "" when it can be; theirs is the
// peer's shard ("none" where it marks none). A marker of this network
// wins over one of another, so that a peer is never told apart by the
// order of its protocols.
func Mismatch(network string, shard p2p.Shard, protos []protocol.ID) (why, theirs string) {
	other := ""
	for _, p := range protos {
		n, sh, ok := p2p.ParseAnyShardMarker(p)
		switch {
		case !ok:
		case n != network:
			if other == "" {
				other, theirs = n, sh.String()
			}
		case (sh.Class != "") != (shard.Class != ""):
			return fmt.Sprintf("it splits the market %s (this node: %s; every peer needs the same --market)",
				marketMode(sh), marketMode(shard)), sh.String()
		case sh.Class != "":
			// In a market split by class, peers of other classes and
			// subshards are the rule, not a mistake.
			return "", sh.String()
		case max(sh.Count, 1) != max(shard.Count, 1):
			return fmt.Sprintf("it splits the network into another number of shards (--shards %d; this node: --shards %d)",
				max(sh.Count, 1), max(shard.Count, 1)), sh.String()
		default:
			return "", sh.String()
		}
	}
	if other != "" {
		return fmt.Sprintf("it is on network %q (this node: %q; e31d --network names it)", other, network), theirs
	}
	return "it runs an older version of e31d, which marks no shard", "none"
}

// marketMode names how a peer in shard splits the network's market.
func marketMode(shard p2p.Shard) string {
	if shard.Class != "" {
		return "by class (--market classes)"
	}
	return "by --shards"
}
