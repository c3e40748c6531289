package main

import (
	"context"
	"fmt"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// waitNeverHeld is the exit status of submit --wait for a job that no
// offer in view could ever hold: it is queued and stays so, in case a
// provider that can joins.
const waitNeverHeld = 7

// neverHeld says why no provider in the daemon's view could ever hold
// d's request (market.NeverHeld), from the offers it lists; "" where one
// could, where none is in view yet, or where the daemon cannot say.
func neverHeld(ctx context.Context, g *globalOptions, d market.Declaration) string {
	nodes, err := g.client().Nodes(ctx)
	if err != nil {
		return "" // the submit went through; this is advice only
	}
	return market.NeverHeld(d.Request, offersOf(nodes))
}

// offersOf turns the API's providers into offers for market.NeverHeld,
// which reads their GPUs, CPUs and memory.
func offersOf(nodes []api.Node) []market.Offer {
	out := make([]market.Offer, len(nodes))
	for i, n := range nodes {
		o := market.Offer{Provider: n.PeerID, CPUs: n.CPUs, MemoryBytes: n.MemoryBytes, Draining: n.Draining, Closed: n.Closed}
		for _, gpu := range n.GPUs {
			o.GPUs = append(o.GPUs, market.GPU{Index: gpu.Index, UUID: gpu.UUID, Model: gpu.Model, MemoryBytes: gpu.MemoryBytes, Free: gpu.Free})
		}
		out[i] = o
	}
	return out
}

// sayNeverHeld tells, of job just submitted from d, why no provider in
// view could ever hold it, where none could. The job is accepted, since a
// peer-to-peer network may grow: without wait the reason is a warning on
// stderr; with wait it is the error submit ends with, exit status
// waitNeverHeld, rather than following a job that would wait forever
// (with asJSON the job is printed first).
func sayNeverHeld(ctx context.Context, g *globalOptions, d market.Declaration, job api.Job, wait, asJSON bool) error {
	why := neverHeld(ctx, g, d)
	switch {
	case why == "":
		return nil
	case !wait:
		fmt.Fprintf(g.stderr, "warning: %s; job %s is accepted and waits in case a provider that can hold it joins (e31 withdraw %s stops it)\n", why, job.ID, job.ID)
		return nil
	case asJSON:
		if err := g.printJSON(job); err != nil {
			return err
		}
	}
	return &waitError{code: waitNeverHeld, msg: fmt.Sprintf("job %s is accepted but will wait as long as the network stays as it is: %s; not following it (it stays queued: e31 status %s, e31 withdraw %s)", job.ID, why, job.ID, job.ID)}
}
