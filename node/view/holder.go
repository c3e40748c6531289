package view

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// holder is an identity this view has seen, and what it holds in it.
type holder struct {
	id peer.ID
	// first is when this view first saw the identity (Bounds.SeenSince);
	// last when it last declared or re-announced: it is forgotten once it
	// holds nothing and last is older than Prune's keep.
	first, last time.Time
	// held is what it holds: jobs (tasks and parts each one) and bytes
	// of declarations, by dimension.
	held [dims]int64
	// decls are its declarations in the order they entered the view, the
	// newest last, some of them gone already (live tells).
	decls []declRef
	// live counts those of decls that are still held.
	live int
	// young: in the new tier (Bounds.NewFor). idx is its place in its
	// tier's heap of each dimension, and while young in the heap of the
	// new by age (slotAge); -1 when in none (it holds nothing, or is
	// Self).
	young bool
	idx   [slots]int
}

// slotAge is a holder's place in the heap of the new by age, after its
// places in the heaps by dimension.
const (
	slotAge = int(dims)
	slots   = slotAge + 1
)

// declRef names a declaration a holder brought: a single job's ID, or an
// array's (or gang's); seq tells this entry from an earlier one of the
// same ID that left the view and came back.
type declRef struct {
	id  string
	seq uint64
}

// holderHeap is a heap of holders: by victimHeap's order in one
// dimension, or the oldest first (ageHeap).
type holderHeap struct {
	slot int
	less func(a, b *holder) bool
	s    []*holder
}

// victimHeap orders a tier's holders for eviction in dimension d: the
// largest holding first, then the identity first seen most recently,
// then the greatest ID, so that peers holding the same agree.
func victimHeap(d dimension) *holderHeap {
	return &holderHeap{slot: int(d), less: func(a, b *holder) bool {
		if a.held[d] != b.held[d] {
			return a.held[d] > b.held[d]
		}
		if !a.first.Equal(b.first) {
			return a.first.After(b.first)
		}
		return a.id > b.id
	}}
}

// ageHeap orders the new holders by when they were first seen, oldest
// first: the next to grow known.
func ageHeap() *holderHeap {
	return &holderHeap{slot: slotAge, less: func(a, b *holder) bool { return a.first.Before(b.first) }}
}

func (h *holderHeap) Len() int           { return len(h.s) }
func (h *holderHeap) Less(i, j int) bool { return h.less(h.s[i], h.s[j]) }
func (h *holderHeap) Swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	h.s[i].idx[h.slot], h.s[j].idx[h.slot] = i, j
}
func (h *holderHeap) Push(x any) {
	hd := x.(*holder)
	hd.idx[h.slot] = len(h.s)
	h.s = append(h.s, hd)
}
func (h *holderHeap) Pop() any {
	hd := h.s[len(h.s)-1]
	h.s[len(h.s)-1] = nil
	h.s = h.s[:len(h.s)-1]
	hd.idx[h.slot] = -1
	return hd
}

// top is the heap's first holder, nil if none.
func (h *holderHeap) top() *holder {
	if len(h.s) == 0 {
		return nil
	}
	return h.s[0]
}

// tier is the holders of one tier (new or known), a heap per dimension.
type tier [dims]*holderHeap

func newTier() tier {
	var t tier
	for d := range dims {
		t[d] = victimHeap(d)
	}
	return t
}
