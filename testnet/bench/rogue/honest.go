package rogue

import (
	"context"
	"fmt"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/bench"
)

// honestJobs is how many honest jobs run beside each network's attacks.
const honestJobs = 3

// submitHonest submits the honest jobs that run beside the attacks, each
// asking for gpus of model, and returns their IDs.
func submitHonest(ctx context.Context, sub *api.Client, gpus int, model string) ([]string, error) {
	var ids []string
	for i := range honestJobs {
		id, err := submit(ctx, sub, declaration(fmt.Sprintf("honest-%d", i), "sleep 2; echo done > /out/result", gpus, model, 5*time.Minute))
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// waitHonest waits up to two minutes for the honest job id to be
// released and returns it as last seen; a job that was not is logged.
func waitHonest(ctx context.Context, o Options, sub *api.Client, id string) api.Job {
	j, err := bench.WaitJob(ctx, sub, id, 2*time.Minute, func(j api.Job) (bool, error) { return j.State == api.JobReleased, nil })
	if err != nil {
		o.Log("honest job %s: %v", id, err)
	}
	return j
}
