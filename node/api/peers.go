package api

import "time"

// Peer is a connected libp2p peer.
type Peer struct {
	PeerID string   `json:"peer_id"`
	Addrs  []string `json:"addrs"`
	// Path is how this node reaches the peer: direct (dialled, or a hole
	// punched through NATs), relayed (only through a circuit relay, which
	// carries control messages but no data), or none.
	Path string `json:"path"`
	// PathReason says, for a relayed path, what the last hole punch with
	// the peer said.
	PathReason string `json:"path_reason,omitempty"`
	// Struck, on a submitter this node's provider struck off (it refused
	// or never answered receipts, disputed a final one, or left gangs
	// unassembled), says until when it gets no new work from this node,
	// and why. A struck peer is listed whether connected or not (Path
	// "none").
	Struck *Strike `json:"struck,omitempty"`
}

// Strike is what a provider holds against a submitter (node/provider).
type Strike struct {
	Count int       `json:"count"`
	Until time.Time `json:"until"`
	Why   string    `json:"why"`
}

// Block names the peers a node refuses to connect with; empty heals.
type Block struct {
	Peers []string `json:"peers"`
}
