package market

import (
	"cmp"
	"slices"
)

// The priority order of one pass:
//
//  1. The starving tier: jobs at least StarvingAfter old, oldest first. It
//     ignores fairness between submitters on purpose; it is what bounds the
//     wait of a job that fairness alone would keep postponing.
//  2. Everyone else, by dominant share (below), lowest first, ties by
//     H(seed ‖ submitter); within a submitter by SubmittedAt, then
//     H(seed ‖ job).
//
// The share is recomputed as the pass assigns (progressive filling, as in
// dominant resource fairness): a submitter whose job was just placed is
// charged its declared GPU time at once, so two submitters with equal use
// alternate instead of one taking every free device.
//
// Only GPU time is metered, so the dominant share is the GPU share,
// use / capacity. The capacity is the same for every submitter, so shares
// are compared by comparing GPU-milliseconds: exact integer arithmetic, no
// division, nothing for two peers to round differently.

// walk calls visit for each job in priority order. Placing a job charges
// its submitter (jobState.sub) before the next pick.
func (m *matcher) walk(visit func(*jobState) bool) {
	// One queue per submitter (buildJobs made them, in ID order of their
	// first job, though the heap's total order makes even that irrelevant).
	// A starving job belongs to its submitter's record too, so that its
	// placement is charged there.
	h := submitterHeap(m.subs)
	starving := make([]*jobState, 0, len(m.jobs))
	for _, j := range m.jobs {
		if m.starving > 0 && m.now-j.at >= m.starving {
			starving = append(starving, j)
		} else {
			j.sub.jobs = append(j.sub.jobs, j)
		}
	}
	m.sortByAge(starving)
	for _, j := range starving {
		visit(j)
	}

	live := h[:0]
	for _, q := range h {
		if len(q.jobs) > 0 {
			m.sortByAge(q.jobs)
			live = append(live, q)
		}
	}
	h = live
	h.init()
	for len(h) > 0 {
		q := h[0]
		j := q.jobs[0]
		q.jobs = q.jobs[1:]
		visit(j) // charges q.use when j is placed
		if len(q.jobs) == 0 {
			h.pop()
		} else {
			h.down(0)
		}
	}
}

// sortByAge sorts js with compareAge. Instants rarely tie, so it first
// sorts packed integers (instant, position) with the specialized integer
// sort, then orders each run of equal instants by the full comparison: the
// same result as sorting with compareAge throughout, several times faster
// than calling a comparison function through a pointer for each pair.
func (m *matcher) sortByAge(js []*jobState) {
	const posBits = 24
	n := len(js)
	if n < 2 {
		return
	}
	lo, hi := js[0].at, js[0].at
	for _, j := range js {
		lo, hi = min(lo, j.at), max(hi, j.at)
	}
	if n >= 1<<posBits || uint64(hi)-uint64(lo) >= 1<<(64-posBits) {
		slices.SortFunc(js, m.compareAge)
		return
	}
	keys := make([]uint64, n)
	for i, j := range js {
		keys[i] = (uint64(j.at)-uint64(lo))<<posBits | uint64(i)
	}
	slices.Sort(keys)
	sorted := make([]*jobState, n)
	for i, k := range keys {
		sorted[i] = js[k&(1<<posBits-1)]
	}
	for i := 0; i < n; {
		k := i + 1
		for k < n && sorted[k].at == sorted[i].at {
			k++
		}
		if k-i > 1 {
			slices.SortFunc(sorted[i:k], m.compareAge)
		}
		i = k
	}
	copy(js, sorted)
}

// compareAge orders jobs by SubmittedAt, then H(seed ‖ job), then ID.
func (m *matcher) compareAge(a, b *jobState) int {
	if c := cmp.Compare(a.at, b.at); c != 0 {
		return c
	}
	if c := cmp.Compare(a.h, b.h); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

type submitterQueue struct {
	name  string
	use   int64  // GPU-ms: recent use plus what this pass has charged
	order uint64 // H(seed ‖ submitter)
	jobs  []*jobState
}

func (a *submitterQueue) less(b *submitterQueue) bool {
	if a.use != b.use {
		return a.use < b.use
	}
	if a.order != b.order {
		return a.order < b.order
	}
	return a.name < b.name
}

// submitterHeap is a binary min-heap; its order is total, so the pick never
// depends on how the heap happens to be laid out.
type submitterHeap []*submitterQueue

func (h submitterHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h submitterHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			c = r
		}
		if !h[c].less(h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

func (h *submitterHeap) pop() {
	old := *h
	n := len(old) - 1
	old[0] = old[n]
	old[n] = nil
	*h = old[:n]
	h.down(0)
}
