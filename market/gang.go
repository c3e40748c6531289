package market

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// Gangs (see Gangs in the package documentation). A job with
// request.nodes N ≥ 2 is N parts in the view, GANG.0 to GANG.N-1. A
// distributed run needs all of them at once: a part started alone holds
// its devices waiting for peers that may never come. So the walk treats a
// gang as one unit, where its best-ordered part falls, and places every
// part then, each on a provider of its own, or none (placeGang). Picking
// a provider for a part takes no room, so the parts never compete for one
// provider's devices; two ranks on one machine would be another topology
// than the one the gang declared. A gang that cannot start reserves one
// provider per part for a common start (reserveGang).
//
// A gang whose missing parts are all leased places its open parts the
// same way, on providers apart from those running the leased ones:
// between epochs providers match on views that differ for a moment, so
// one may lease part 0 while the provider another pass gave part 0 has
// its claim declined, and a gang that waited for every part to be open
// again would wait for its submitter to give it up. Only a gang with a
// part neither open nor leased (closed, withdrawn, pruned) is in flight
// and waits (processGang).
//
// The parts of a gang come from one signed declaration, so they agree on
// their submitter, request and image. A view in which they do not is not
// one any peer built from a declaration: such parts are reported invalid
// rather than guessed at. Avoid lists are the exception: a submitter may
// name a provider for one part, and the whole gang then avoids it.

// gang is a gang of the view, with its open parts.
type gang struct {
	id    string
	nodes int
	// members are the gang's valid open parts as buildJobs met them, by
	// position in m.jobs; parts are copies of them by rank, made once the
	// avoid lists are known, which the pass works on.
	members []gangMember
	parts   []jobState
	// invalid: its parts disagree on what only one declaration sets.
	invalid bool
	// leased is how many of its parts hold a lease in the view, and
	// running the providers of the view holding them, which its open
	// parts leave out as they leave out avoided ones; gone is how many
	// parts are neither open nor leased, which keeps the gang in flight.
	leased, gone int
	running      []int32
	// avoided is its parts' avoid lists merged, less the providers in
	// running: those are counted as running a part when it waits.
	avoided []int32
	visited bool
	// reason and counts are the wait, once worked out, of every part.
	reason string
	counts map[string]int
}

type gangMember struct {
	rank int
	pos  int32
	job  *Job
}

type gangKey struct {
	id    string
	nodes int
}

// gangPart files the valid open job j, at position pos in m.jobs, under
// its gang, and returns the gang's number plus one; or it returns 0 when
// j's ID is not GANG.RANK with RANK below request.nodes, which no
// expansion of a declaration makes.
func (m *matcher) gangPart(j *Job, pos int32) int32 {
	id, rank, ok := SplitTaskID(j.ID)
	if !ok || rank >= j.Request.Nodes {
		return 0
	}
	if m.gangIDs == nil {
		m.gangIDs = make(map[gangKey]int32)
	}
	k := gangKey{id, j.Request.Nodes}
	gi, found := m.gangIDs[k]
	if !found {
		gi = int32(len(m.gangs))
		m.gangIDs[k] = gi
		m.gangs = append(m.gangs, gang{id: id, nodes: j.Request.Nodes})
	}
	g := &m.gangs[gi]
	g.members = append(g.members, gangMember{rank: rank, pos: pos, job: j})
	return gi + 1
}

// buildGangs checks each gang's parts against each other, finds the
// leases of the parts that are not open, merges the avoid lists with the
// providers of those leases, and copies the parts into the gang in rank
// order.
func (m *matcher) buildGangs(n *normalized) {
	if len(m.gangs) == 0 {
		return
	}
	anyInvalid, anyMissing := false, false
	for gi := range m.gangs {
		g := &m.gangs[gi]
		slices.SortFunc(g.members, func(a, b gangMember) int { return cmp.Compare(a.rank, b.rank) })
		lead := g.members[0].job
		for _, p := range g.members[1:] {
			if p.job.Submitter != lead.Submitter || p.job.Request != lead.Request || p.job.Image != lead.Image {
				g.invalid = true
			}
		}
		if g.invalid {
			anyInvalid = true
			for _, p := range g.members {
				m.invalid = append(m.invalid, Wait{Job: p.job.ID, Reason: "invalid gang: its parts differ in submitter, request or image"})
			}
			continue
		}
		anyMissing = anyMissing || len(g.members) < g.nodes
	}
	if anyMissing {
		m.findLeased(n)
	}
	for gi := range m.gangs {
		g := &m.gangs[gi]
		if g.invalid {
			continue
		}
		var avoid []int32
		for _, p := range g.members {
			if a := m.jobs[p.pos].avoid; a != 0 {
				avoid = append(avoid, m.avoid[a-1]...)
			}
		}
		slices.Sort(avoid)
		avoid = slices.Compact(avoid)
		if len(g.running) > 0 {
			g.avoided = slices.DeleteFunc(slices.Clone(avoid), func(pi int32) bool { return slices.Contains(g.running, pi) })
			avoid = append(avoid, g.running...)
			slices.Sort(avoid)
			avoid = slices.Compact(avoid)
		} else {
			g.avoided = avoid
		}
		union := int32(0)
		if len(avoid) > 0 {
			m.avoid = append(m.avoid, avoid)
			union = int32(len(m.avoid))
		}
		g.parts = make([]jobState, len(g.members))
		for i, p := range g.members {
			g.parts[i] = m.jobs[p.pos]
			g.parts[i].avoid = union
		}
	}
	if !anyInvalid {
		return
	}
	// The invalid parts leave the jobs the walk visits, as invalid
	// requests never entered them, and join those in ID order.
	m.jobs = slices.DeleteFunc(m.jobs, func(j jobState) bool {
		if j.gang != 0 && m.gangs[j.gang-1].invalid {
			j.sub.n--
			return true
		}
		return false
	})
	slices.SortFunc(m.invalid, func(a, b Wait) int { return cmp.Compare(a.Job, b.Job) })
}

// missingPart is a part that a valid gang lacks among its open jobs:
// whether the view holds a lease of it, and which of the view's providers
// hold those leases. A lease whose provider has left the view still marks
// its part leased, with no provider to leave out.
type missingPart struct {
	leased bool
	provs  []int32
}

// findLeased sorts the parts that the valid gangs lack into leased, with
// the providers running them, and gone. The view's leases are read once,
// each looked up among the few parts missing, so a pass whose gangs are
// whole pays nothing and one with a part missing little more.
func (m *matcher) findLeased(n *normalized) {
	missing := make(map[string]*missingPart)
	for gi := range m.gangs {
		g := &m.gangs[gi]
		if g.invalid || len(g.members) == g.nodes {
			continue
		}
		for r := range g.missingRanks() {
			missing[TaskID(g.id, r)] = &missingPart{}
		}
	}
	for _, l := range n.leases {
		mp := missing[l.Job]
		if mp == nil {
			continue
		}
		mp.leased = true
		if pi, ok := slices.BinarySearchFunc(m.provs, l.Provider, func(p provider, id string) int { return cmp.Compare(p.id, id) }); ok {
			mp.provs = append(mp.provs, int32(pi))
		}
	}
	for gi := range m.gangs {
		g := &m.gangs[gi]
		if g.invalid || len(g.members) == g.nodes {
			continue
		}
		for r := range g.missingRanks() {
			mp := missing[TaskID(g.id, r)]
			if !mp.leased {
				g.gone++
				continue
			}
			g.leased++
			g.running = append(g.running, mp.provs...)
		}
		slices.Sort(g.running)
		g.running = slices.Compact(g.running)
	}
}

// missingRanks yields, in order, the ranks of g that none of its open
// parts has.
func (g *gang) missingRanks() iter.Seq[int] {
	return func(yield func(int) bool) {
		next := 0 // members are in rank order
		for r := range g.nodes {
			if next < len(g.members) && g.members[next].rank == r {
				next++
			} else if !yield(r) {
				return
			}
		}
	}
}

// processGang handles gang gi when the walk first reaches one of its
// parts, and returns how many ranks its parts took: all of them, placed or
// waiting, in rank order, so that no other job comes between them. Later
// visits to its other parts take none.
func (m *matcher) processGang(gi int32, rank int) int {
	g := &m.gangs[gi]
	if g.visited {
		return 0
	}
	g.visited = true
	if g.gone == 0 {
		if m.placeGang(g, rank) {
			return len(g.parts)
		}
		if m.holds < m.k {
			m.reserveGang(g)
		}
	}
	for i := range g.parts {
		m.waiting = append(m.waiting, waitNote{id: g.parts[i].id, shape: g.parts[i].shape, gang: gi + 1})
	}
	return len(g.parts)
}

// placeGang places every open part of g on a provider of its own, or
// none. The providers its parts avoid, those running its leased parts
// among them, leave the index for its search and come back after.
func (m *matcher) placeGang(g *gang, rank int) bool {
	lead := &g.parts[0]
	s := lead.shape
	// What the search learns with providers taken out for this gang does
	// not hold for the jobs after it.
	indexDead := s.indexDead
	var out []*provider
	if lead.avoid != 0 {
		for _, pi := range m.avoid[lead.avoid-1] {
			if p := &m.provs[pi]; p.class != nil {
				m.ix.remove(p)
				out = append(out, p)
			}
		}
	}
	picked := m.picked[:0]
	for i := range g.parts {
		p := m.placePart(&g.parts[i])
		if i == 0 && lead.avoid == 0 {
			// Nothing was left out for the first part: what its search
			// learnt holds for every job of the request.
			indexDead = s.indexDead
		}
		if p == nil {
			break
		}
		// Out of the index and marked, it is no candidate for the parts
		// after this one.
		p.picked = true
		if p.class != nil {
			m.ix.remove(p)
		}
		picked = append(picked, p)
	}
	m.picked = picked
	for _, q := range out {
		if q.class == nil && q.res == nil {
			m.ix.add(q)
		}
	}
	s.indexDead = indexDead
	ok := len(picked) == len(g.parts)
	for i, p := range picked {
		p.picked = false
		switch {
		case ok:
			m.assign(&g.parts[i], p, rank+i)
		case p.class == nil && p.res == nil:
			m.ix.add(p)
		}
	}
	return ok
}

// placePart is where part j of a gang would go now, as a lone job with
// its request, or nil. A part does not wait for a provider holding its
// data: the gang waits for room only.
func (m *matcher) placePart(j *jobState) *provider {
	if j.local != 0 && m.held != nil {
		if p, _ := m.placeLocal(j); p != nil {
			return p
		}
	}
	p, _ := m.place(j)
	return p
}

// gangCandidate is a provider a part of a gang could reserve, and when it
// will have room for it.
type gangCandidate struct {
	p  *provider
	at int64
}

// reserveGang reserves, for the gang's common start, one provider per
// part: the earliest instant at which as many providers have room for a
// part as the gang has parts, and among the providers that have room by
// then, for each part in rank order, the one with room earliest, ties by
// the rendezvous weight. Nothing is reserved when no such instant exists.
// For a gang with parts leased, only the parts still open reserve, and
// never on a provider running one of the leased parts.
func (m *matcher) reserveGang(g *gang) {
	lead := &g.parts[0]
	s := lead.shape
	if s.noReserve {
		return
	}
	d := &s.demand
	limit := int64(lead.limit)
	cands := m.gangCands[:0]
	for i := range m.provs {
		p := &m.provs[i]
		if p.res != nil || !m.couldEverFit(d, p) || m.avoids(lead, p) {
			continue
		}
		at := p.earliest(d, m.now)
		if at == never || !openFor(p, at, limit) {
			continue // a later start only closes its window further
		}
		cands = append(cands, gangCandidate{p: p, at: at})
	}
	m.gangCands = cands
	if len(cands) == 0 && lead.avoid == 0 {
		// As in reserve: no lone job of this request can reserve either.
		s.noReserve = true
	}
	if len(cands) < len(g.parts) {
		return
	}
	slices.SortFunc(cands, func(a, b gangCandidate) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.p.idx, b.p.idx)
	})
	from, ok := m.gangStart(cands, len(g.parts), limit)
	if !ok {
		return
	}
	for i := range g.parts {
		part := &g.parts[i]
		var best *provider
		var bestAt int64
		var bestW uint64
		for _, c := range cands {
			if c.at > from {
				break
			}
			p := c.p
			if p.res != nil || !openFor(p, from, limit) {
				continue // reserved for an earlier part, or closed by then
			}
			w := m.ix.arena.hash[p.idx] ^ part.h
			if best == nil || c.at < bestAt || c.at == bestAt && (p.static.price < best.static.price ||
				p.static.price == best.static.price && (w < bestW || w == bestW && p.idx < best.idx)) {
				best, bestAt, bestW = p, c.at, w
			}
		}
		best.res = &reservation{job: part, from: from}
		part.res = best
		if best.class != nil {
			m.ix.remove(best)
		}
		m.reserved = append(m.reserved, best)
		m.res.Reservations = append(m.res.Reservations, Reservation{Job: part.id, Provider: best.id, From: from})
	}
	m.holds++
}

// openFor reports whether a lease of limit started at from ends within
// p's contribution window.
func openFor(p *provider, from, limit int64) bool {
	return p.static.openUntil == 0 || satAdd(from, limit) <= p.static.openUntil
}

// gangStart is the earliest instant, among the candidates' (sorted by
// it), at which n of them have room and a window open for limit from then
// on. A candidate counts from its own instant until its window closes, so
// a sweep over the instants keeps the window ends of those counted in a
// min-heap and drops each once its window closes too soon.
func (m *matcher) gangStart(cands []gangCandidate, n int, limit int64) (int64, bool) {
	h := m.closes[:0]
	defer func() { m.closes = h[:0] }()
	for i := 0; i < len(cands); {
		at := cands[i].at
		for ; i < len(cands) && cands[i].at == at; i++ {
			end := cands[i].p.static.openUntil
			if end == 0 {
				end = never
			}
			h = pushMin(h, end)
		}
		for len(h) > 0 && satAdd(at, limit) > h[0] {
			h = popMin(h)
		}
		if len(h) >= n {
			return at, true
		}
	}
	return 0, false
}

func pushMin(h []int64, v int64) []int64 {
	h = append(h, v)
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if h[up] <= h[i] {
			break
		}
		h[up], h[i] = h[i], h[up]
		i = up
	}
	return h
}

func popMin(h []int64) []int64 {
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r] < h[c] {
			c = r
		}
		if h[i] <= h[c] {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	return h
}

// gangWait is why every part of gang gi waits, worked out once for all.
func (m *matcher) gangWait(gi int32) (string, map[string]int) {
	g := &m.gangs[gi]
	if g.reason != "" {
		return g.reason, g.counts
	}
	lead := &g.parts[0]
	switch s := lead.shape; {
	case g.gone > 0:
		g.reason = describeGangInFlight(g.id, g.nodes, g.gone)
	default:
		if s.gangCounts == nil {
			var x countExtremes
			s.gangCounts, x = m.countReasons(&s.demand, ReasonFree)
			s.cheapest = x.cheapest // the same whatever counts as free
		}
		g.counts = s.gangCounts
		if len(g.running) > 0 {
			g.counts = m.countAside(s, g.counts, g.running, ReasonOtherPart, ReasonFree)
		}
		if len(g.avoided) > 0 {
			g.counts = m.countAside(s, g.counts, g.avoided, ReasonAvoided, ReasonFree)
		}
		g.reason = describeGangWait(s, len(g.parts), g.leased, g.counts)
		if lead.res != nil {
			ids := make([]string, len(g.parts))
			for i := range g.parts {
				ids[i] = g.parts[i].res.id
			}
			g.reason = describeGangReserved(s, ids, lead.res.res.from)
		}
	}
	return g.reason, g.counts
}

// describeGangInFlight says why the open parts of a gang wait while gone
// of its parts are neither open nor leased.
func describeGangInFlight(id string, nodes, gone int) string {
	verb := "are"
	if gone == 1 {
		verb = "is"
	}
	return fmt.Sprintf("gang %s is in flight: %d of its %d parts %s neither open nor leased in the view, and the others wait for its submitter to settle the gang",
		id, gone, nodes, verb)
}

// describeGangWait says why the n parts of a gang still to place could
// not start, leased being how many others it has leased, counting
// distinct providers: "needs 2 providers with 1 free GPU each; 1 has (1
// offer busy, 1 free)" when enough offers could hold a part but too few
// have room now, "needs 3 providers with 8 GPUs each; 2 have (…)" when
// too few could hold one at all, and with a part leased "needs 1
// provider with 1 free GPU, apart from the one running its other part;
// none has (1 offer running another part of the gang)".
func describeGangWait(s *demandShape, n, leased int, counts map[string]int) string {
	total := 0
	for _, r := range reasonOrder() {
		total += counts[r]
	}
	if total == 0 {
		return "no offers in the view"
	}
	// Offers that lack what a part asks for, however long it waits.
	never := counts[ReasonNoImages] + counts[ReasonNeedImage] + counts[ReasonDisk] +
		counts[ReasonGPUModel] + counts[ReasonGPUMemory] + counts[ReasonGPUs]
	// Providers running its other parts cannot take one more.
	if could := total - never - counts[ReasonOtherPart]; could < n {
		return fmt.Sprintf("needs %s; %s (%s)", gangNeed(s, n, leased, false), howManyHave(could), describeCounts(s, counts))
	}
	return fmt.Sprintf("needs %s; %s (%s)", gangNeed(s, n, leased, true), howManyHave(counts[ReasonFree]), describeCounts(s, counts))
}

// gangNeed is what the n open parts of a gang need: "2 providers with 1
// free GPU each", and where leased of its parts are leased "1 provider
// with 1 free GPU, apart from the one running its other part".
func gangNeed(s *demandShape, n, leased int, free bool) string {
	need := fmt.Sprintf("%d providers with %s each", n, describeNeed(s, free))
	if n == 1 {
		need = "1 provider with " + describeNeed(s, free)
	}
	switch {
	case leased == 1:
		need += ", apart from the one running its other part"
	case leased > 1:
		need += fmt.Sprintf(", apart from those running its other %d parts", leased)
	}
	return need
}

func howManyHave(n int) string {
	switch n {
	case 0:
		return "none has"
	case 1:
		return "1 has"
	}
	return fmt.Sprintf("%d have", n)
}

// describeGangReserved says which providers a gang waits for and when its
// parts start together: "reserved: waiting for 2 providers (p1, p2) to
// free 1 GPU each at T", or, for the last open part of a gang whose others
// are leased, "reserved: waiting for provider p1 to free 1 GPU at T". A
// long list names the first few.
func describeGangReserved(s *demandShape, providers []string, from int64) string {
	if len(providers) == 1 {
		return fmt.Sprintf("reserved: waiting for provider %s to free %s at %s",
			ShortID(providers[0]), describeNeed(s, false), FormatInstant(from))
	}
	const named = 4
	names := make([]string, 0, named)
	for i, p := range providers {
		if i == named-1 && len(providers) > named {
			names = append(names, fmt.Sprintf("and %d more", len(providers)-i))
			break
		}
		names = append(names, ShortID(p))
	}
	return fmt.Sprintf("reserved: waiting for %d providers (%s) to free %s each at %s",
		len(providers), strings.Join(names, ", "), describeNeed(s, false), FormatInstant(from))
}
