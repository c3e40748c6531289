package main

import (
	"context"
	"fmt"
	"strconv"
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
	idx, err := parseIndices(spec, j.Tasks.Total)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(idx))
	for i, n := range idx {
		ids[i] = market.TaskID(arrayID(j), n)
	}
	return ids, nil
}

// parseIndices reads "1,3,10-12" as indices below n, each once, in order.
func parseIndices(spec string, n int) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for part := range strings.SplitSeq(spec, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		first, err1 := strconv.Atoi(lo)
		last, err2 := first, error(nil)
		if isRange {
			last, err2 = strconv.Atoi(hi)
		}
		switch {
		case err1 != nil || err2 != nil || first < 0:
			return nil, fmt.Errorf("tasks %q: want indices such as 7, 5-9 or 1,3,10-12", spec)
		case last < first:
			return nil, fmt.Errorf("tasks %q: %s ends before it starts", spec, part)
		case last >= n:
			return nil, fmt.Errorf("tasks %q: the array has tasks 0 to %d", spec, n-1)
		}
		for i := first; i <= last; i++ {
			if !seen[i] {
				seen[i] = true
				out = append(out, i)
			}
		}
	}
	return out, nil
}

// arrayID is the ID an array's tasks are named under: its own, which is
// not its handle's when it was held for upstreams.
func arrayID(j api.Job) string {
	if j.Tasks != nil && j.Tasks.ID != "" {
		return j.Tasks.ID
	}
	return j.ID
}
