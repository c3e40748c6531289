package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// probeModel is the model of the probe provider's devices: the far
// network's jobs ask for H100s, so only the daemon's probe jobs fit here,
// and only here.
const probeModel = "B200"

// probeResult is what the probe jobs came to.
type probeResult struct {
	leased int
	rentMs float64
	err    error
}

// probe submits one trivial job to the daemon every every until deadline,
// each asking for a probeModel device, and follows each until it ends.
// The daemon's own Match, on the view the far network fills, must place
// them; its rounds lost are counted by the daemon (roundsLostPer100).
func probe(ctx context.Context, cl *api.Client, every time.Duration, deadline time.Time) (r probeResult) {
	d := market.NewDeclaration("scale-probe", []string{"true"}, 1, market.Duration(60_000), nil)
	d.Request.GPUModel = probeModel
	decl, err := json.Marshal(d)
	if err != nil {
		r.err = err
		return r
	}
	var rents []float64
	for next := time.Now(); next.Before(deadline); next = next.Add(every) {
		if err := task.Sleep(ctx, time.Until(next)); err != nil {
			r.err = err
			return r
		}
		id, err := bench.Submit(ctx, cl, decl)
		if err != nil {
			r.err = fmt.Errorf("scale: probe job: %w", err)
			return r
		}
		w := bench.NewJobWaiter(cl)
		w.Add(id)
		got, err := w.Follow(ctx, time.Minute)
		if err != nil {
			r.err = fmt.Errorf("scale: probe job %s: %w", id, err)
			return r
		}
		if err := got[0].Completed(); err != nil {
			r.err = fmt.Errorf("scale: probe job: %w", err)
			return r
		}
		r.leased++
		rents = append(rents, bench.Ms(got[0].Rent.Sub(got[0].Submit)))
	}
	if len(rents) > 0 {
		slices.Sort(rents)
		r.rentMs = rents[len(rents)/2]
	}
	return r
}

// roundsLostPer100 reads the daemon's rounds lost, all of them its probe
// jobs' (it submits no other), per 100 probe jobs leased.
func roundsLostPer100(ctx context.Context, d *cluster.Node, p probeResult) (float64, error) {
	if p.leased == 0 {
		return -1, nil
	}
	ms, err := bench.Scrape(ctx, d.Metrics)
	if err != nil {
		return 0, fmt.Errorf("scale: the daemon's metrics: %w", err)
	}
	lost, ok := ms["e31_match_rounds_lost_total"]
	if !ok {
		return 0, fmt.Errorf("scale: the daemon reports no e31_match_rounds_lost_total")
	}
	return 100 * lost / float64(p.leased), nil
}
