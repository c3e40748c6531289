package api

import (
	"net/url"
	"time"
)

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

// PeerRecordPath is the path of GET /v1/peers/{id}/record, for Client.Do.
func PeerRecordPath(id string) string { return "/v1/peers/" + url.PathEscape(id) + "/record" }

// PeerRecord is what this node's own ledger says of a provider (GET
// /v1/peers/{id}/record): receipts both parties signed and the verdicts
// it keeps. It is local knowledge, never a part of Match.
type PeerRecord struct {
	PeerID string `json:"peer_id"`
	// Score is the record in a few characters: "12 ok/1 bad", or "new".
	Score string `json:"score"`
	// Leases counts the provider's leases with a receipt both parties
	// signed; Completed those that completed.
	Leases    int `json:"leases"`
	Completed int `json:"completed"`
	// ProviderCaused counts the endings its final receipts hold the
	// provider responsible for; Disputes the leases whose end was
	// disputed.
	ProviderCaused int `json:"provider_caused"`
	Disputes       int `json:"disputes"`
	// VerificationWins and VerificationLosses count its replicas that a
	// verdict found with the majority, or against it.
	VerificationWins   int `json:"verification_wins"`
	VerificationLosses int `json:"verification_losses"`
	// GPUProbeFailures counts its leases ended because its GPUs failed
	// the probe at lease start.
	GPUProbeFailures int `json:"gpu_probe_failures"`
	// MedianFirstReceiptSeconds is the median time from a lease's start
	// to its first receipt's end; 0 where none is known.
	MedianFirstReceiptSeconds float64 `json:"median_first_receipt_s"`
}
