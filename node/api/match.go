package api

import "github.com/e31network/e31/market"

// Match is one epoch's Match result on a node: what it decided, with the
// hash of the view it decided on. Peers holding the same view decide the
// same.
type Match struct {
	Epoch    uint64 `json:"epoch"`
	ViewHash string `json:"view_hash"`
	Jobs     int    `json:"jobs"`
	// DelayMs is the epoch delay the view was cut with.
	DelayMs     int64               `json:"delay_ms"`
	Assignments []market.Assignment `json:"assignments"`
	// Fast marks a pass between epochs, on the view as it stood then
	// (straight to rent), rather than an epoch's frozen view.
	Fast bool `json:"fast,omitempty"`
	// CutMs is how long cutting the pass's view took on this node (zero
	// for a pass between epochs), MatchMs how long Match took on it.
	CutMs   float64 `json:"cut_ms,omitempty"`
	MatchMs float64 `json:"match_ms,omitempty"`
}
