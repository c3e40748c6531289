package digest

import (
	"slices"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Turn is what a node knows when it asks whether to publish its shard's
// digest now.
type Turn struct {
	Self peer.ID
	// Members are the shard's members in the node's view: the providers
	// whose offers it holds, itself included where it offers.
	Members []peer.ID
	Now     time.Time
	// Since is when the node began to hear the digest topic: a successor
	// counts the shard's silence from then at the earliest.
	Since time.Time
	// Last is the newest digest of the shard the node holds; nil: none.
	Last *Entry
	// Fresh is the digest the node would publish now.
	Fresh wire.DigestBody
}

// Why a node publishes (Decide).
const (
	WhyFirst     = "first"     // first in the round's order, its digest due
	WhySuccessor = "successor" // second, and the shard silent past Successor
	WhyChange    = "change"    // its publisher, and the market moved past ChangeShare
	WhyOutrank   = "outrank"   // first in the round's order, the digest held of the round by a member ranked after it
)

// Decide says whether the node publishes its shard's digest now, and why:
// the first member in the round's Order does once the last digest is
// Every old, or at once when providers or free GPUs moved by more than
// ChangeShare since it (no sooner than MinGap after it); the second does
// the same when no digest of the shard came for Successor, the first
// being silent. Every other member stays silent: one digest per shard
// per round, whoever reads the network. The first also publishes at once
// when the digest held is of its round and signed by a member ranked
// after it, which every peer's Book replaces with its own (Admit): a
// member that publishes first does not silence the round's publisher.
func (t Timing) Decide(turn Turn) (publish bool, why string) {
	round := Round(turn.Now, t.every())
	order := Order(round, turn.Members)
	pos := slices.Index(order, turn.Self)
	if pos < 0 || pos > 1 {
		return false, ""
	}
	if turn.Now.Sub(turn.Since) < t.MinGap() {
		return false, "" // not yet heard the topic long enough to know
	}
	if l := turn.Last; pos == 0 && l != nil && l.Publisher != turn.Self &&
		Round(l.SignedAt, t.every()) == round && RanksBefore(round, turn.Self, l.Publisher) {
		return true, WhyOutrank
	}
	var lastAt time.Time
	if turn.Last != nil {
		lastAt = turn.Last.Arrived
		if turn.Now.Sub(lastAt) < t.MinGap() {
			return false, ""
		}
	}
	why = WhyFirst
	if pos == 1 {
		if turn.Now.Sub(later(lastAt, turn.Since)) < t.Successor() {
			return false, ""
		}
		why = WhySuccessor
	}
	switch {
	case turn.Last == nil || turn.Now.Sub(lastAt) >= t.every():
		return true, why
	case Changed(turn.Last.Body, turn.Fresh):
		return true, WhyChange
	}
	return false, ""
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ChangeShare is the change in a shard's providers or free GPUs, as a
// share of the last digest's, past which its publisher publishes at once.
const ChangeShare = 0.10

// Changed reports whether fresh differs from last by more than
// ChangeShare in providers or in free GPUs.
func Changed(last, fresh wire.DigestBody) bool {
	return moved(last.Providers, fresh.Providers) || moved(FreeGPUs(last), FreeGPUs(fresh))
}

func moved(was, now int) bool {
	d := now - was
	if d < 0 {
		d = -d
	}
	return float64(d) > ChangeShare*float64(was)
}

// FreeGPUs is how many GPUs a digest counts free: each box's free GPUs,
// those of the last bucket counted at its floor.
func FreeGPUs(b wire.DigestBody) int {
	n := 0
	for k, c := range b.FreeBoxes {
		n += k * c
	}
	return n
}
