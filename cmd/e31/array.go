package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// taskIDs are the IDs of an array's tasks named by spec, Slurm's list form
// ("7", "5-9", "1,3,10-12"), each checked against the array's size; array
// may be a prefix of the array's ID.
func taskIDs(ctx context.Context, g *globalOptions, array, spec string) ([]string, error) {
	j, err := g.client().Job(ctx, array)
	if err != nil {
		return nil, err
	}
	if j.Tasks == nil {
		return nil, fmt.Errorf("job %s is no array: --task and --tasks name an array's tasks", j.ID)
	}
	idx, err := parseIndices(spec, j.Tasks)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(idx))
	for i, n := range idx {
		ids[i] = market.TaskID(arrayID(j), n)
	}
	return ids, nil
}

// parseIndices reads "1,3,10-12" as indices of the array's tasks, each
// once, lowest first.
func parseIndices(spec string, tasks *api.TaskCounts) ([]int, error) {
	idx, err := market.ParseIndexList(spec)
	if err != nil {
		return nil, fmt.Errorf("tasks %q: %w", spec, err)
	}
	for _, i := range idx {
		switch {
		case len(tasks.Indices) == 0 && i >= tasks.Total:
			return nil, fmt.Errorf("tasks %q: the array has tasks 0 to %d", spec, tasks.Total-1)
		case len(tasks.Indices) > 0 && !slices.Contains(tasks.Indices, i):
			return nil, fmt.Errorf("tasks %q: the array has no task %d; its tasks are %s", spec, i, market.FormatIndexList(tasks.Indices))
		}
	}
	return idx, nil
}

// arrayID is the ID an array's tasks are named under: its own, which is
// not its handle's when it was held for upstreams.
func arrayID(j api.Job) string {
	if j.Tasks != nil && j.Tasks.ID != "" {
		return j.Tasks.ID
	}
	return j.ID
}

// endingDetail is what follows a job's outcome in the line that says how
// it ended: " (attributed to job, exit code 3)". An array's ending has no
// single attribution (each task has its own), so it may be bare.
func endingDetail(attribution, exit string) string {
	detail := strings.TrimPrefix(exit, ", ")
	if attribution != "" {
		detail = "attributed to " + attribution + exit
	}
	if detail == "" {
		return ""
	}
	return " (" + detail + ")"
}
