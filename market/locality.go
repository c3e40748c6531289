package market

import (
	"cmp"
	"slices"

	"github.com/bits-and-blooms/bloom/v3"
)

// Locality: among the providers that can take a job now, the one holding
// the most of the job's bytes wins, then best fit, then the rendezvous
// weight. Only jobs that list data pay for it: the holders of a root are
// found once per pass through an index of listed roots and a test of each
// provider's filter, and a job with data then looks at its holders alone.

// jobLocal is what locality needs of one job with data.
type jobLocal struct {
	data      []Datum // by root, each root once
	waitUntil int64   // until when it may wait for a holder; 0: never waits
}

// holdings indexes what the view's offers hold. Built on first use, so a
// pass without jobs that weigh data never decodes a filter.
type holdings struct {
	listed  map[string][]int32 // root → providers listing it, by index
	blooms  []heldBloom        // by provider index
	holders map[string][]int32 // root → every provider holding it, cached
	sums    []uint64           // per provider: bytes of the current job held
	marked  []bool             // per provider: in touched
	touched []int32
}

type heldBloom struct {
	idx int32
	f   *bloom.BloomFilter
}

func (m *matcher) buildHoldings(n *normalized) {
	h := &holdings{
		listed:  make(map[string][]int32),
		holders: make(map[string][]int32),
		sums:    make([]uint64, len(m.provs)),
		marked:  make([]bool, len(m.provs)),
	}
	for i, o := range n.offers {
		for _, d := range o.Holdings.Roots {
			if l := h.listed[d.Root]; len(l) == 0 || l[len(l)-1] != int32(i) {
				h.listed[d.Root] = append(l, int32(i))
			}
		}
		if len(o.Holdings.Bloom) > 0 {
			// A filter that does not decode says nothing; offers are
			// checked on arrival, so only a hand-made view has one.
			if f, err := decodeBloom(o.Holdings.Bloom); err == nil {
				h.blooms = append(h.blooms, heldBloom{int32(i), f})
			}
		}
	}
	if len(h.listed) == 0 && len(h.blooms) == 0 {
		return
	}
	var roots []string
	seen := make(map[string]bool)
	for _, l := range m.locals {
		for _, d := range l.data {
			if !seen[d.Root] {
				seen[d.Root] = true
				roots = append(roots, d.Root)
			}
		}
	}
	h.findHolders(roots)
	m.held = h
}

// holdersOf returns the providers that list root or whose filter has it,
// by index; buildHoldings found them for every root a job reads.
func (h *holdings) holdersOf(root string) []int32 { return h.holders[root] }

// findHolders tests every root that jobs read against every filter. It
// walks filter by filter, so that each filter's bits stay in cache while
// all roots are tested, and hashes each root once for all filters (a
// filter with k hashes reads the first k locations). A false positive
// only makes a provider look like a holder; the job then stages its data
// there as it would anywhere.
func (h *holdings) findHolders(roots []string) {
	found := make([][]int32, len(roots))
	if len(h.blooms) > 0 {
		locs := make([][]uint64, len(roots))
		for i, r := range roots {
			locs[i] = bloom.Locations([]byte(r), maxHoldingsBloomK)
		}
		for _, b := range h.blooms {
			k := b.f.K()
			for i := range roots {
				if b.f.TestLocations(locs[i][:k]) {
					found[i] = append(found[i], b.idx)
				}
			}
		}
	}
	for i, r := range roots {
		hs := append(found[i], h.listed[r]...)
		slices.Sort(hs)
		h.holders[r] = slices.Compact(hs)
	}
}

// localJob records what locality needs of j, or returns 0 when the job
// has nothing to weigh; otherwise the position in m.locals plus one.
func (m *matcher) localJob(j *Job) int32 {
	if len(j.Data) == 0 || j.Request.Locality == LocalityOff {
		return 0
	}
	data := slices.Clone(j.Data)
	slices.SortFunc(data, func(a, b Datum) int {
		if c := cmp.Compare(a.Root, b.Root); c != 0 {
			return c
		}
		return cmp.Compare(b.Size, a.Size)
	})
	// A root read twice is held or not as one, at its largest size.
	data = slices.CompactFunc(data, func(a, b Datum) bool { return a.Root == b.Root })
	l := jobLocal{data: data}
	if w := j.Request.LocalityWait; w > 0 && w <= MaxLocalityWait {
		l.waitUntil = satAdd(j.SubmittedAt, int64(w))
	}
	m.locals = append(m.locals, l)
	return int32(len(m.locals))
}

// placeLocal returns the provider that can take j now and holds the most of
// its bytes, or nil. wait reports that j should rather wait for a holder:
// it may still (its locality wait has not run out and it is not starving),
// none can take it now, and one could once it has room.
func (m *matcher) placeLocal(j *jobState) (best *provider, wait bool) {
	l := &m.locals[j.local-1]
	h := m.held
	touched := h.touched[:0]
	for _, d := range l.data {
		for _, pi := range h.holdersOf(d.Root) {
			if !h.marked[pi] {
				h.marked[pi] = true
				touched = append(touched, pi)
			}
			h.sums[pi] = satAddUint(h.sums[pi], d.Size)
		}
	}
	h.touched = touched
	d := &j.shape.demand
	end := satAdd(m.now, int64(j.limit))
	var bestHeld uint64
	var bestFit fitKey
	var bestW uint64
	couldWait := false
	for _, pi := range touched {
		held := h.sums[pi]
		h.sums[pi], h.marked[pi] = 0, false
		if held == 0 {
			continue // holds only roots of unknown size
		}
		if j.avoid != 0 && slices.Contains(m.avoid[j.avoid-1], pi) {
			continue // its submitter named it for failing this job
		}
		p := &m.provs[pi]
		if p.picked {
			continue // taken by another part of the gang being placed
		}
		if (p.res != nil && end > p.res.from) || firstFailure(&m.filters, d, &p.shape) != "" {
			if !couldWait && l.waitUntil > m.now && m.couldEverFit(d, p) {
				couldWait = true
			}
			continue
		}
		f := fitKey{gpusLeft: p.shape.avail.total - d.gpus, memLeft: p.shape.mem - d.mem, price: p.shape.static.price, failures: p.failures}
		w := j.h ^ m.ix.arena.hash[p.idx]
		if best == nil || held > bestHeld || held == bestHeld && betterFit(f, w, p.idx, bestFit, bestW, best.idx) {
			best, bestHeld, bestFit, bestW = p, held, f, w
		}
	}
	if best != nil {
		return best, false
	}
	return nil, couldWait && !m.isStarving(j)
}

// betterFit orders two providers that hold as much: best fit, then the
// rendezvous weight, then the provider number, as place does.
func betterFit(f fitKey, w uint64, idx int32, bf fitKey, bw uint64, bidx int32) bool {
	if c := f.compare(bf); c != 0 {
		return c < 0
	}
	return w < bw || w == bw && idx < bidx
}
