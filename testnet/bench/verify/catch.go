package verify

import (
	"context"
	"fmt"
	"slices"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// catchOf reads, task by task, what the checks of the released array j
// did to the liar: the tasks it returned (an attempt of the task that
// completed on it), the checks drawn on them, and the checks of other
// providers' tasks it ran.
func catchOf(ctx context.Context, cl *api.Client, j api.Job, liar string) (Catch, error) {
	row := Catch{Completed: completed(j)}
	if j.Tasks != nil {
		row.Tasks = j.Tasks.Total
	}
	if v := j.Verification; v != nil {
		row.Checks, row.Rerun, row.Caught = v.Checks, v.Rerun, slices.Contains(v.Caught, liar)
	}
	arrayID := j.ID
	if j.Tasks != nil && j.Tasks.ID != "" {
		arrayID = j.Tasks.ID
	}
	for i := range row.Tasks {
		t, err := cl.Job(ctx, market.TaskID(arrayID, i))
		if err != nil {
			return row, fmt.Errorf("task %d: %w", i, err)
		}
		first := firstProvider(t)
		if first == liar {
			row.LiarTasks++
		}
		if t.Verification == nil || len(t.Verification.Replicas) == 0 {
			continue
		}
		if first == liar {
			row.LiarChecks++
			continue
		}
		for _, r := range t.Verification.Replicas[1:] {
			if r.Provider == liar {
				row.AsChecker++
			}
		}
	}
	return row, nil
}

// firstProvider is the provider that first returned the task completed:
// the run a spot check checks.
func firstProvider(t api.Job) string {
	for _, a := range t.Attempts {
		if a.Outcome == string(ledger.OutcomeCompleted) {
			return a.Provider
		}
	}
	if len(t.Attempts) == 0 && t.Outcome == string(ledger.OutcomeCompleted) {
		return t.Provider
	}
	return ""
}
