package market

import (
	"encoding/hex"
	"fmt"
	"math"
	"slices"
)

// Options tune Match. The zero value gives the defaults.
type Options struct {
	// Reservations is K, how many blocked jobs may each reserve a provider
	// per pass. 0 means DefaultReservations; a negative value turns
	// reservations (and with them the wait bound) off.
	Reservations int
	// StarvingAfter is the age after which a job moves to the starving tier,
	// served first and oldest first. 0 means DefaultStarvingAfter; a negative
	// value turns the tier off.
	StarvingAfter Duration
}

// Defaults of Options.
const (
	DefaultReservations  = 4
	DefaultStarvingAfter = 10 * Minute
)

// Assignment is a lease to propose: this job on these devices of this
// provider.
type Assignment struct {
	Job      string   `json:"job"`
	Provider string   `json:"provider"`
	GPUs     []string `json:"gpus"` // UUIDs, by device index
	// Rank is the job's place in this pass's priority order, 0 first. It
	// travels in the lease proposal: a provider offered two claims on the
	// same devices keeps the better-ranked.
	Rank int `json:"rank"`
}

// Reservation holds a provider for a blocked job: from From on, when its
// running leases will have freed enough, nothing else may hold it past From.
type Reservation struct {
	Job      string `json:"job"`
	Provider string `json:"provider"`
	From     int64  `json:"from"` // ms since the Unix epoch
}

// Wait says why a job was not assigned.
type Wait struct {
	Job    string `json:"job"`
	Reason string `json:"reason"`
	// Counts is how many offers each filter turned away (keys are the
	// Reason constants), as the offers stand after this pass's assignments;
	// for a part of a gang, offers that could take a part now are counted
	// under ReasonFree, and providers running its leased parts under
	// ReasonOtherPart. Jobs with the same request share one map: treat it
	// as read-only.
	Counts map[string]int `json:"counts,omitempty"`
}

// Result is what Match decided, as data for the node to carry out:
// propose Assignments, show Waiting to submitters. Reservations are
// informative; they are recomputed every pass.
type Result struct {
	ViewHash     string        `json:"view_hash"`
	Assignments  []Assignment  `json:"assignments"`  // in rank order
	Reservations []Reservation `json:"reservations"` // in rank order
	Waiting      []Wait        `json:"waiting"`      // in rank order, then invalid requests by job ID
}

// never is the instant of a device that nothing will free.
const never = math.MaxInt64

// Match decides, for one epoch's view, which open jobs go where, which
// blocked jobs reserve a provider, and why the rest wait. It is a pure
// function: no clock, no randomness, no I/O, and every collection is sorted
// before it is walked, so that every peer holding the same view gets the
// same Result byte for byte, whatever order the view was assembled in.
// See the package documentation for the pipeline and its guarantees.
func Match(v View, o Options) Result {
	m := newMatcher(&v, o, nil)
	m.run()
	return m.res
}

// provider is an offer being matched.
type provider struct {
	idx    int32
	id     string
	static *staticShape
	shape  shape
	slots  []slot         // usable devices, by index
	byUUID map[string]int // slot by UUID, only for oversized offers
	avail  []int32        // free slots, by memory then index: the order devices are taken in
	events []event        // when leased CPUs and memory come back, existing and new
	sorted bool           // events is sorted
	picked bool           // chosen for a part of the gang being placed
	class  *class         // nil when reserved
	res    *reservation
	// failures is how many submitters name the provider in the avoid
	// lists of the view's jobs (see avoid.go).
	failures int32
}

type slot struct {
	gpu    *GPU
	typ    int32
	leased bool  // held by a lease in the view
	freeAt int64 // now when free; the end of the leases holding it; never
}

type event struct {
	end  int64
	cpus int64
	mem  uint64
}

type reservation struct {
	job  *jobState
	from int64
}

// demand is a request as the filters see it.
type demand struct {
	gpus  int
	con   *constraint
	cpus  int64
	mem   uint64
	image bool   // the job brings its own image
	disk  uint64 // request.disk
	// end is when the job's lease would end if it started now (Now + its
	// limit), which a provider's contribution window must reach. It is
	// set only when some offer in the view has a window; see shapeOf.
	end int64
	// maxPrice is request.max_price: no offer whose price is above it
	// takes the job; 0: no cap.
	maxPrice Price
}

// demandShape is the state shared by every job with the same request.
// Feasibility only shrinks during a pass (offers lose free devices, and
// reserved offers leave the index), so a request that found no room once
// finds none for the rest of the pass, and later jobs asking the same skip
// the search.
type demandShape struct {
	demand
	model     string // as requested, for messages
	indexDead bool   // no unreserved offer can take it now
	noReserve bool   // no offer can be reserved for it
	counts    map[string]int
	message   string
	// gangCounts are counts for gangs of this request, which name
	// offers with room for a part (ReasonFree) that a lone job would
	// have taken.
	gangCounts map[string]int
	// largest is the most GPUs of the kind asked for that any offer in
	// view has, free or not: what a job too big for all of them could
	// ever get.
	largest int
	// lastWindow is the latest end of the contribution windows that
	// turned the job away for ending too soon (ReasonWindow).
	lastWindow int64
	// cheapest is the lowest price of the offers turned away by
	// request.max_price alone (ReasonPrice).
	cheapest Price
}

type shapeKey struct {
	image  bool
	gpus   int
	model  string
	minMem uint64
	cpus   int64
	mem    uint64
	disk   uint64
	// limit is the job's limit when the view has contribution windows,
	// and 0 otherwise: see shapeOf. For a cut shape it is the least
	// window the job may be cut in (cutSpan).
	limit    Duration
	cut      bool
	maxPrice Price
}

// jobState is a valid open job as the pass sees it. It holds copies of
// what the walk reads, so that visiting jobs in priority order, which is
// no order in memory, touches one small record per job and not the Job,
// its ID and its request scattered through the view.
type jobState struct {
	id    string
	at    int64    // job.SubmittedAt
	limit Duration // job.Request.Limit
	h     uint64   // H(seed ‖ id), computed while the jobs are in ID order
	shape *demandShape
	// cut is the job's request with the least window it may be cut in
	// (window.go), where the view has windows; nil for a job that may not
	// be cut.
	cut   *demandShape
	res   *provider       // reserved for this job
	sub   *submitterQueue // its submitter's running share
	local int32           // m.locals[local-1] when the job weighs data; 0 otherwise
	// avoid is 1 + the position of the job's avoid list in
	// matcher.avoid, or 0 when it avoids no provider.
	avoid int32
	// gang is 1 + the position of the job's gang in matcher.gangs, or 0
	// for a job that is no part of one.
	gang int32
}

// waitNote is a job left waiting, recorded when it was processed; its
// reason is written after the pass, against the offers as the pass leaves
// them.
type waitNote struct {
	id    string
	shape *demandShape
	res   *provider
	// localUntil is set when the job waits for a provider holding its data,
	// until then at most.
	localUntil int64
	// avoid is the job's jobState.avoid: its avoid list, if not 0.
	avoid int32
	// gang is the job's jobState.gang: its gang, if not 0.
	gang int32
}

type matcher struct {
	now      int64
	k        int
	starving int64
	hash     [32]byte
	seed     [32]byte
	in       *interner
	filters  [numFilters]namedFilter
	provs    []provider
	ix       *index
	reserved []*provider // in the order reserved
	shapes   map[shapeKey]*demandShape
	recent   [shapeCacheSize]recentShape // a cache in front of shapes
	usage    map[string]int64
	jobs     []jobState        // valid open jobs, in ID order
	subs     []*submitterQueue // in order of first appearance in ID order
	waiting  []waitNote        // in rank order
	invalid  []Wait            // by job ID
	ties     []*class
	scratch  []int32
	taken    []int32
	empty    shape // couldEverFit's offer with nothing leased, kept off the heap
	uuids    []string
	locals   []jobLocal // jobs that weigh data, by jobState.local
	held     *holdings  // nil when no job weighs data or no offer holds any
	res      Result

	// avoid holds, for the rare jobs with an avoid list, the providers
	// each must not be placed on or reserve (jobState.avoid).
	avoid [][]int32

	// holds is how many jobs and gangs have reserved: K bounds it, and a
	// gang holds several providers.
	holds int

	// gangs are the view's gangs, in order of their first part by ID;
	// gangIDs finds them while buildJobs files parts.
	gangs   []gang
	gangIDs map[gangKey]int32
	// Scratch for gangs: providers picked for parts, reservation
	// candidates, window ends.
	picked    []*provider
	gangCands []gangCandidate
	closes    []int64

	// windows: some offer has a contribution window that ends
	// (Offer.OpenUntil), so a job's limit is part of its shape.
	windows bool
}

// newMatcher prepares a pass. seed, when not nil, replaces the view's own
// tie-break seed: tests use it to compare two views that differ only in
// what should not matter, with every tie broken alike.
func newMatcher(v *View, o Options, seed *[32]byte) *matcher {
	n := normalize(v)
	m := &matcher{
		now:      v.Now,
		k:        o.Reservations,
		starving: int64(o.StarvingAfter),
		hash:     n.hash,
		seed:     seedFor(v.Epoch, n.hash),
		in:       newInterner(),
		filters:  feasibility(),
		shapes:   make(map[shapeKey]*demandShape),
		usage:    make(map[string]int64, len(n.usage)),
	}
	if seed != nil {
		m.seed = *seed
	}
	if m.k == 0 {
		m.k = DefaultReservations
	}
	if m.starving == 0 {
		m.starving = int64(DefaultStarvingAfter)
	}
	m.res = Result{
		ViewHash:     hex.EncodeToString(n.hash[:]),
		Assignments:  []Assignment{},
		Reservations: []Reservation{},
		Waiting:      []Wait{},
	}
	for _, u := range n.usage {
		m.usage[u.Submitter] = max(u.GPUMillis, 0)
	}
	m.buildProviders(n)
	m.buildJobs(n)
	if len(m.locals) > 0 {
		m.buildHoldings(n)
	}
	m.buildAvoid(n)
	m.buildGangs(n)
	return m
}

// buildProviders works out what each offer has free: a device is free when
// the offer says so and no lease in the view holds it; CPUs and memory are
// the offer's totals less those of its leases.
func (m *matcher) buildProviders(n *normalized) {
	m.provs = make([]provider, len(n.offers))
	byID := make(map[string]int32, len(n.offers))
	maxGPUs := 0
	for i, o := range n.offers {
		p := &m.provs[i]
		p.idx = int32(i)
		p.id = o.Provider
		byID[o.Provider] = int32(i)
		p.slots = make([]slot, len(n.gpus[i]))
		for s, g := range n.gpus[i] {
			p.slots[s] = slot{gpu: g, typ: m.in.gpuType(g.Model, g.MemoryBytes), freeAt: never}
			if g.Free {
				p.slots[s].freeAt = m.now
			}
		}
		p.shape.cpus = int64(max(o.CPUs, 0))
		p.shape.mem = o.MemoryBytes
		maxGPUs = max(maxGPUs, len(p.slots))
		m.windows = m.windows || o.OpenUntil != 0
	}
	for li, l := range n.leases {
		pi, ok := byID[l.Provider]
		if !ok {
			continue // its provider has left the view
		}
		p := &m.provs[pi]
		end := max(l.End(), m.now) // an overdue lease is still held until released
		for _, u := range n.lgpus[li] {
			s := p.slotOf(u)
			if s < 0 {
				continue
			}
			// A leased device is held whatever a stale offer says, and comes
			// back when the last lease on it ends.
			sl := &p.slots[s]
			if !sl.leased || sl.freeAt < end {
				sl.freeAt = end
			}
			sl.leased = true
		}
		c := int64(max(l.CPUs, 0))
		p.shape.cpus = max(p.shape.cpus-c, 0)
		if l.MemoryBytes > p.shape.mem {
			p.shape.mem = 0
		} else {
			p.shape.mem -= l.MemoryBytes
		}
		p.events = append(p.events, event{end: end, cpus: c, mem: l.MemoryBytes})
	}
	hashes := make([]uint64, len(m.provs))
	types := make([]int32, 0, maxGPUs)
	for i := range m.provs {
		p := &m.provs[i]
		o := n.offers[i]
		types = types[:0]
		for _, s := range p.slots {
			types = append(types, s.typ)
		}
		p.static = m.in.static(m.in.multiset(types), int64(max(o.CPUs, 0)), o.MemoryBytes, o)
		p.shape.static = p.static
		p.avail = make([]int32, 0, len(p.slots))
		for s := range p.slots {
			if sl := &p.slots[s]; sl.gpu.Free && !sl.leased {
				p.avail = append(p.avail, int32(s))
			}
		}
		slices.SortStableFunc(p.avail, func(a, b int32) int {
			return compareUint(p.slots[a].gpu.MemoryBytes, p.slots[b].gpu.MemoryBytes)
		})
		types = p.refreshAvail(m.in, types)
		hashes[i] = tieHash(&m.seed, 'p', p.id)
	}
	m.ix = newIndex(newTrieArena(hashes), maxGPUs)
	free := 0
	for i := range m.provs {
		m.ix.add(&m.provs[i])
		free += len(m.provs[i].avail)
	}
	m.uuids = make([]string, 0, free)
	m.res.Assignments = make([]Assignment, 0, min(len(n.jobs), free+len(m.provs)))
}

// slotOf returns the slot of the device with the given UUID, or -1. Offers
// hold a handful of devices; an oversized one gets a map on first use so
// that its leases do not cost quadratic time.
func (p *provider) slotOf(uuid string) int {
	if len(p.slots) <= 16 {
		for s := range p.slots {
			if p.slots[s].gpu.UUID == uuid {
				return s
			}
		}
		return -1
	}
	if p.byUUID == nil {
		p.byUUID = make(map[string]int, len(p.slots))
		for s := range p.slots {
			p.byUUID[p.slots[s].gpu.UUID] = s
		}
	}
	if s, ok := p.byUUID[uuid]; ok {
		return s
	}
	return -1
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// refreshAvail interns the bag of p's free device types; buf is scratch.
func (p *provider) refreshAvail(in *interner, buf []int32) []int32 {
	buf = buf[:0]
	for _, s := range p.avail {
		buf = append(buf, p.slots[s].typ)
	}
	p.shape.avail = in.multiset(buf)
	return buf
}

// buildJobs drops jobs that already hold a lease, sets aside invalid
// requests, and interns the shapes and submitters of the rest. It reads the
// view's jobs once, in ID order, and copies into each jobState everything
// the walk will need, tie-break hash included.
func (m *matcher) buildJobs(n *normalized) {
	// Both lists sorted, a merge finds the leased jobs without hashing a
	// hundred thousand IDs.
	leased := make([]string, len(n.leases))
	for i, l := range n.leases {
		leased[i] = l.Job
	}
	slices.Sort(leased)
	m.jobs = make([]jobState, 0, len(n.jobs))
	m.waiting = make([]waitNote, 0, len(n.jobs))
	byName := make(map[string]*submitterQueue)
	var last *submitterQueue
	for _, j := range n.jobs {
		for len(leased) > 0 && leased[0] < j.ID {
			leased = leased[1:]
		}
		if len(leased) > 0 && leased[0] == j.ID {
			continue
		}
		var ps problems
		validateRequest(&j.Request, &ps)
		if len(ps.list) > 0 {
			// n.jobs is in ID order, and so is this list.
			m.invalid = append(m.invalid, Wait{Job: j.ID, Reason: "invalid request: " + ps.list[0].String()})
			continue
		}
		gang := int32(0)
		if j.Request.Nodes >= 2 {
			if gang = m.gangPart(j, int32(len(m.jobs))); gang == 0 {
				m.invalid = append(m.invalid, Wait{Job: j.ID, Reason: fmt.Sprintf(
					"invalid gang part: its ID must be GANG.RANK, RANK below request.nodes (%d)", j.Request.Nodes)})
				continue
			}
		}
		m.jobs = append(m.jobs, jobState{})
		js := &m.jobs[len(m.jobs)-1]
		js.gang = gang
		js.id = j.ID
		js.at = j.SubmittedAt
		js.limit = j.Request.Limit
		js.h = tieHash(&m.seed, 'j', j.ID)
		js.shape = m.shapeOf(&j.Request, j.Image)
		if span := cutSpan(j); span != 0 && m.windows {
			js.cut = m.shapeFor(&j.Request, j.Image, span, true)
		}
		js.local = m.localJob(j)
		q := last
		if q == nil || q.name != j.Submitter {
			q = byName[j.Submitter]
			if q == nil {
				name := j.Submitter
				q = &submitterQueue{name: name, use: m.usage[name], order: tieHash(&m.seed, 's', name)}
				byName[name] = q
				m.subs = append(m.subs, q)
			}
			last = q
		}
		js.sub = q
		q.n++
	}
}

// shapeCacheSize is the number of slots of the cache in front of the
// shape map. A queue holds few distinct requests, and comparing a key is
// far cheaper than hashing its model name for the map, once per job.
const shapeCacheSize = 64

type recentShape struct {
	key   shapeKey
	shape *demandShape
}

// shapeOf interns a request. A job's limit matters to feasibility only
// against a contribution window, so it splits shapes only in a view that
// has one: elsewhere jobs that differ in their limit alone share a shape,
// and what the pass learns about one (no room, nothing to reserve) serves
// them all.
func (m *matcher) shapeOf(r *Request, image bool) *demandShape {
	return m.shapeFor(r, image, r.Limit, false)
}

// shapeFor interns a request whose window must hold span from now: its
// limit, or for a cut shape the least window it may be cut in.
func (m *matcher) shapeFor(r *Request, image bool, span Duration, cut bool) *demandShape {
	k := shapeKey{image: image, gpus: r.GPUs, model: r.GPUModel, minMem: uint64(r.GPUMemory), cpus: int64(r.CPUs), mem: uint64(r.Memory), disk: r.DiskBytes(), cut: cut, maxPrice: r.MaxPrice}
	if m.windows {
		k.limit = span
	}
	// The slot depends on the numbers of the request and the length of the
	// model name, not on the name's bytes.
	h := uint64(k.gpus)*0x9e3779b97f4a7c15 ^ uint64(k.cpus)*0xbf58476d1ce4e5b9 ^ k.mem*0x94d049bb133111eb ^
		k.minMem*0x2545f4914f6cdd1d ^ uint64(len(k.model))*0xff51afd7ed558ccd ^ uint64(k.limit)*0xc2b2ae3d27d4eb4f ^
		uint64(k.maxPrice)*0xd6e8feb86659fd93
	if image {
		h = ^h
	}
	if cut {
		h = h*0x9e3779b97f4a7c15 + 1
	}
	slot := &m.recent[(h^h>>29^h>>47)%shapeCacheSize]
	if slot.shape != nil && slot.key == k {
		return slot.shape
	}
	s, ok := m.shapes[k]
	if !ok {
		s = &demandShape{
			demand: demand{gpus: r.GPUs, con: m.in.constraint(r.GPUModel, uint64(r.GPUMemory)), cpus: int64(r.CPUs), mem: uint64(r.Memory), image: image, disk: r.DiskBytes(), maxPrice: r.MaxPrice},
			model:  r.GPUModel,
		}
		if m.windows {
			s.end = satAdd(m.now, int64(span))
		}
		m.shapes[k] = s
	}
	*slot = recentShape{key: k, shape: s}
	return s
}

// run walks the jobs in priority order, placing, reserving, or recording why
// each waits.
func (m *matcher) run() {
	rank := 0
	m.walk(func(j *jobState) bool {
		if j.gang != 0 {
			rank += m.processGang(j.gang-1, rank)
			return false
		}
		ok := m.process(j, rank)
		rank++
		return ok
	})
	m.res.Waiting = make([]Wait, 0, len(m.waiting)+len(m.invalid))
	for i := range m.waiting {
		m.res.Waiting = append(m.res.Waiting, m.waitFor(&m.waiting[i]))
	}
	m.res.Waiting = append(m.res.Waiting, m.invalid...)
}

// process places j or, failing that, lets it reserve. It reports whether j
// was assigned.
func (m *matcher) process(j *jobState, rank int) bool {
	if j.local != 0 && m.held != nil {
		p, wait := m.placeLocal(j)
		if p != nil {
			m.assign(j, p, rank)
			return true
		}
		if wait {
			// Waiting by choice, not for room: it takes no reservation, and
			// later jobs may use what it leaves.
			m.waiting = append(m.waiting, waitNote{id: j.id, shape: j.shape, localUntil: m.locals[j.local-1].waitUntil})
			return false
		}
	}
	if j.avoid != 0 {
		return m.processAvoiding(j, rank, m.avoid[j.avoid-1])
	}
	if p, ok := m.place(j); ok {
		m.assign(j, p, rank)
		return true
	}
	m.holdFor(j)
	m.waiting = append(m.waiting, waitNote{id: j.id, shape: j.shape, res: j.res})
	return false
}

// place finds the best provider for j now, or reports there is none:
// where it fits whole, else, for a job that may be cut at a window's close,
// where a window leaves it enough (window.go).
func (m *matcher) place(j *jobState) (*provider, bool) {
	if p, ok := m.placeIn(j, j.shape); ok || j.cut == nil {
		return p, ok
	}
	return m.placeIn(j, j.cut)
}

// placeIn finds the best provider now for j's request as shape s has it.
func (m *matcher) placeIn(j *jobState, s *demandShape) (*provider, bool) {
	d := &s.demand
	var best *provider
	var bestFit fitKey
	var bestW uint64
	consider := func(p *provider, w uint64) {
		f := fitKey{gpusLeft: p.shape.avail.total - d.gpus, memLeft: p.shape.mem - d.mem, price: p.shape.static.price, failures: p.failures}
		if best == nil {
			best, bestFit, bestW = p, f, w
			return
		}
		c := f.compare(bestFit)
		if c < 0 || c == 0 && (w < bestW || w == bestW && p.idx < best.idx) {
			best, bestFit, bestW = p, f, w
		}
	}
	if !s.indexDead {
		m.ties = m.ix.bestFit(d, &m.filters, m.ties[:0])
		switch {
		case len(m.ties) == 0:
			s.indexDead = true
		case len(m.ties) == 1 && m.ties[0].count == 1 && len(m.reserved) == 0:
			// A single candidate: no weight to compute.
			pi, _ := m.ix.nearest(m.ties[0], 0)
			return &m.provs[pi], true
		default:
			key := j.h
			for _, c := range m.ties {
				pi, w := m.ix.nearest(c, key)
				consider(&m.provs[pi], w)
			}
		}
	}
	// A reserved provider takes only jobs whose lease will be over before
	// the reservation starts: everything they hold is back by then, so the
	// reserved job finds the provider as the reservation counted on.
	end := satAdd(m.now, int64(j.limit))
	for _, p := range m.reserved {
		if end <= p.res.from && !p.picked && firstFailure(&m.filters, d, &p.shape) == "" && !m.avoids(j, p) {
			consider(p, j.h^m.ix.arena.hash[p.idx])
		}
	}
	return best, best != nil
}

// assign records j on p and takes what it holds out of p's free capacity.
func (m *matcher) assign(j *jobState, p *provider, rank int) {
	d := &j.shape.demand
	end := satAdd(m.now, int64(j.limit))
	taken := m.taken[:0]
	kept := p.avail[:0]
	for _, s := range p.avail {
		if len(taken) < d.gpus && d.con.satisfies(p.slots[s].typ) {
			taken = append(taken, s)
			p.slots[s].freeAt = end
			p.slots[s].leased = true
		} else {
			kept = append(kept, s)
		}
	}
	p.avail = kept
	m.taken = taken
	sortInt32(taken) // slots are in device index order
	// Every assignment's UUIDs are carved from one array: a device is
	// assigned at most once, so the array never needs more than the free
	// devices of the view.
	start := len(m.uuids)
	for _, s := range taken {
		m.uuids = append(m.uuids, p.slots[s].gpu.UUID)
	}
	uuids := m.uuids[start:len(m.uuids):len(m.uuids)]
	if p.class != nil {
		m.ix.remove(p)
	}
	p.shape.cpus -= d.cpus
	p.shape.mem -= d.mem
	m.scratch = p.refreshAvail(m.in, m.scratch)
	p.events = append(p.events, event{end: end, cpus: d.cpus, mem: d.mem})
	p.sorted = false
	if p.res == nil {
		m.ix.add(p)
	}
	j.sub.use = satAdd(j.sub.use, Charge(d.gpus, j.limit))
	m.res.Assignments = append(m.res.Assignments, Assignment{Job: j.id, Provider: p.id, GPUs: uuids, Rank: rank})
}
