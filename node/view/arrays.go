package view

import (
	"container/heap"
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
	// indices are the tasks' indices when the array lists them
	// (market.Array.Indices); nil: 0 to tasks-1.
	indices []int
	// held counts the tasks still in jobs; the entry goes with the last.
	held int
	// size is the signed declaration's length, and seq its declRef's.
	size int
	seq  uint64
	// end is past the place of the highest task the view may hold: the
	// bounds evict an array's tasks from the last down (evictLocked), and
	// the next eviction starts where the last stopped.
	end int
}

// taskID is the ID of the array's k-th task, lowest index first.
func (e *arrayEntry) taskID(array string, k int) string {
	if e.indices != nil {
		return market.TaskID(array, e.indices[k])
	}
	return market.TaskID(array, k)
}

// addArrayLocked adds a job for each task of the array a declares, which
// the view does not hold, all or none: a submitter over its bound of open
// tasks adds none. It reports whether any task is open, and the
// declaration the view holds now (zero if refused). The caller holds
// v.mu.
func (v *Market) addArrayLocked(a *OpenJob) (bool, declRef) {
	// A gang's parts are tasks too (market.Request.Nodes): Match places
	// them together.
	n := a.Body.Declaration.Parts()
	if v.open.tasks[a.Submitter]+n > maxOpenTasksPerSubmitter {
		v.hold.refused[BoundSubmitter]++
		return false, declRef{}
	}
	v.seq++
	e := &arrayEntry{submitter: a.Submitter, hash: a.Hash, tasks: n, size: a.Size, seq: v.seq, end: n}
	if spec := a.Body.Declaration.Array; spec != nil {
		e.parallel, e.indices = spec.Parallel, spec.Indices
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
	for k := range n {
		t := *a
		i := a.Body.Declaration.Array.Index(k)
		t.ID, t.Array, t.Index = market.TaskID(a.ID, i), a.ID, i
		if _, known := v.jobs[t.ID]; known {
			continue
		}
		if !withdrawn.IsZero() {
			if _, ok := v.closed[t.ID]; !ok {
				v.closed[t.ID] = closedMark{at: withdrawn, by: a.Submitter}
			}
		}
		if open, _ := v.addJobLocked(&t); open {
			opened = true
		}
		e.held++
	}
	ref := declRef{id: a.ID, seq: e.seq}
	v.hold.hold(v.hold.holder(a.Submitter, a.Seen), ref, e.held, int64(a.Size), a.Seen)
	return opened, ref
}

// refreshArrayLocked marks every task of an array re-announced at seen;
// it reports whether that opened any. The caller holds v.mu.
func (v *Market) refreshArrayLocked(id string, e *arrayEntry, seen time.Time) bool {
	opened := false
	for k := range e.tasks {
		if j, ok := v.jobs[e.taskID(id, k)]; ok && v.refreshLocked(j, seen) {
			opened = true
		}
	}
	return opened
}

// arrayBook holds the arrays (and gangs) whose tasks are in a view's
// jobs, by array ID. Part of a Market, guarded by its mu.
type arrayBook map[string]*arrayEntry

// forgetTask notes that a task has left jobs; its array's entry goes with
// the last.
func (b arrayBook) forgetTask(j *OpenJob) {
	if j.Array == "" {
		return
	}
	if e, ok := b[j.Array]; ok {
		if e.held--; e.held <= 0 {
			delete(b, j.Array)
		}
	}
}

// capTasks drops from jobs, which are open in a view, the tasks of each
// array with a cap (market.Array.Parallel) beyond what the cap leaves
// free given the view's live leases, and beyond what the view's offers
// could hold at once (capacity): its lowest-indexed open tasks are the
// ones kept, so that every peer keeps the same. A pass places no more of
// an array's tasks than its offers hold, so the rest would only be
// ordered, fitted and told to wait, on every pass, on every peer: an
// array of 10,000 tasks on forty GPUs costs a pass forty. A gang's parts
// are all kept: it is placed whole or not at all.
func (b arrayBook) capTasks(jobs []*OpenJob, live []market.Lease, offers []market.Offer) []*OpenJob {
	capped, parallel := map[string]int{}, map[string]int{}
	var gpus, cpus int
	for _, o := range offers {
		gpus, cpus = gpus+len(o.GPUs), cpus+max(o.CPUs, 0)
	}
	for _, j := range jobs {
		if j.Array == "" {
			continue
		}
		if _, seen := capped[j.Array]; seen {
			continue
		}
		e, ok := b[j.Array]
		r := j.Body.Declaration.Request
		if !ok || r.Gang() {
			continue
		}
		capped[j.Array] = capacity(r, gpus, cpus)
		if e.parallel > 0 {
			parallel[j.Array] = e.parallel
		}
	}
	if len(capped) == 0 {
		return jobs
	}
	// Only the parallel cap counts what is leased: the offers' capacity
	// is that of their free GPUs and held ones alike.
	for _, l := range live {
		if a, _, ok := market.SplitTaskID(l.Job); ok {
			if _, has := parallel[a]; has {
				parallel[a]--
			}
		}
	}
	for a, room := range parallel {
		capped[a] = min(capped[a], room)
	}
	// The lowest indices of each capped array: each array's room smallest
	// open indices, kept in a max-heap of that size, so that a pass over
	// an array of n open tasks costs n log room, not a sort of n.
	lowest := map[string]*maxHeap{}
	for a, room := range capped {
		lowest[a] = &maxHeap{room: max(room, 0)}
	}
	for _, j := range jobs {
		if h := lowest[j.Array]; h != nil {
			h.offer(j.Index)
		}
	}
	out := jobs[:0]
	for _, j := range jobs {
		if h := lowest[j.Array]; h != nil && !h.keeps(j.Index) {
			continue
		}
		out = append(out, j)
	}
	return out
}

// maxHeap holds the room smallest ints offered it, the largest on top.
type maxHeap struct {
	room int
	s    ints
}

// ints is a max-heap of ints for container/heap.
type ints []int

func (h ints) Len() int           { return len(h) }
func (h ints) Less(i, j int) bool { return h[i] > h[j] }
func (h ints) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ints) Push(x any)        { *h = append(*h, x.(int)) }
func (h *ints) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// offer adds i if it is among the room smallest so far.
func (h *maxHeap) offer(i int) {
	switch {
	case len(h.s) < h.room:
		heap.Push(&h.s, i)
	case h.room > 0 && i < h.s[0]:
		h.s[0] = i
		heap.Fix(&h.s, 0)
	}
}

// keeps reports whether i is among the room smallest offered: the
// indices of an array's tasks are distinct.
func (h *maxHeap) keeps(i int) bool {
	if len(h.s) < h.room {
		return true
	}
	return h.room > 0 && i <= h.s[0]
}

// capacity bounds how many tasks of request r a pass could place on
// offers of gpus GPUs and cpus CPUs in all, held or free: each holds at
// least its GPUs, or, asking none, its CPUs (at least 1). At least 1, so
// that an array the offers cannot hold still hears why it waits.
func capacity(r market.Request, gpus, cpus int) int {
	n := market.MaxArrayTasks
	switch {
	case r.GPUs > 0:
		n = gpus / r.GPUs
	case r.CPUs > 0:
		n = cpus / r.CPUs
	}
	return max(n, 1)
}
