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
	// placement is charged there. Queues and the starving tier are lists of
	// positions in m.jobs, carved from one array.
	jobs := m.jobs
	pos := make([]int32, len(jobs))
	nStarving := 0
	for i := range jobs {
		if j := &jobs[i]; m.isStarving(j) {
			nStarving++
			j.sub.n--
		}
	}
	starving := pos[:0:nStarving]
	next := nStarving
	for _, q := range m.subs {
		q.pos = pos[next:next]
		next += q.n
	}
	for i := range jobs {
		if j := &jobs[i]; m.isStarving(j) {
			starving = append(starving, int32(i))
		} else {
			j.sub.pos = append(j.sub.pos, int32(i))
		}
	}
	m.sortByAge(starving)
	for _, q := range m.subs {
		if len(q.pos) > 1 {
			m.sortByAge(q.pos)
		}
	}
	// Copy the jobs into the order they will be visited in: walking them
	// is then walking memory forward (the starving tier) or a thousand
	// short runs (the queues), not a hundred thousand cache misses.
	ordered := make([]jobState, len(jobs))
	for k, i := range pos {
		ordered[k] = jobs[i]
	}
	m.jobs = ordered

	for k := range starving {
		visit(&ordered[k])
	}
	h := submitterHeap(m.subs)
	live := h[:0]
	next = nStarving
	for _, q := range h {
		if len(q.pos) > 0 {
			q.jobs = ordered[next : next+len(q.pos)]
			next += len(q.pos)
			live = append(live, q)
		}
		q.pos = nil
	}
	h = live
	h.init()
	for len(h) > 0 {
		q := h[0]
		j := &q.jobs[0]
		q.jobs = q.jobs[1:]
		visit(j) // charges q.use when j is placed
		if len(q.jobs) == 0 {
			h.pop()
		} else {
			h.down(0)
		}
	}
}

func (m *matcher) isStarving(j *jobState) bool {
	return m.starving > 0 && m.now-j.at >= m.starving
}

// sortByAge sorts positions in m.jobs by compareAge. Instants rarely tie,
// so it first sorts packed integers (instant, place in ps) with the
// specialized integer sort, then orders each run of equal instants by the
// full comparison: the same result as sorting with compareAge throughout,
// several times faster than calling a comparison function for each pair.
func (m *matcher) sortByAge(ps []int32) {
	const posBits = 24
	n := len(ps)
	if n < 2 {
		return
	}
	jobs := m.jobs
	byAge := func(a, b int32) int { return m.compareAge(&jobs[a], &jobs[b]) }
	lo, hi := jobs[ps[0]].at, jobs[ps[0]].at
	for _, i := range ps {
		lo, hi = min(lo, jobs[i].at), max(hi, jobs[i].at)
	}
	if n >= 1<<posBits || uint64(hi)-uint64(lo) >= 1<<(64-posBits) {
		slices.SortFunc(ps, byAge)
		return
	}
	keys := make([]uint64, n)
	for k, i := range ps {
		keys[k] = (uint64(jobs[i].at)-uint64(lo))<<posBits | uint64(k)
	}
	slices.Sort(keys)
	sorted := make([]int32, n)
	for k, key := range keys {
		sorted[k] = ps[key&(1<<posBits-1)]
	}
	for i := 0; i < n; {
		k := i + 1
		for k < n && jobs[sorted[k]].at == jobs[sorted[i]].at {
			k++
		}
		if k-i > 1 {
			slices.SortFunc(sorted[i:k], byAge)
		}
		i = k
	}
	copy(ps, sorted)
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
	use   int64      // GPU-ms: recent use plus what this pass has charged
	order uint64     // H(seed ‖ submitter)
	n     int        // its jobs, then those not starving, while the queues are built
	pos   []int32    // their positions in m.jobs, while they are sorted
	jobs  []jobState // then the jobs themselves, in the order of the walk
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
