package view

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The fair share and the line of eviction (doc.go, "Bounds"): who is over
// its share of a bound, and who goes first to make room. Like the rest of
// holdings, guarded by the Market's mu.

// over is the dimension the view is over its bound in, jobs first; ok is
// false when it is within both.
func (s *holdings) over() (dimension, bool) {
	if s.bounds.Jobs >= 0 && s.held[dimJobs] > int64(s.bounds.Jobs) {
		return dimJobs, true
	}
	if s.bounds.DeclarationBytes >= 0 && s.held[dimBytes] > s.bounds.DeclarationBytes {
		return dimBytes, true
	}
	return 0, false
}

func (s *holdings) capOf(d dimension) int64 {
	if d == dimJobs {
		return int64(s.bounds.Jobs)
	}
	return s.bounds.DeclarationBytes
}

// fits reports whether a declaration of n jobs and size bytes could be
// held at all, and if not, which bound it passes alone.
func (s *holdings) fits(n, size int) (string, bool) {
	switch {
	case s.bounds.Jobs >= 0 && n > s.bounds.Jobs:
		return BoundJobs, false
	case s.bounds.DeclarationBytes >= 0 && int64(size) > s.bounds.DeclarationBytes:
		return BoundBytes, false
	}
	return "", true
}

// victim is the holder to evict from while the view is over its bound in
// d: of the holders over their fair share in d (more than the bound over
// the number of holders), the new before the known, the largest first
// (victimHeap). Someone is over that share whenever the view is over its
// bound, unless Self holds the excess; then the largest other holder is
// taken, new before known, and nil means only Self holds anything.
func (s *holdings) victim(d dimension) *holder {
	over := func(h *holder) bool { return h != nil && s.overShare(h.held[d], d) }
	young, known := s.young[d].top(), s.known[d].top()
	switch {
	case over(young):
		return young
	case over(known):
		return known
	case young != nil && (known == nil || young.held[d] >= known.held[d]):
		return young
	}
	return known
}

// count is how many identities hold anything, Self included.
func (s *holdings) count() int64 {
	n := int64(s.young[dimJobs].Len() + s.known[dimJobs].Len())
	if self := s.holders[s.bounds.Self]; s.bounds.Self != "" && self != nil && self.live > 0 {
		n++
	}
	return n
}

// overShare reports whether holding held in d is over a holder's fair
// share of its bound: more than the bound over the number of holders.
func (s *holdings) overShare(held int64, d dimension) bool {
	return held*s.count() > s.capOf(d)
}

// ahead reports whether holder t goes before holder h (holding held in d)
// to make room: t is new and h known, or both are alike and t holds
// strictly more. A tie goes against the one who would take the room: an
// identity over its share cannot push out another that holds no more
// than it would, which would only trade places with it at every
// re-announcement.
func ahead(t *holder, h *holder, held int64, d dimension) bool {
	if t.young != h.young {
		return t.young
	}
	return t.held[d] > held
}

// refuses reports whether admitLocked would refuse, at its first step, a
// declaration of delta (jobs, bytes) by signer arriving at now, and for
// which bound: the first the view would pass, jobs first, and signer over
// its share there and first in line. AddJob asks it before it adds an
// array's tasks, which cost far more to add and take out again than to
// refuse.
func (s *holdings) refuses(signer peer.ID, now time.Time, delta [dims]int64) (dimension, bool) {
	if signer == s.bounds.Self && signer != "" {
		return 0, false
	}
	d := dimJobs
	switch {
	case s.capOf(dimJobs) >= 0 && s.held[dimJobs]+delta[dimJobs] > s.capOf(dimJobs):
	case s.capOf(dimBytes) >= 0 && s.held[dimBytes]+delta[dimBytes] > s.capOf(dimBytes):
		d = dimBytes
	default:
		return 0, false // room
	}
	s.retier(now)
	h := s.holders[signer]
	me := &holder{id: signer, first: s.firstSeen(signer, now)}
	n := s.count()
	held := delta[d]
	if h != nil && h.idx[dimJobs] >= 0 {
		held += h.held[d]
		me.young = h.young
	} else {
		n++
		if h != nil {
			held += h.held[d]
		}
		me.young = now.Sub(me.first) < s.bounds.NewFor
	}
	if held*n <= s.capOf(d) {
		return 0, false // within its share
	}
	// Over its share: refused unless another holder over its own goes
	// first (ahead).
	for _, t := range []*holderHeap{s.young[d], s.known[d]} {
		top := t.top()
		if top == h && t.Len() > 1 {
			// Its own place counts what it holds now: look past it.
			top = t.s[1]
			if t.Len() > 2 && t.less(t.s[2], top) {
				top = t.s[2]
			}
		} else if top == h {
			top = nil
		}
		if top != nil && top.held[d]*n > s.capOf(d) && ahead(top, me, held, d) {
			return 0, false
		}
	}
	return d, true
}
