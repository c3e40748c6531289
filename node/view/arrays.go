package view

import (
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/libp2p/go-libp2p/core/peer"
)

// arrayEntry is an array whose tasks the view holds, each as a job of its
// own under market.TaskID, or a gang whose parts it holds likewise: its
// declaration is signed and broadcast once, and re-announced as one.
type arrayEntry struct {
	submitter peer.ID
	hash      [32]byte
	tasks     int
	// parallel caps the tasks leased at once (market.Array.Parallel).
	parallel int
	// held counts the tasks still in jobs; the entry goes with the last.
	held int
}

// addArrayLocked adds a job for each task of the array a declares, all or
// none: a submitter over its bound of open tasks adds none. It reports
// whether any task is open. The caller holds v.mu.
func (v *Market) addArrayLocked(a *OpenJob) bool {
	if e, ok := v.arrays[a.ID]; ok {
		return v.refreshArrayLocked(a.ID, e, a.Seen)
	}
	// A gang's parts are tasks too (market.Request.Nodes): Match places
	// them together.
	n := a.Body.Declaration.Parts()
	if v.openTasks[a.Submitter]+n > maxOpenTasksPerSubmitter {
		return false
	}
	e := &arrayEntry{submitter: a.Submitter, hash: a.Hash, tasks: n}
	if spec := a.Body.Declaration.Array; spec != nil {
		e.parallel = spec.Parallel
	}
	v.arrays[a.ID] = e
	// Withdrawn before its declaration arrived: every task is born
	// closed.
	var withdrawn Stamp
	if m, ok := v.closed[a.ID]; ok && m.by == a.Submitter {
		withdrawn = m.at
		delete(v.closed, a.ID)
	}
	opened := false
	for i := range n {
		t := *a
		t.ID, t.Array, t.Index = market.TaskID(a.ID, i), a.ID, i
		if _, known := v.jobs[t.ID]; known {
			continue
		}
		if !withdrawn.IsZero() {
			if _, ok := v.closed[t.ID]; !ok {
				v.closed[t.ID] = closedMark{at: withdrawn, by: a.Submitter}
			}
		}
		if v.addJobLocked(&t) {
			opened = true
		}
		e.held++
	}
	return opened
}

// refreshArrayLocked marks every task of an array re-announced at seen;
// it reports whether that opened any. The caller holds v.mu.
func (v *Market) refreshArrayLocked(id string, e *arrayEntry, seen time.Time) bool {
	opened := false
	for i := range e.tasks {
		if j, ok := v.jobs[market.TaskID(id, i)]; ok && v.refreshLocked(j, seen) {
			opened = true
		}
	}
	return opened
}

// forgetTaskLocked notes that a task has left jobs; its array's entry goes
// with the last. The caller holds v.mu.
func (v *Market) forgetTaskLocked(j *OpenJob) {
	if j.Array == "" {
		return
	}
	if e, ok := v.arrays[j.Array]; ok {
		if e.held--; e.held <= 0 {
			delete(v.arrays, j.Array)
		}
	}
}

// capTasks drops from jobs, which are open in a view, the tasks of each
// array with a cap (market.Array.Parallel) beyond what the cap leaves
// free given the view's live leases: its lowest-indexed open tasks are
// the ones kept, so that every peer keeps the same. The caller holds v.mu.
func (v *Market) capTasks(jobs []*OpenJob, live []market.Lease) []*OpenJob {
	capped := map[string]int{}
	for _, j := range jobs {
		if j.Array == "" {
			continue
		}
		if e, ok := v.arrays[j.Array]; ok && e.parallel > 0 {
			capped[j.Array] = e.parallel
		}
	}
	if len(capped) == 0 {
		return jobs
	}
	for _, l := range live {
		if a, _, ok := market.SplitTaskID(l.Job); ok {
			if _, has := capped[a]; has {
				capped[a]--
			}
		}
	}
	// The lowest indices of each capped array: a task is kept when fewer
	// than the room left have a lower index among the open ones.
	open := map[string][]int{}
	for _, j := range jobs {
		if _, has := capped[j.Array]; has {
			open[j.Array] = append(open[j.Array], j.Index)
		}
	}
	keepBelow := map[string]int{}
	for a, idx := range open {
		room := capped[a]
		if room <= 0 {
			keepBelow[a] = -1
			continue
		}
		if room >= len(idx) {
			keepBelow[a] = market.MaxArrayTasks
			continue
		}
		keepBelow[a] = nthSmallest(idx, room)
	}
	out := jobs[:0]
	for _, j := range jobs {
		if b, has := keepBelow[j.Array]; has && j.Index >= b {
			continue
		}
		out = append(out, j)
	}
	return out
}

// nthSmallest returns the n-th smallest of distinct ints (0-based n), so
// that exactly n of them are below it.
func nthSmallest(s []int, n int) int {
	c := make([]int, len(s))
	copy(c, s)
	slices.Sort(c)
	return c[n]
}
