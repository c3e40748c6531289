package submitter

import (
	"errors"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// What a user submitted has one ID, the one submit printed; the ledger
// knows its leases under many: each attempt runs under an ID of its own
// (a resumption, a retry, a run again after a preemption: attempts.go), an
// array's tasks under ARRAY.N and their attempts under theirs, a gang's
// next attempt under a new array ID, and a held job (a pipeline's stage,
// hold.go) under the ID it was announced with once released. LedgerJobs
// gathers them from the records' links (Next, Root, Array, Tasks), so that
// usage, receipts and export of a job find every lease of it.

// LedgerJobs returns every job ID the ledger may hold leases under for the
// job a user names by id (or a unique prefix): a job, an array, a task
// ID.N (of a held array too), a gang, a held job. An attempt named by its
// own ID is that attempt alone.
func (s *Submitter) LedgerJobs(id string) (api.JobIDs, error) {
	j, err := s.findShown(id)
	if err != nil {
		return api.JobIDs{}, err
	}
	return s.ledgerJobsOf(j, true), nil
}

// findShown finds a job by an ID a user was shown: as the registry finds
// it, or a task ID.N whose ID is a held array's, which names task N of the
// array it became (its tasks are named by the array's announced ID).
func (k *kit) findShown(id string) (*jobTracker, error) {
	j, err := k.jobs.find(id)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return j, err
	}
	array, i, ok := market.SplitTaskID(id)
	if !ok {
		return nil, err
	}
	held, herr := k.jobs.find(array)
	if herr != nil {
		return nil, err
	}
	var placeholder bool
	held.view(func(r *Record) { placeholder = r.placeholder() })
	if !placeholder {
		return nil, err
	}
	became := (heldJob{chain{k, held, true}}).became()
	if became == nil {
		return nil, err
	}
	if t := k.jobs.get(market.TaskID(became.id, i)); t != nil {
		return t, nil
	}
	return nil, err
}

// ledgerJobsOf gathers the ledger's job IDs of the job whose tracker is j
// (LedgerJobs); with tasks, each task's apart with how its last attempt
// stands, else IDs alone (what summing a job needs).
func (k *kit) ledgerJobsOf(j *jobTracker, tasks bool) api.JobIDs {
	var root string
	j.view(func(r *Record) { root = r.Root })
	out := api.JobIDs{ID: j.id, IDs: []string{}}
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			out.IDs = append(out.IDs, id)
		}
	}
	if root != "" && !j.isArrayTracker() {
		add(j.id) // an attempt named by its own ID: that attempt
		return out
	}
	at := map[int]int{} // task index → its place in out.Tasks
	for _, a := range k.attempts(j) {
		var id string
		var n int
		var placeholder bool
		var indices []int // the tasks' indices where the array lists them
		a.view(func(r *Record) { id, n, placeholder, indices = r.ID, r.Tasks, r.placeholder(), r.taskIndices() })
		switch {
		case n > 0:
			// An array, a gang's attempt, or the array a held job became:
			// each task, each of its attempts. A gang's later attempts
			// are new arrays whose part N is the same task N.
			add(id)
			for place := range n {
				i := place
				if indices != nil {
					i = indices[place]
				}
				t := k.jobs.get(market.TaskID(id, i))
				if t == nil {
					continue // not on disk: a stop during submit
				}
				ids := k.appendAttemptIDs(nil, t.id)
				ids = k.appendReplicaIDs(ids, t)
				for _, id := range ids {
					add(id)
				}
				if !tasks {
					continue
				}
				last := k.lastAttempt(t)
				task := api.TaskIDs{Index: i, ID: t.id, IDs: ids}
				last.view(func(r *Record) {
					task.State, task.Outcome, task.Attribution = r.State, string(r.Outcome), string(r.Attribution)
				})
				if p, ok := at[i]; ok {
					task.IDs = append(out.Tasks[p].IDs, ids...)
					out.Tasks[p] = task
				} else {
					at[i] = len(out.Tasks)
					out.Tasks = append(out.Tasks, task)
				}
			}
		case placeholder:
			// A held job's record never runs: its leases are its
			// attempts'.
		default:
			add(id)
			for _, r := range k.appendReplicaIDs(nil, a) {
				add(r)
			}
		}
	}
	return out
}

// appendReplicaIDs appends the IDs of every attempt of the other runs of
// the check whose first run's tracker is j (replicas.go): what checking
// the job's results held is the job's too.
func (k *kit) appendReplicaIDs(ids []string, j *jobTracker) []string {
	var replicas []string
	j.view(func(r *Record) { replicas = r.Replicas })
	for _, id := range replicas {
		ids = k.appendAttemptIDs(ids, id)
	}
	return ids
}
