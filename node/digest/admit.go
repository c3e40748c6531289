package digest

import (
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Admit says whether fresh, a digest of the shard of held, may replace
// held, the digest the node holds of it; nil: it may. The held digest
// is that of the best-ranked signer of its round (Order, which every peer
// derives alike), so that no member of the shard crowds out the elected
// publisher by publishing first:
//
//   - a repeat from held's signer comes no sooner than MinGap after it
//     (the flood bound), and is not signed before it;
//   - a digest of held's round from a signer ranked before held's
//     replaces it at once, MinGap notwithstanding;
//   - one of held's round from a signer ranked after held's waits until
//     held is Every old (a successor publishes only after Successor of
//     silence, so by then the first is silent);
//   - one of a later round comes no sooner than MinGap after held, and
//     one of an earlier round is refused.
func (t Timing) Admit(held, fresh Entry) error {
	gap := fresh.Arrived.Sub(held.Arrived)
	if fresh.Publisher == held.Publisher {
		if gap < t.MinGap() {
			return fmt.Errorf("%w: %v after its last, at most one per %v", errRepeat, gap.Round(time.Millisecond), t.MinGap())
		}
		if fresh.SignedAt.Before(held.SignedAt) {
			return errOvertaken
		}
		return nil
	}
	every := t.every()
	round, heldRound := Round(fresh.SignedAt, every), Round(held.SignedAt, every)
	switch {
	case round < heldRound:
		return fmt.Errorf("%w: of round %d, the one held of round %d", errOvertaken, round, heldRound)
	case round == heldRound:
		if RanksBefore(round, fresh.Publisher, held.Publisher) {
			return nil
		}
		if gap < every {
			return fmt.Errorf("%w: ranked after %s in round %d, whose digest came %v ago, under %v", errOutranked, held.Publisher, round, gap.Round(time.Millisecond), every)
		}
		return nil
	}
	if gap < t.MinGap() {
		return fmt.Errorf("%w: %v after the last, at most one per %v", errTooSoon, gap.Round(time.Millisecond), t.MinGap())
	}
	return nil
}

// Why Admit refuses a digest.
var (
	errRepeat    = errors.New("a repeat from its signer")
	errOvertaken = errors.New("signed before the one held")
	errOutranked = errors.New("its signer ranks after the held one's")
	errTooSoon   = errors.New("too soon after the shard's last")
)

// RanksBefore reports whether a comes before b in round's Order.
func RanksBefore(round int64, a, b peer.ID) bool {
	o := Order(round, []peer.ID{a, b})
	return len(o) == 2 && o[0] == a
}
