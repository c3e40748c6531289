package view

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Bounds are what one view holds at most, all submitters together: keys
// are free, so a bound per submitter alone lets a stranger fill every
// peer's memory, and every pass's work, with as many identities as it
// cares to make. doc.go, "Bounds", states the rule that keeps them.
type Bounds struct {
	// Jobs bounds the jobs the view holds: single jobs, array tasks and
	// gang parts, each one, open or closed with its declaration still
	// kept (closedBodyKeep). 0: DefaultJobs; negative: no bound.
	Jobs int
	// DeclarationBytes bounds the signed declarations the view holds, in
	// bytes, each counted once however many tasks or parts it makes. 0:
	// DefaultDeclarationBytes; negative: no bound.
	DeclarationBytes int64
	// NewFor is how long an identity counts as new from the first time
	// this view saw it (its first declaration, or its first offer if it
	// is a provider): new identities over their share are evicted before
	// known ones. 0: DefaultNewFor.
	NewFor time.Duration
	// SeenSince, if set, tells when this node first saw an identity other
	// than by its declarations (a provider's first offer): the earlier of
	// that and its first declaration dates it. It is called with the
	// Market's lock held (Offers.FirstSeen may be).
	SeenSince func(peer.ID) (time.Time, bool)
	// Self is this node's own identity: its jobs are never evicted from
	// its own view, nor its declarations refused, since it must match its
	// own jobs to lease them. They may take the view past the bounds by
	// at most what one submitter may hold (maxOpenJobsPerSubmitter,
	// maxOpenTasksPerSubmitter).
	Self peer.ID
}

// The default bounds, sized from BenchmarkViewMemory and
// BenchmarkPassOverFlood (doc.go, "Bounds"): a view full to both holds
// about 60 MiB of heap, 100 MiB with declarations a stranger shapes to
// cost the most heap per byte, and a pass over it costs about 0.1 s of
// CPU, most of it for the single jobs.
const (
	// DefaultJobs is room for six arrays of 10,000 tasks, or an array of
	// 50,000 and a deep queue of single jobs. An array larger than the
	// bound is refused in every view (market.MaxArrayTasks is larger): a
	// network that runs such arrays raises it (e31d --view-jobs).
	DefaultJobs = 60_000
	// DefaultDeclarationBytes is room for 128 declarations of the largest
	// size a gossip message carries, or some 10,000 of a usual size: a
	// submitter's deep queue of single jobs (maxOpenJobsPerSubmitter).
	DefaultDeclarationBytes = 8 << 20
	// DefaultNewFor is as long as the gossip's guard remembers a
	// submitter it admitted (p2p's knownFor).
	DefaultNewFor = time.Hour
)

// withDefaults fills in b's zero values.
func (b Bounds) withDefaults() Bounds {
	if b.Jobs == 0 {
		b.Jobs = DefaultJobs
	}
	if b.DeclarationBytes == 0 {
		b.DeclarationBytes = DefaultDeclarationBytes
	}
	if b.NewFor <= 0 {
		b.NewFor = DefaultNewFor
	}
	return b
}

// Reasons a declaration is refused or a job evicted (Bounded).
const (
	// BoundJobs: the view held Bounds.Jobs.
	BoundJobs = "jobs"
	// BoundBytes: the view held Bounds.DeclarationBytes.
	BoundBytes = "bytes"
	// BoundSubmitter: the submitter held its own bound of open jobs or
	// tasks (refusals only).
	BoundSubmitter = "submitter"
)

// BoundReasons lists the reasons of Bounded's counts.
func BoundReasons() []string { return []string{BoundJobs, BoundBytes, BoundSubmitter} }

// dimension is one of the two things bounded: jobs, bytes.
type dimension int

const (
	dimJobs dimension = iota
	dimBytes
	dims
)

func (d dimension) reason() string {
	if d == dimJobs {
		return BoundJobs
	}
	return BoundBytes
}

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

// holderLocked returns the holder of id, seen at now, creating it. The
// caller holds v.mu.
func (v *Market) holderLocked(id peer.ID, now time.Time) *holder {
	h, ok := v.holders[id]
	if !ok {
		h = &holder{id: id, first: v.firstSeenLocked(id, now), last: now, idx: [slots]int{-1, -1, -1}}
		v.holders[id] = h
	}
	if now.After(h.last) {
		h.last = now
	}
	return h
}

// firstSeenLocked is when this view first saw id, which it sees at now:
// now, or the first offer of a provider. The caller holds v.mu.
func (v *Market) firstSeenLocked(id peer.ID, now time.Time) time.Time {
	if h, ok := v.holders[id]; ok {
		return h.first
	}
	if v.bounds.SeenSince != nil {
		if t, ok := v.bounds.SeenSince(id); ok && t.Before(now) {
			return t
		}
	}
	return now
}

// holdLocked counts a declaration that entered the view for h: jobs
// entries, bytes, and a place on h's list as its newest. The caller holds
// v.mu.
func (v *Market) holdLocked(h *holder, ref declRef, jobs int, bytes int64, now time.Time) {
	h.decls = append(h.decls, ref)
	h.live++
	v.addHeldLocked(h, [dims]int64{int64(jobs), bytes}, now)
}

// addHeldLocked adds delta to what h holds and to the view's totals, and
// keeps h's place in the heaps. The caller holds v.mu.
func (v *Market) addHeldLocked(h *holder, delta [dims]int64, now time.Time) {
	for d := range dims {
		h.held[d] += delta[d]
		v.held[d] += delta[d]
	}
	in := h.idx[dimJobs] >= 0
	switch {
	case h.id == v.bounds.Self:
	case h.live > 0 && !in:
		h.young = now.Sub(h.first) < v.bounds.NewFor
		t := v.tierOf(h)
		for d := range dims {
			heap.Push(t[d], h)
		}
		if h.young {
			heap.Push(v.byAge, h)
		}
	case h.live == 0 && in:
		t := v.tierOf(h)
		for d := range dims {
			heap.Remove(t[d], h.idx[d])
		}
		if h.young {
			heap.Remove(v.byAge, h.idx[slotAge])
		}
	case in:
		t := v.tierOf(h)
		for d := range dims {
			heap.Fix(t[d], h.idx[d])
		}
	}
}

func (v *Market) tierOf(h *holder) tier {
	if h.young {
		return v.young
	}
	return v.known
}

// unholdLocked counts one entry of jobs (a job or a task) that left the
// view, and bytes with it; last says the declaration left with it. The
// caller holds v.mu.
func (v *Market) unholdLocked(submitter peer.ID, bytes int64, last bool, now time.Time) {
	h, ok := v.holders[submitter]
	if !ok {
		return
	}
	if last {
		h.live--
		if len(h.decls) > 2*h.live+16 {
			h.decls = slices.DeleteFunc(h.decls, func(r declRef) bool { return !v.heldRefLocked(h, r) })
		}
	}
	v.addHeldLocked(h, [dims]int64{-1, -bytes}, now)
}

// heldRefLocked reports whether r, one of h's declarations, is still in
// the view. The caller holds v.mu.
func (v *Market) heldRefLocked(h *holder, r declRef) bool {
	if a, ok := v.arrays[r.id]; ok {
		return a.submitter == h.id && a.seq == r.seq
	}
	j, ok := v.jobs[r.id]
	return ok && j.Array == "" && j.Submitter == h.id && j.seq == r.seq
}

// retierLocked moves the holders no longer new at now to the known tier.
// The caller holds v.mu.
func (v *Market) retierLocked(now time.Time) {
	for h := v.byAge.top(); h != nil && now.Sub(h.first) >= v.bounds.NewFor; h = v.byAge.top() {
		heap.Pop(v.byAge)
		for d := range dims {
			heap.Remove(v.young[d], h.idx[d])
		}
		h.young = false
		for d := range dims {
			heap.Push(v.known[d], h)
		}
	}
}

// overLocked is the dimension the view is over its bound in, jobs first;
// ok is false when it is within both. The caller holds v.mu.
func (v *Market) overLocked() (dimension, bool) {
	if v.bounds.Jobs >= 0 && v.held[dimJobs] > int64(v.bounds.Jobs) {
		return dimJobs, true
	}
	if v.bounds.DeclarationBytes >= 0 && v.held[dimBytes] > v.bounds.DeclarationBytes {
		return dimBytes, true
	}
	return 0, false
}

func (v *Market) capOf(d dimension) int64 {
	if d == dimJobs {
		return int64(v.bounds.Jobs)
	}
	return v.bounds.DeclarationBytes
}

// victimLocked is the holder to evict from while the view is over its
// bound in d: of the holders over their fair share in d (more than the
// bound over the number of holders), the new before the known, the
// largest first (victimHeap). Someone is over that share whenever the
// view is over its bound, unless Self holds the excess; then the largest
// other holder is taken, new before known, and nil means only Self
// holds anything. The caller holds v.mu.
func (v *Market) victimLocked(d dimension) *holder {
	over := func(h *holder) bool { return h != nil && v.overShareLocked(h.held[d], d) }
	young, known := v.young[d].top(), v.known[d].top()
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

// holdersLocked is how many identities hold anything, Self included.
// The caller holds v.mu.
func (v *Market) holdersLocked() int64 {
	n := int64(v.young[dimJobs].Len() + v.known[dimJobs].Len())
	if self := v.holders[v.bounds.Self]; v.bounds.Self != "" && self != nil && self.live > 0 {
		n++
	}
	return n
}

// overShareLocked reports whether holding held in d is over a holder's
// fair share of its bound: more than the bound over the number of
// holders. The caller holds v.mu.
func (v *Market) overShareLocked(held int64, d dimension) bool {
	return held*v.holdersLocked() > v.capOf(d)
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

// admitLocked keeps the view within its bounds after the declaration ref
// of h entered it at now: while over, it evicts the newest declaration of
// the holder victimLocked picks. It reports false when that was ref
// itself: the declaration is refused, the newest of a holder first in
// line. The caller holds v.mu.
func (v *Market) admitLocked(h *holder, ref declRef, now time.Time) bool {
	v.retierLocked(now)
	for {
		d, over := v.overLocked()
		if !over {
			return true
		}
		victim := v.victimLocked(d)
		if victim == nil {
			return true // Self alone, within its own bound
		}
		if h.idx[d] >= 0 && victim != h && v.overShareLocked(h.held[d], d) && !ahead(victim, h, h.held[d], d) {
			victim = h
		}
		r, ok := v.newestLocked(victim)
		if !ok {
			return true // cannot happen: a holder in the heaps holds something
		}
		// An array gives up only the tasks the bound on jobs needs (its
		// last first); the declaration being admitted, and an array
		// evicted for bytes (freed only with its last task), go whole.
		need := int64(0)
		if d == dimJobs && r != ref {
			need = v.held[d] - v.capOf(d)
		}
		jobs := v.evictLocked(r, victim.id, now, need)
		if jobs == 0 {
			return r != ref // cannot happen: a declaration held holds a job; never loop on it
		}
		if r == ref {
			v.refused[d.reason()]++
			v.round.refused++
			return false
		}
		v.evicted[d.reason()] += uint64(jobs)
		v.round.evicted[victim.id] += jobs
	}
}

// Refuses reports whether a declaration by signer arriving at now would
// be refused, however small: the view is at a bound, and one job (or
// byte) more would make signer first in line to be evicted (admitLocked).
// The gossip's validator asks it before it verifies what a requeue
// carries: a flood's identities over their share, re-announcing what the
// view refused, then cost a hash a declaration, not a signature check,
// and are not passed on.
func (v *Market) Refuses(signer peer.ID, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, refused := v.refusesLocked(signer, now, [dims]int64{1, 1})
	return refused
}

// refusesLocked reports whether admitLocked would refuse, at its first
// step, a declaration of delta (jobs, bytes) by signer arriving at now,
// and for which bound: the first the view would pass, jobs first, and
// signer over its share there and first in line. AddJob asks it before
// it adds an array's tasks, which cost far more to add and take out
// again than to refuse. The caller holds v.mu.
func (v *Market) refusesLocked(signer peer.ID, now time.Time, delta [dims]int64) (dimension, bool) {
	if signer == v.bounds.Self && signer != "" {
		return 0, false
	}
	d := dimJobs
	switch {
	case v.capOf(dimJobs) >= 0 && v.held[dimJobs]+delta[dimJobs] > v.capOf(dimJobs):
	case v.capOf(dimBytes) >= 0 && v.held[dimBytes]+delta[dimBytes] > v.capOf(dimBytes):
		d = dimBytes
	default:
		return 0, false // room
	}
	v.retierLocked(now)
	h := v.holders[signer]
	me := &holder{id: signer, first: v.firstSeenLocked(signer, now)}
	n := v.holdersLocked()
	held := delta[d]
	if h != nil && h.idx[dimJobs] >= 0 {
		held += h.held[d]
		me.young = h.young
	} else {
		n++
		if h != nil {
			held += h.held[d]
		}
		me.young = now.Sub(me.first) < v.bounds.NewFor
	}
	if held*n <= v.capOf(d) {
		return 0, false // within its share
	}
	// Over its share: refused unless another holder over its own goes
	// first (ahead).
	for _, t := range []*holderHeap{v.young[d], v.known[d]} {
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
		if top != nil && top.held[d]*n > v.capOf(d) && ahead(top, me, held, d) {
			return 0, false
		}
	}
	return d, true
}

// newestLocked is the newest declaration h still holds. The caller holds
// v.mu.
func (v *Market) newestLocked(h *holder) (declRef, bool) {
	for len(h.decls) > 0 {
		r := h.decls[len(h.decls)-1]
		if v.heldRefLocked(h, r) {
			return r, true
		}
		h.decls = h.decls[:len(h.decls)-1]
	}
	return declRef{}, false
}

// evictLocked takes declaration r of submitter out of the view as Prune
// takes an open job not re-announced: its next announcement brings it
// back, room permitting. A job or task already closed keeps what Prune
// keeps of it, a mark, so that a late copy of the declaration does not
// open it again; one closed by its submitter's refusal keeps nothing, as
// it would open again. Of an array, need > 0 takes only that many tasks,
// the highest first (the ones a pass would place last, capTasks), so that
// making room for one job does not take ten thousand; the rest stay, and
// the tasks taken come back when the array, once gone, is announced
// again. It returns how many jobs (tasks) left. The caller holds v.mu.
func (v *Market) evictLocked(r declRef, submitter peer.ID, now time.Time, need int64) int {
	// One ID for a single job; an array's tasks, from the last it may
	// still hold.
	ids, a := 1, v.arrays[r.id]
	if a != nil {
		ids = a.end
	}
	n := 0
	for i := ids - 1; i >= 0; i-- {
		if need > 0 && int64(n) >= need {
			break
		}
		id := r.id
		if a != nil {
			id = market.TaskID(r.id, i)
			a.end = i
		}
		j, ok := v.jobs[id]
		if !ok || j.Submitter != submitter {
			continue
		}
		switch {
		case j.closed.IsZero():
			v.dropOpen(j)
		case !j.declined:
			v.closed[id] = closedMark{at: j.closed, by: peer.ID(intern(string(j.Submitter))), declared: true}
		}
		v.removeJobLocked(id, j, now)
		n++
	}
	return n
}

// removeJobLocked deletes job j, held under id, from jobs, and counts it
// out of its holder's holding. The caller holds v.mu and has settled its
// open count.
func (v *Market) removeJobLocked(id string, j *OpenJob, now time.Time) {
	delete(v.jobs, id)
	last := j.Array == ""
	bytes := int64(j.Size)
	if !last {
		bytes = 0
		if e, ok := v.arrays[j.Array]; ok && e.held == 1 {
			last, bytes = true, int64(e.size)
		}
	}
	v.forgetTaskLocked(j)
	v.unholdLocked(j.Submitter, bytes, last, now)
}

// forgetHoldersLocked drops the identities that hold nothing and were
// last seen more than keep before now. The caller holds v.mu.
func (v *Market) forgetHoldersLocked(now time.Time, keep time.Duration) {
	for id, h := range v.holders {
		if h.live == 0 && now.Sub(h.last) > keep {
			delete(v.holders, id)
		}
	}
}

// BoundCounts are what a view's bounds did, and what it holds.
type BoundCounts struct {
	// Jobs and DeclarationBytes are what the view holds now.
	Jobs             int64
	DeclarationBytes int64
	// Refused counts declarations refused, Evicted jobs (tasks and parts
	// each one) evicted, by reason (BoundReasons).
	Refused map[string]uint64
	Evicted map[string]uint64
}

// Bounded returns what the view's bounds did since it was made.
func (v *Market) Bounded() BoundCounts {
	v.mu.Lock()
	defer v.mu.Unlock()
	c := BoundCounts{Jobs: v.held[dimJobs], DeclarationBytes: v.held[dimBytes], Refused: map[string]uint64{}, Evicted: map[string]uint64{}}
	for _, r := range BoundReasons() {
		c.Refused[r], c.Evicted[r] = v.refused[r], v.evicted[r]
	}
	return c
}

// Eviction is what the bounds evicted and refused since the last
// TakeEvictions.
type Eviction struct {
	// Submitters are those whose jobs were evicted, with how many, the
	// most first.
	Submitters []Evicted
	// Refused counts the declarations refused.
	Refused int
}

// Evicted is one submitter's jobs evicted.
type Evicted struct {
	Submitter peer.ID
	Jobs      int
}

// Jobs is how many jobs were evicted in all.
func (e Eviction) Jobs() int {
	n := 0
	for _, s := range e.Submitters {
		n += s.Jobs
	}
	return n
}

// evictionRound is what an Eviction is made from.
type evictionRound struct {
	evicted map[peer.ID]int
	refused int
}

// TakeEvictions returns what the bounds evicted and refused since it was
// last called, and starts again: the node logs it once a pass, not once a
// job, since under a flood a job is evicted for every one declared.
func (v *Market) TakeEvictions() Eviction {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := Eviction{Refused: v.round.refused}
	for id, n := range v.round.evicted {
		e.Submitters = append(e.Submitters, Evicted{Submitter: id, Jobs: n})
	}
	slices.SortFunc(e.Submitters, func(a, b Evicted) int {
		return cmp.Or(cmp.Compare(b.Jobs, a.Jobs), cmp.Compare(a.Submitter, b.Submitter))
	})
	v.round = evictionRound{evicted: map[peer.ID]int{}}
	return e
}
