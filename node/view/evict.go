package view

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Eviction (doc.go, "Bounds"): what the Market does with its holdings'
// verdicts, on its jobs. The caller of each ...Locked holds v.mu.

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
	_, refused := v.hold.refuses(signer, now, [dims]int64{1, 1})
	return refused
}

// admitLocked keeps the view within its bounds after the declaration ref
// of h entered it at now: while over, it evicts the newest declaration of
// the holder holdings.victim picks. It reports false when that was ref
// itself: the declaration is refused, the newest of a holder first in
// line. The caller holds v.mu.
func (v *Market) admitLocked(h *holder, ref declRef, now time.Time) bool {
	v.hold.retier(now)
	for {
		d, over := v.hold.over()
		if !over {
			return true
		}
		victim := v.hold.victim(d)
		if victim == nil {
			return true // Self alone, within its own bound
		}
		if h.idx[d] >= 0 && victim != h && v.hold.overShare(h.held[d], d) && !ahead(victim, h, h.held[d], d) {
			victim = h
		}
		r, ok := v.hold.newest(victim, v.heldRefLocked)
		if !ok {
			return true // cannot happen: a holder in the heaps holds something
		}
		// An array gives up only the tasks the bound on jobs needs (its
		// last first); the declaration being admitted, and an array
		// evicted for bytes (freed only with its last task), go whole.
		need := int64(0)
		if d == dimJobs && r != ref {
			need = v.hold.held[d] - v.hold.capOf(d)
		}
		jobs := v.evictLocked(r, victim.id, now, need)
		if jobs == 0 {
			return r != ref // cannot happen: a declaration held holds a job; never loop on it
		}
		if r == ref {
			v.hold.countRefused(d.reason())
			return false
		}
		v.hold.countEvicted(d.reason(), victim.id, jobs)
	}
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
			id = a.taskID(r.id, i)
			a.end = i
		}
		j, ok := v.jobs[id]
		if !ok || j.Submitter != submitter {
			continue
		}
		switch {
		case j.closed.IsZero():
			v.open.drop(j)
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
	v.arrays.forgetTask(j)
	v.hold.unhold(j.Submitter, bytes, last, now, v.heldRefLocked)
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
