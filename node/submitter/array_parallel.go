package submitter

import (
	"fmt"
	"sync"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// An array's parallel cap (market.Array.Parallel: at most P of its tasks
// leased at once) is kept by every peer's view (view.arrayBook.capTasks),
// which counts the array's live leases. But a task's lease reaches the
// views only with this node's next task batch (TaskBatchEvery), and a
// pass between places another task on whatever provider is free: without
// a check here, an array capped at one could run three tasks at once.
// So the submitter, the one party that knows every lease of its arrays,
// accepts a task's lease only while fewer than P of the array's tasks
// hold one, deciding one proposal of an array at a time.

// parallelGate orders the proposals of each capped array's tasks.
type parallelGate struct {
	// leased counts, by array, its tasks that hold a lease now (this
	// node's records); set once by New.
	leased func(array string) int

	mu     sync.Mutex             // state lock: guards arrays
	arrays map[string]*sync.Mutex // one ordering lock per capped array
}

// admit decides whether a proposal for a task of array may go on to be
// accepted under the array's cap parallel (0: none). Where it may, done
// must be called once the proposal is decided (accepted or not), and not
// before: the next proposal of the array counts this one.
func (g *parallelGate) admit(array string, parallel int) (done func(), err error) {
	if parallel <= 0 {
		return func() {}, nil
	}
	g.mu.Lock()
	if g.arrays == nil {
		g.arrays = map[string]*sync.Mutex{}
	}
	m := g.arrays[array]
	if m == nil {
		m = &sync.Mutex{}
		g.arrays[array] = m
	}
	g.mu.Unlock()
	m.Lock()
	if n := g.leased(array); n >= parallel {
		m.Unlock()
		return nil, p2p.Refuse(wire.CodeDeclined, fmt.Errorf("declined: array %s has %d tasks leased, its parallel cap", array, n))
	}
	return m.Unlock, nil
}

// parallelOf is the parallel cap of the array task job belongs to; 0 for
// a job that is no task, or an array without a cap.
func (p *parts) parallelOf(job string) (array string, parallel int) {
	array, _, ok := market.SplitTaskID(job)
	if !ok {
		return "", 0
	}
	a := p.reload(array)
	if a == nil {
		return array, 0
	}
	a.view(func(r *Record) {
		if r.Declaration.Array != nil {
			parallel = r.Declaration.Array.Parallel
		}
	})
	return array, parallel
}

// leasedTasks counts the tasks of array that hold a lease now: renting,
// running or handing over their output. Only a job still open is in
// memory for good, so the jobs in memory are all it reads.
func (reg *registry) leasedTasks(array string) int {
	n := 0
	for id, j := range reg.live() {
		if a, _, ok := market.SplitTaskID(id); !ok || a != array {
			continue
		}
		j.view(func(r *Record) {
			switch r.State {
			case api.JobRenting, api.JobRunning, api.JobOutput:
				n++
			}
		})
	}
	return n
}
