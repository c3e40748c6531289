package view

import (
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// OpenJob is a declared job, open until leased or withdrawn.
type OpenJob struct {
	ID        string
	Submitter peer.ID
	Body      wire.DeclarationBody
	Seen      time.Time // when this node received it
	// Signed is when the announcement that opened it was signed; an
	// epoch's cut takes it with Seen (see Stamp). Zero: Seen.
	Signed time.Time
	// Hash is the SHA-256 of the signed declaration: a requeue that carries
	// these bytes again need not have them verified again. Zero: unknown.
	Hash [32]byte
	// Size is the signed declaration's length in bytes, counted against
	// the view's bound on declaration bytes (Bounds) once for the whole
	// declaration, an array's or a gang's tasks and all.
	Size      int
	seq       uint64    // its declRef's, for a job declared on its own
	refreshed time.Time // when it was last announced (declared or requeued)
	closed    Stamp     // the lease or withdrawal that closed it; zero while open
	// declined marks a job closed on its submitter's refusal of a proposal
	// rather than by a signed lease or withdrawal: a re-announcement after
	// the refusal (the submitter put the job back in the queue) opens it
	// again.
	declined bool
	// submittedAt is the start of the epoch in which the job entered this
	// node's view (see market.Job.SubmittedAt).
	submittedAt int64
	// avoid lists the providers its submitter named for it, each stamped
	// with the announcement that named it first (market.Job.Avoid).
	avoid []avoidMark
	// submitter is Submitter as text, encoded once when the job is added:
	// base58 costs microseconds, and every pass over a deep queue would
	// pay it for every job.
	submitter string
	// Array is the ID of the array this job is a task of, and Index its
	// index in it (market.Array.Index); "" for a job declared on its own. A task shares its
	// array's Body, Hash and stamps: Declaration gives its own.
	Array string
	Index int
}

// Declaration is what the job runs: a task's is its array's with the
// task's variables (market.Declaration.Task).
func (j *OpenJob) Declaration() market.Declaration {
	if j.Array == "" {
		return j.Body.Declaration
	}
	return j.Body.Declaration.Task(j.Index)
}

// maxOpenJobsPerSubmitter bounds what one peer can make every view hold
// and every epoch's Match walk, in jobs declared one by one; its arrays'
// open tasks are bounded apart, by maxOpenTasksPerSubmitter.
const (
	maxOpenJobsPerSubmitter  = 10_000
	maxOpenTasksPerSubmitter = market.MaxArrayTasks
)

// AddJob records a declared job; it reports whether the job is new and
// open. A job already known is only marked re-announced. An array's
// declaration adds a job for each of its tasks, all or none, and a gang's
// one for each of its parts, likewise; it reports whether any is open. A
// declaration new to the view may take the place of others, or be
// refused, to keep the view within its Bounds (doc.go, "Bounds").
func (v *Market) AddJob(j *OpenJob) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, split := j.Body.Declaration.Parts(), j.Body.Declaration.Split()
	if split {
		if e, ok := v.arrays[j.ID]; ok {
			v.hold.touch(j.Submitter, j.Seen)
			return v.refreshArrayLocked(j.ID, e, j.Seen)
		}
	} else if old, ok := v.jobs[j.ID]; ok {
		v.hold.touch(j.Submitter, j.Seen)
		return v.refreshLocked(old, j.Seen)
	}
	if reason, ok := v.hold.fits(n, j.Size); !ok {
		v.hold.countRefused(reason)
		return false
	}
	if d, refused := v.hold.refuses(j.Submitter, j.Seen, [dims]int64{int64(n), int64(j.Size)}); refused {
		// As admitLocked would, once every task was added: refused
		// before, for a hash lookup rather than thousands of tasks
		// added and taken out again.
		v.hold.countRefused(d.reason())
		return false
	}
	var opened bool
	var ref declRef
	if split {
		opened, ref = v.addArrayLocked(j)
	} else {
		opened, ref = v.addJobLocked(j)
	}
	if ref.id == "" {
		return opened
	}
	if !v.admitLocked(v.hold.holders[j.Submitter], ref, j.Seen) {
		return false
	}
	return opened
}

// addJobLocked adds a job (or task) the view does not hold. It reports
// whether it is open and, for a job declared on its own, the declaration
// it holds now (zero if refused): a task's array counts its tasks. The
// caller holds v.mu.
func (v *Market) addJobLocked(j *OpenJob) (bool, declRef) {
	j.refreshed = j.Seen
	j.submitter = j.Submitter.String()
	if m, ok := v.closed[j.ID]; ok && m.by == j.Submitter {
		j.closed = m.at
	}
	if j.closed.IsZero() {
		if j.Array == "" && v.open.jobs[j.Submitter] >= maxOpenJobsPerSubmitter {
			v.hold.refused[BoundSubmitter]++
			return false, declRef{}
		}
		v.open.add(j)
	}
	v.jobs[j.ID] = j
	if j.Array != "" {
		return j.closed.IsZero(), declRef{}
	}
	v.seq++
	j.seq = v.seq
	ref := declRef{id: j.ID, seq: j.seq}
	v.hold.hold(v.hold.holder(j.Submitter, j.Seen), ref, 1, int64(j.Size), j.Seen)
	return j.closed.IsZero(), ref
}

// OpenCount is how many jobs are open now.
func (v *Market) OpenCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.open.total()
}

// Job returns a job that is open now.
func (v *Market) Job(id string) (*OpenJob, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	j, ok := v.jobs[id]
	if !ok || !j.closed.IsZero() {
		return nil, false
	}
	return j, true
}

// SubmitterOf returns the submitter of a job whose declaration arrived.
func (v *Market) SubmitterOf(id string) (peer.ID, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if j, ok := v.jobs[id]; ok {
		return j.Submitter, true
	}
	if a, ok := v.arrays[id]; ok {
		return a.submitter, true
	}
	if m, ok := v.closed[id]; ok && m.declared {
		return m.by, true
	}
	return "", false
}

// CloseJob closes a job on the word of by, who must be its submitter; at
// stamps the withdrawal.
func (v *Market) CloseJob(id string, by peer.ID, at Stamp) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closeJobLocked(id, by, at)
}

// closeJobLocked is CloseJob with v.mu held: the job, if open and closed
// by its submitter, is marked closed at; one not seen is remembered closed.
func (v *Market) closeJobLocked(id string, by peer.ID, at Stamp) {
	if a, ok := v.arrays[id]; ok {
		// An array withdrawn: every task of it.
		if a.submitter == by {
			for k := range a.tasks {
				v.closeJobLocked(a.taskID(id, k), by, at)
			}
		}
		return
	}
	if j, ok := v.jobs[id]; ok {
		if j.Submitter != by {
			return
		}
		switch {
		case j.closed.IsZero():
			j.closed = at
			v.open.drop(j)
		case j.declined:
			// Declined on a proposal that raced this lease or withdrawal:
			// the signed close stands in for the refusal, and only a
			// requeue of this lease opens the job again. An array's
			// re-announcement refreshes all its tasks, so a task left
			// marked declined would be opened again, and proposed and
			// refused, at every one for as long as the array lived.
			j.closed, j.declined = at, false
		}
		return
	}
	if _, ok := v.closed[id]; !ok {
		v.closed[id] = closedMark{at: at, by: by}
	}
}
