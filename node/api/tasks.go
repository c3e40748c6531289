package api

import "time"

// TaskCounts counts an array's tasks, each by the state of its last
// attempt: queued (renting included), running (output included),
// completed, failed (rejected included) and withdrawn.
type TaskCounts struct {
	// ID is the array's own, which its tasks' IDs start with: the job's
	// ID, unless the array was held for upstreams under an ID of its
	// submitter's making.
	ID        string `json:"id"`
	Total     int    `json:"total"`
	Queued    int    `json:"queued"`
	Running   int    `json:"running"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
	Withdrawn int    `json:"withdrawn"`
	// FailedIndices lists the failed tasks, lowest first.
	FailedIndices []int `json:"failed_indices,omitempty"`
	// Done traces the completions over time, for a plot: how many tasks
	// had completed by each time, at most MaxDonePoints points, the last
	// at the latest completion.
	Done []DonePoint `json:"done,omitempty"`
	// Indices are the tasks' indices, lowest first, when the array lists
	// them (array.indices, --array 7,40,73); absent, they are 0 to
	// Total-1.
	Indices []int `json:"indices,omitempty"`
}

// Index is the index of the array's k-th task, lowest first.
func (c *TaskCounts) Index(k int) int {
	if len(c.Indices) > 0 {
		return c.Indices[k]
	}
	return k
}

// MaxDonePoints bounds TaskCounts.Done, whatever the array's size.
const MaxDonePoints = 64

// DonePoint is how many of an array's tasks had completed by a time.
type DonePoint struct {
	At   time.Time `json:"at"`
	Done int       `json:"done"`
}
