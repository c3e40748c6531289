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

// warnNeverHeld prints to stderr, for job id just submitted, why no
// provider in view could ever hold it, and returns that reason ("" where
// one could). The job is accepted: a peer-to-peer network may grow.
func warnNeverHeld(ctx context.Context, g *globalOptions, d market.Declaration, id string) string {
	why := neverHeld(ctx, g, d)
	if why != "" {
		fmt.Fprintf(g.stderr, "warning: %s; job %s is accepted and waits in case a provider that can hold it joins (e31 withdraw %s stops it)\n", why, id, id)
	}
	return why
}

// waitsForever is how submit --wait ends for a job that no offer in view
// could ever hold: with that reason, the job left queued, and exit status
// waitNeverHeld; with --json the job is printed first.
func waitsForever(g *globalOptions, job api.Job, why string, asJSON bool) error {
	if asJSON {
		if err := g.printJSON(job); err != nil {
			return err
		}
	}
	return &waitError{code: waitNeverHeld, msg: fmt.Sprintf("job %s will wait as long as the network stays as it is: %s; not following it (it stays queued: e31 status %s, e31 withdraw %s)", job.ID, why, job.ID, job.ID)}
}
