package submitter

import (
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// tallies keeps, for each array viewed since this node started, its tasks
// counted by how far each has come, and which tasks changed since: a
// view of an array of ten thousand tasks reads the tasks that changed,
// not every task, and a follower of it is woken at each change. Its locks
// are leaves, taken under a task's jobTracker.mu (bump notes the change)
// and never around another.
type tallies struct {
	mu sync.Mutex
	m  map[string]*arrayTally
}

// taskClass is how far a task has come, by its last attempt.
type taskClass int8

const (
	taskQueued taskClass = iota
	taskRunning
	taskCompleted
	taskFailed
	taskWithdrawn
)

// arrayTally is one array's: its slices are by the tasks' places, lowest
// index first. indices is immutable; mu guards the rest.
type arrayTally struct {
	// indices are the tasks' indices when the array lists them
	// (market.Array.Indices); nil: each task's index is its place.
	indices []int
	mu      sync.Mutex
	class   []taskClass
	// ended is when each task ended (its release step); zero while it
	// runs or waits.
	ended []time.Time
	// dirty holds the places of the tasks changed since they were last
	// classified;
	// all of them until the first view.
	dirty   map[int]bool
	built   bool
	version uint64
	changed chan struct{}
}

// of returns the tally of an array of n tasks, made on first use;
// indices are the tasks' when the array lists them, else nil.
func (t *tallies) of(array string, n int, indices []int) *arrayTally {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.m[array]
	if a == nil {
		a = &arrayTally{indices: indices, class: make([]taskClass, n), ended: make([]time.Time, n), dirty: map[int]bool{}, version: 1}
		if t.m == nil {
			t.m = map[string]*arrayTally{}
		}
		t.m[array] = a
	}
	return a
}

// note marks the task of index i of an array changed, for an array
// already tallied (the first view classifies every task anyway).
func (t *tallies) note(array string, i int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	a := t.m[array]
	t.mu.Unlock()
	if a == nil {
		return
	}
	k, ok := a.place(i)
	a.mu.Lock()
	defer a.mu.Unlock()
	if ok && k < len(a.class) {
		a.dirty[k] = true
	}
	a.version++
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
}

// taskKey is the array and index of a task's record, or of an attempt
// that resumes one.
func taskKey(r *Record) (array string, index int, ok bool) {
	if a, i, ok := market.SplitTaskID(r.ID); ok {
		return a, i, true
	}
	return market.SplitTaskID(r.Root)
}

// place is where the task of index i comes in the array.
func (a *arrayTally) place(i int) (int, bool) {
	if a.indices == nil {
		return i, i >= 0
	}
	return slices.BinarySearch(a.indices, i)
}

// index is the index of the task at place k.
func (a *arrayTally) index(k int) int {
	if a.indices == nil {
		return k
	}
	return a.indices[k]
}

// take returns the places of the tasks to classify: every one the first
// time, then those changed since.
func (a *arrayTally) take() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.built {
		a.built = true
		clear(a.dirty)
		out := make([]int, len(a.class))
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, len(a.dirty))
	for i := range a.dirty {
		out = append(out, i)
	}
	clear(a.dirty)
	slices.Sort(out)
	return out
}

func (a *arrayTally) set(i int, c taskClass, ended time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.class[i], a.ended[i] = c, ended
}

// read counts the tasks, and returns the tally's version and a channel
// closed at its next change.
func (a *arrayTally) read() (*api.TaskCounts, uint64, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := &api.TaskCounts{Total: len(a.class), Indices: slices.Clone(a.indices)}
	var done []time.Time
	for i, k := range a.class {
		switch k {
		case taskQueued:
			c.Queued++
		case taskRunning:
			c.Running++
		case taskCompleted:
			c.Completed++
			if !a.ended[i].IsZero() {
				done = append(done, a.ended[i])
			}
		case taskFailed:
			c.Failed++
			c.FailedIndices = append(c.FailedIndices, a.index(i))
		case taskWithdrawn:
			c.Withdrawn++
		}
	}
	c.Done = donePoints(done)
	if a.changed == nil {
		a.changed = make(chan struct{})
	}
	return c, a.version, a.changed
}

// donePoints is the curve of completions over time from the times tasks
// completed: each point how many had completed by then, at most
// api.MaxDonePoints of them, evenly spaced by count (so exact points of
// the curve), the last at the latest completion.
func donePoints(ended []time.Time) []api.DonePoint {
	if len(ended) == 0 {
		return nil
	}
	slices.SortFunc(ended, time.Time.Compare)
	n := len(ended)
	k := min(n, api.MaxDonePoints)
	out := make([]api.DonePoint, 0, k)
	for j := range k {
		i := n - 1
		if k > 1 {
			i = j * (n - 1) / (k - 1)
		}
		out = append(out, api.DonePoint{At: ended[i], Done: i + 1})
	}
	return out
}

// endedAt is when a task's last attempt ended (its release step), zero
// before it has.
func endedAt(t api.Job) time.Time {
	if !t.State.Terminal() {
		return time.Time{}
	}
	for _, s := range slices.Backward(t.Steps) {
		if s.Step == api.StepRelease {
			return s.At
		}
	}
	return time.Time{}
}

// classOf is how far a task has come, by its view.
func classOf(t api.Job) taskClass {
	switch {
	case t.State == api.JobWithdrawn:
		return taskWithdrawn
	case t.State == api.JobReleased && ledger.Outcome(t.Outcome) == ledger.OutcomeCompleted:
		return taskCompleted
	case t.State.Terminal():
		return taskFailed
	case t.State == api.JobRunning || t.State == api.JobOutput:
		return taskRunning
	}
	return taskQueued
}
