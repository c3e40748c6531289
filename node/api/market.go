package api

import (
	"time"

	"github.com/e31network/e31/market"
)

// Market is the whole network's market as this node reads it from the
// digest topic (GET /v1/market): the latest digest of each shard, those
// older than five digest rounds dropped.
type Market struct {
	Shards []MarketShard `json:"shards"`
}

// MarketShard is one shard's latest digest.
type MarketShard struct {
	// Class is the shard's resource class, "" for a hash shard or the
	// whole network; Index of Count is its subshard (Count 1: one market).
	Class string `json:"class,omitempty"`
	Index int    `json:"index"`
	Count int    `json:"count"`
	// Own marks this node's own shard.
	Own       bool `json:"own,omitempty"`
	Providers int  `json:"providers"`
	// FreeBoxes[k] counts the shard's boxes with k GPUs free, the last
	// bucket those with that many or more.
	FreeBoxes    []int             `json:"free_boxes"`
	Queued       int               `json:"queued"`
	QueuedGPUs   int               `json:"queued_gpus"`
	OldestWaitMs int64             `json:"oldest_wait_ms"`
	Held         []market.HeldRoot `json:"held,omitempty"`
	ViewHash     string            `json:"view_hash,omitempty"`
	// Publisher signed the digest at SignedAt; it arrived AgeMs ago.
	Publisher string         `json:"publisher"`
	SignedAt  time.Time      `json:"signed_at"`
	AgeMs     int64          `json:"age_ms"`
	Members   []MarketMember `json:"members,omitempty"`
}

// MarketMember is a peer of a shard, as its digest names it.
type MarketMember struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs"`
}
