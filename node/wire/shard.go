package wire

import (
	"encoding/json"
	"fmt"

	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
)

// ProtoShardPeers: any peer → any peer, "whom do you know in this shard?".
// A peer of a sharded network that has too few peers in its own shard's
// topics asks the peers it is connected to (its bootstrap peers first);
// each answers with peers it is connected to that take part in the shard,
// as their identify protocols say (p2p.ShardMarker).
const ProtoShardPeers protocol.ID = "/e31/shard-peers/1"

// MaxShardPeers and MaxShardPeerAddrs bound a reply to ProtoShardPeers.
const (
	MaxShardPeers     = 16
	MaxShardPeerAddrs = 8
)

// ShardPeersRequest asks for peers in one shard.
type ShardPeersRequest struct {
	Shard p2p.Shard `json:"shard"`
}

// ShardPeersReply lists peers in the shard asked for.
type ShardPeersReply struct {
	Peers []ShardPeer `json:"peers"`
}

// ShardPeer is one peer of a ShardPeersReply: its ID and the addresses it
// was reached at.
type ShardPeer struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs"`
}

// DecodeShardPeersRequest reads a request to ProtoShardPeers.
func DecodeShardPeersRequest(raw json.RawMessage) (p2p.Shard, error) {
	var req ShardPeersRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return p2p.Shard{}, fmt.Errorf("shard peers request: %w", err)
	}
	if err := req.Shard.Valid(); err != nil || req.Shard.Whole() {
		return p2p.Shard{}, fmt.Errorf("shard peers request: shard %v is not a shard of a sharded network", req.Shard)
	}
	return req.Shard, nil
}

// DecodeShardPeersReply reads a reply to ProtoShardPeers: at most
// MaxShardPeers peers, each with a valid ID and at most MaxShardPeerAddrs
// addresses, of which those that do not parse are dropped. A peer with no
// address left is dropped too.
func DecodeShardPeersReply(raw json.RawMessage) ([]peer.AddrInfo, error) {
	var rep ShardPeersReply
	if err := p2p.DecodeStrict(raw, &rep); err != nil {
		return nil, fmt.Errorf("shard peers reply: %w", err)
	}
	if len(rep.Peers) > MaxShardPeers {
		return nil, fmt.Errorf("shard peers reply: %d peers, at most %d", len(rep.Peers), MaxShardPeers)
	}
	out := make([]peer.AddrInfo, 0, len(rep.Peers))
	for _, p := range rep.Peers {
		id, err := peer.Decode(p.ID)
		if err != nil {
			return nil, fmt.Errorf("shard peers reply: peer %q: %w", p.ID, err)
		}
		if len(p.Addrs) > MaxShardPeerAddrs {
			return nil, fmt.Errorf("shard peers reply: peer %s has %d addresses, at most %d", id, len(p.Addrs), MaxShardPeerAddrs)
		}
		info := peer.AddrInfo{ID: id}
		for _, a := range p.Addrs {
			if m, err := ma.NewMultiaddr(a); err == nil {
				info.Addrs = append(info.Addrs, m)
			}
		}
		if len(info.Addrs) > 0 {
			out = append(out, info)
		}
	}
	return out, nil
}
