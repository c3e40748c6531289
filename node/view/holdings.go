package view

import (
	"container/heap"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// holdings is what the identities a view has seen hold in it, against its
// Bounds, and what the bounds did: the bookkeeping of doc.go's "Bounds".
// It is part of a Market and guarded by the Market's mu; it never reads
// the Market's jobs itself: where it must know whether a declaration is
// still in the view, the Market passes in a held func that looks.
type holdings struct {
	// bounds are what the view holds at most, all submitters together;
	// set when the Market is made, never changed after.
	bounds Bounds
	// holders holds every identity the view has seen declare or offer,
	// with what it holds; young and known order those that hold anything
	// (Self aside) for eviction, by tier, and byAge the young by when
	// they grow known; held is what all hold.
	holders map[peer.ID]*holder
	young   tier
	known   tier
	byAge   *holderHeap
	held    [dims]int64
	// refused and evicted count what the bounds did, by reason; round is
	// what they did since the last TakeEvictions.
	refused map[string]uint64
	evicted map[string]uint64
	round   evictionRound
}

// heldFunc reports whether r, one of h's declarations, is still in the
// view.
type heldFunc func(h *holder, r declRef) bool

func newHoldings(b Bounds) holdings {
	return holdings{
		bounds:  b.withDefaults(),
		holders: make(map[peer.ID]*holder),
		young:   newTier(),
		known:   newTier(),
		byAge:   ageHeap(),
		refused: make(map[string]uint64),
		evicted: make(map[string]uint64),
		round:   evictionRound{evicted: make(map[peer.ID]int)},
	}
}

// holder returns the holder of id, seen at now, creating it.
func (s *holdings) holder(id peer.ID, now time.Time) *holder {
	h, ok := s.holders[id]
	if !ok {
		h = &holder{id: id, first: s.firstSeen(id, now), last: now, idx: [slots]int{-1, -1, -1}}
		s.holders[id] = h
	}
	if now.After(h.last) {
		h.last = now
	}
	return h
}

// firstSeen is when this view first saw id, which it sees at now: now,
// or the first offer of a provider.
func (s *holdings) firstSeen(id peer.ID, now time.Time) time.Time {
	if h, ok := s.holders[id]; ok {
		return h.first
	}
	if s.bounds.SeenSince != nil {
		if t, ok := s.bounds.SeenSince(id); ok && t.Before(now) {
			return t
		}
	}
	return now
}

// touch notes that submitter announced again at now.
func (s *holdings) touch(submitter peer.ID, now time.Time) {
	if h, ok := s.holders[submitter]; ok && now.After(h.last) {
		h.last = now
	}
}

// hold counts a declaration that entered the view for h: jobs entries,
// bytes, and a place on h's list as its newest.
func (s *holdings) hold(h *holder, ref declRef, jobs int, bytes int64, now time.Time) {
	h.decls = append(h.decls, ref)
	h.live++
	s.add(h, [dims]int64{int64(jobs), bytes}, now)
}

// add adds delta to what h holds and to the view's totals, and keeps h's
// place in the heaps.
func (s *holdings) add(h *holder, delta [dims]int64, now time.Time) {
	for d := range dims {
		h.held[d] += delta[d]
		s.held[d] += delta[d]
	}
	in := h.idx[dimJobs] >= 0
	switch {
	case h.id == s.bounds.Self:
	case h.live > 0 && !in:
		h.young = now.Sub(h.first) < s.bounds.NewFor
		t := s.tierOf(h)
		for d := range dims {
			heap.Push(t[d], h)
		}
		if h.young {
			heap.Push(s.byAge, h)
		}
	case h.live == 0 && in:
		t := s.tierOf(h)
		for d := range dims {
			heap.Remove(t[d], h.idx[d])
		}
		if h.young {
			heap.Remove(s.byAge, h.idx[slotAge])
		}
	case in:
		t := s.tierOf(h)
		for d := range dims {
			heap.Fix(t[d], h.idx[d])
		}
	}
}

func (s *holdings) tierOf(h *holder) tier {
	if h.young {
		return s.young
	}
	return s.known
}

// unhold counts one entry of jobs (a job or a task) that left the view,
// and bytes with it; last says the declaration left with it.
func (s *holdings) unhold(submitter peer.ID, bytes int64, last bool, now time.Time, held heldFunc) {
	h, ok := s.holders[submitter]
	if !ok {
		return
	}
	if last {
		h.live--
		if len(h.decls) > 2*h.live+16 {
			h.decls = slices.DeleteFunc(h.decls, func(r declRef) bool { return !held(h, r) })
		}
	}
	s.add(h, [dims]int64{-1, -bytes}, now)
}

// newest is the newest declaration h still holds.
func (s *holdings) newest(h *holder, held heldFunc) (declRef, bool) {
	for len(h.decls) > 0 {
		r := h.decls[len(h.decls)-1]
		if held(h, r) {
			return r, true
		}
		h.decls = h.decls[:len(h.decls)-1]
	}
	return declRef{}, false
}

// retier moves the holders no longer new at now to the known tier.
func (s *holdings) retier(now time.Time) {
	for h := s.byAge.top(); h != nil && now.Sub(h.first) >= s.bounds.NewFor; h = s.byAge.top() {
		heap.Pop(s.byAge)
		for d := range dims {
			heap.Remove(s.young[d], h.idx[d])
		}
		h.young = false
		for d := range dims {
			heap.Push(s.known[d], h)
		}
	}
}

// forget drops the identities that hold nothing and were last seen more
// than keep before now.
func (s *holdings) forget(now time.Time, keep time.Duration) {
	for id, h := range s.holders {
		if h.live == 0 && now.Sub(h.last) > keep {
			delete(s.holders, id)
		}
	}
}
