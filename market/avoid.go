package market

import (
	"cmp"
	"maps"
	"slices"
)

// Avoided providers. A job's Avoid list names providers that failed it (did
// not propose when Match assigned it to them, or signed a lease and never
// started the run); its submitter re-announces the job with the list, and
// every peer's Match then skips those providers for that job alone. Across
// jobs, a provider's failures are the number of distinct submitters that
// name it in the avoid lists of the view's jobs; best fit breaks ties of fit
// against the provider with more (fitKey), before the rendezvous weight.

// buildAvoid resolves the avoid lists of the valid open jobs to providers
// of the view and counts each provider's failures. It costs nothing when no
// job avoids anyone.
func (m *matcher) buildAvoid(n *normalized) {
	var submitters map[int32][]string
	byID := func(id string) (int32, bool) {
		i, ok := slices.BinarySearchFunc(m.provs, id, func(p provider, id string) int { return cmp.Compare(p.id, id) })
		return int32(i), ok
	}
	// Failures count over every job of the view, leased or not: a job
	// leased elsewhere after avoiding a provider is still a live, signed
	// statement that it failed.
	for _, j := range n.jobs {
		for _, id := range sortedStrings(j.Avoid) {
			pi, ok := byID(id)
			if !ok {
				continue
			}
			if submitters == nil {
				submitters = make(map[int32][]string)
			}
			if !slices.Contains(submitters[pi], j.Submitter) {
				submitters[pi] = append(submitters[pi], j.Submitter)
			}
		}
	}
	if submitters == nil {
		return
	}
	for pi, subs := range submitters {
		p := &m.provs[pi]
		if p.class != nil {
			m.ix.remove(p)
		}
		p.failures = int32(min(len(subs), 1<<30))
		m.ix.add(p)
	}
	byJob := make(map[string][]string)
	for _, j := range n.jobs {
		if len(j.Avoid) > 0 {
			byJob[j.ID] = j.Avoid
		}
	}
	for i := range m.jobs {
		js := &m.jobs[i]
		var avoid []int32
		for _, id := range byJob[js.id] {
			if pi, ok := byID(id); ok && !slices.Contains(avoid, pi) {
				avoid = append(avoid, pi)
			}
		}
		if avoid != nil {
			m.avoid = append(m.avoid, avoid)
			js.avoid = int32(len(m.avoid))
		}
	}
}

// avoids reports whether j must not go to p.
func (m *matcher) avoids(j *jobState, p *provider) bool {
	return j.avoid != 0 && slices.Contains(m.avoid[j.avoid-1], p.idx)
}

// processAvoiding is process for a job with an avoid list: the providers
// it avoids leave the index for its search and come back after. What the
// search learns about the job's request (no room in the index, nothing to
// reserve) holds for this job only, so it is not kept for the others that
// ask the same.
func (m *matcher) processAvoiding(j *jobState, rank int, avoid []int32) bool {
	s := j.shape
	indexDead, noReserve := s.indexDead, s.noReserve
	// The cut shape, like the job's own, is shared with jobs that avoid
	// no one: what this job finds without its avoided providers is not
	// what they would.
	cutDead := false
	if j.cut != nil {
		cutDead = j.cut.indexDead
	}
	var out []*provider
	for _, pi := range avoid {
		if p := &m.provs[pi]; p.class != nil {
			m.ix.remove(p)
			out = append(out, p)
		}
	}
	p, ok := m.place(j)
	for _, q := range out {
		if q.class == nil && q.res == nil {
			m.ix.add(q)
		}
	}
	if j.cut != nil {
		j.cut.indexDead = cutDead
	}
	if ok {
		s.indexDead = indexDead
		m.assign(j, p, rank)
		return true
	}
	m.holdFor(j)
	s.indexDead, s.noReserve = indexDead, noReserve
	m.waiting = append(m.waiting, waitNote{id: j.id, shape: j.shape, res: j.res, avoid: j.avoid})
	return false
}

// countAside is counts, the reasons a job's offers turned it away, with
// the providers in aside that could take the job, now or once free,
// counted under as instead of busy, reserved or free: for a job with an
// avoid list, ReasonAvoided, so that a job kept from free offers by its
// own list does not read as waiting for busy ones; for a gang, also
// ReasonOtherPart for the providers running its leased parts. One that
// could never take the job keeps its reason.
//
// free is what an offer with room now was counted as: ReasonBusy for a
// lone job (see countReasons), ReasonFree for a gang.
func (m *matcher) countAside(s *demandShape, counts map[string]int, aside []int32, as, free string) map[string]int {
	out := maps.Clone(counts)
	for _, pi := range aside {
		p := &m.provs[pi]
		r := firstFailure(&m.filters, &s.demand, &p.shape)
		switch {
		case r == "" && p.class == nil:
			r = ReasonReserved
		case r == "":
			r = free
		case r != ReasonBusy && r != ReasonCPUs && r != ReasonMemory:
			continue // it could never take the job
		}
		if out[r] == 0 {
			continue // not among the offers counted
		}
		if out[r]--; out[r] == 0 {
			delete(out, r)
		}
		out[as]++
	}
	return out
}
