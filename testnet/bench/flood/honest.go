package flood

import (
	"context"
	"fmt"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// submitHonest submits n trivial honest jobs round-robin over c's nodes
// and returns a waiter per node following them and how many were
// submitted, which is fewer than n after an error.
func submitHonest(ctx context.Context, c *cluster.Cluster, n int) ([]*bench.JobWaiter, int, error) {
	decl, err := bench.TrivialJob()
	if err != nil {
		return nil, 0, err
	}
	ws := make([]*bench.JobWaiter, len(c.Nodes))
	for i := range ws {
		ws[i] = bench.NewJobWaiter(c.Client(i))
	}
	for i := range n {
		id, err := bench.Submit(ctx, c.Client(i%len(c.Nodes)), decl)
		if err != nil {
			return ws, i, err
		}
		ws[i%len(c.Nodes)].Add(id)
	}
	return ws, n, nil
}

// pending says, for each job the waiters still follow, where it stands:
// "job ID STATE: REASON"; a job that cannot be read is left out.
func pending(ctx context.Context, ws []*bench.JobWaiter) []string {
	var out []string
	for _, w := range ws {
		for _, id := range w.Pending() {
			if j, err := w.Client().Job(ctx, id); err == nil {
				out = append(out, fmt.Sprintf("job %s %s: %s", id, j.State, j.Reason))
			}
		}
	}
	return out
}

// tally counts the ended jobs that completed and spreads their submit to
// release times, in ms; why says how each of the others ended.
func tally(es []bench.Ended) (completed int, job bench.Spread, why []string) {
	var took []float64
	for _, e := range es {
		if err := e.Completed(); err != nil {
			why = append(why, err.Error())
			continue
		}
		completed++
		took = append(took, bench.Ms(e.Released.Sub(e.Submit)))
	}
	return completed, bench.SpreadOf(took), why
}
