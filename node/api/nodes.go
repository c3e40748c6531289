package api

import (
	"time"

	"github.com/e31network/e31/market"
)

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
	// SignedAt is when the provider signed the offer last seen; LastSeen
	// minus SignedAt is how long gossip took to bring it here.
	SignedAt time.Time `json:"signed_at"`
	Self     bool      `json:"self,omitempty"`
	// Reach is how peers reach the provider: public, relayed (through a
	// relay until a hole is punched), private (no one can: offered no
	// work), or empty when not known.
	Reach string `json:"reach,omitempty"`
	// Draining says the provider's owner drains it: it takes no new work.
	Draining bool `json:"draining,omitempty"`
	// Closed says the provider is outside its contribution hours;
	// OpenUntil is when its open window ends, where it has hours.
	Closed    bool       `json:"closed,omitempty"`
	OpenUntil *time.Time `json:"open_until,omitempty"`
	// MaxJobDisk is the largest request.disk the provider can grant now
	// (0: it names no cap); NoDisk why it lends none ("full": its disk is
	// under its reserve or promised to its jobs; "unbounded": it cannot
	// bound a job's disk), and so takes no job. NoCPUJobs says it takes
	// only jobs that ask for GPUs.
	MaxJobDisk uint64 `json:"max_job_disk,omitempty"`
	NoDisk     string `json:"no_disk,omitempty"`
	NoCPUJobs  bool   `json:"no_cpu_jobs,omitempty"`
	// Price is what an hour of one of its GPUs costs, in Currency (e31d
	// --price, --currency); absent: free.
	Price    market.Price `json:"price,omitempty"`
	Currency string       `json:"currency,omitempty"`
	// Held are the largest roots the provider's offer says it holds, with
	// their sizes in bytes; HeldFiltered says its filter holds more.
	Held         []HeldRoot `json:"held,omitempty"`
	HeldFiltered bool       `json:"held_filtered,omitempty"`
	// LostAt, set only in the list GET /v1/nodes?lost=1 gives, says the
	// provider left this node's view then, having missed its heartbeats;
	// the rest is its last offer (its GPUs as they stood, LastSeen its
	// last heartbeat). It is listed for an hour, or until it comes back.
	LostAt *time.Time `json:"lost_at,omitempty"`
	// Score is this node's record of the provider in a few characters
	// ("12 ok/1 bad", or "new"): local knowledge from its own ledger
	// (PeerRecord); empty where the daemon keeps no records.
	Score string `json:"score,omitempty"`
}

// HeldRoot is one root an offer says its provider holds.
type HeldRoot struct {
	Root string `json:"root"`
	Size uint64 `json:"size"`
}
