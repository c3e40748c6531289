package api

import "time"

// Error is the body of every failed request.
type Error struct {
	Error string `json:"error"`
}

// ID describes the daemon answering.
type ID struct {
	PeerID  string    `json:"peer_id"`
	Network string    `json:"network"`
	Addrs   []string  `json:"addrs"`
	GPUs    []GPU     `json:"gpus"`
	Runtime string    `json:"runtime,omitempty"` // OCI runtime path; empty: this node offers no compute
	Started time.Time `json:"started"`
	Version string    `json:"version"`
}

// Peer is a connected libp2p peer.
type Peer struct {
	PeerID string   `json:"peer_id"`
	Addrs  []string `json:"addrs"`
}

// GPU is one GPU of an offer, as `e31 nodes --json` prints it.
type GPU struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Model       string `json:"model"`
	MemoryBytes uint64 `json:"memory_bytes"`
	Free        bool   `json:"free"`
}

// Node is one provider in this node's view of offers.
type Node struct {
	PeerID      string    `json:"peer_id"`
	GPUs        []GPU     `json:"gpus"`
	CPUs        int       `json:"cpus"`
	MemoryBytes uint64    `json:"memory_bytes"`
	LastSeen    time.Time `json:"last_seen"`
	Self        bool      `json:"self,omitempty"`
}
