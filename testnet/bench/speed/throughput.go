package speed

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/e31network/e31/node"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// Goals of the throughput figures.
const (
	goalLimitRatio     = 0.6
	goalThroughputP99  = 2 * time.Second
	throughputGPUs     = 4
	throughputWaitTime = 10 * time.Minute
)

// ThroughputOptions size the throughput run.
type ThroughputOptions struct {
	Nodes, Submitters, Jobs int
	// ProfileDir, when set, gets a CPU profile of every daemon taken
	// during the load, ProfileFor long.
	ProfileDir string
	ProfileFor time.Duration
	// Burst submits every job at once, each submitter its share back to
	// back without waiting: a queue of Jobs, whose last job's
	// submit -> released time is the whole run. By default each submitter
	// submits its next job once its last one has ended.
	Burst bool
}

// ThroughputReport is the throughput run's figures.
type ThroughputReport struct {
	Nodes      int          `json:"nodes"`
	Submitters int          `json:"submitters"`
	Jobs       int          `json:"jobs"`
	Burst      bool         `json:"burst,omitempty"`
	WindowS    float64      `json:"window_s"`
	JobsPerS   float64      `json:"jobs_per_s"`
	ReleasedMs bench.Spread `json:"released_ms"`
	// StepMs splits submit -> released into the time from each step to
	// the next (submit->rent, rent->run, run->output, output->release),
	// by the daemons' own step times.
	StepMs map[string]bench.Spread `json:"step_ms"`
	// Profile is present when profiles were taken.
	Profile *ProfileReport `json:"profile,omitempty"`
}

// MeasureThroughput starts o.Nodes nodes with 4 GPUs each; o.Submitters
// submitters, each on its own node, run their share of o.Jobs trivial jobs
// one after another, all submitters at once: a submitter submits its next
// job when its last one has ended (or, with o.Burst, right after submitting
// it), following it as `e31 submit --wait` does, the daemon answering at
// each change of the job. The figure is the jobs over the span from the first submit to the
// last release; a job's submit -> released time is its own turn, not its
// place in a queue of all the jobs. The daemons re-publish their offers on
// the daemon's default heartbeat, as a network that is not a test does; the
// testnet's 1s heartbeat would add ten offers a second to the jobs' own
// gossip.
func MeasureThroughput(ctx context.Context, e bench.Env, o ThroughputOptions) (ThroughputReport, error) {
	r := ThroughputReport{Nodes: o.Nodes, Submitters: min(o.Submitters, o.Nodes), Jobs: o.Jobs, Burst: o.Burst}
	decl, err := bench.TrivialJob()
	if err != nil {
		return r, err
	}
	pattern := "each submits its next job when its last has ended"
	if o.Burst {
		pattern = "all submitted at once"
	}
	e.Logf("throughput: %d nodes x %d GPUs, %d jobs from %d submitters, %s", o.Nodes, throughputGPUs, o.Jobs, r.Submitters, pattern)
	c, err := bench.StartNetwork(ctx, cluster.Options{N: o.Nodes, GPUs: throughputGPUs, Dir: filepath.Join(e.Dir, "throughput"), Bin: e.Bin,
		Heartbeat: node.DefaultHeartbeat, Metrics: o.ProfileDir != ""})
	if err != nil {
		return r, err
	}
	defer c.Stop()

	var prof *profiler
	if o.ProfileDir != "" {
		if prof, err = startProfiles(ctx, c, o.ProfileDir, o.ProfileFor); err != nil {
			return r, err
		}
		e.Logf("throughput: taking a %s CPU profile of every daemon", o.ProfileFor)
	}

	waiters := make([]*bench.JobWaiter, r.Submitters)
	errs := make([]error, r.Submitters)
	ends := make([][]bench.Ended, r.Submitters)
	var wg sync.WaitGroup
	for s := range r.Submitters {
		waiters[s] = bench.NewJobWaiter(c.Client(s))
		share := o.Jobs / r.Submitters
		if s < o.Jobs%r.Submitters {
			share++
		}
		wg.Go(func() {
			for range share {
				id, err := bench.Submit(ctx, waiters[s].Client(), decl)
				if err != nil {
					errs[s] = err
					return
				}
				waiters[s].Add(id)
				if o.Burst {
					continue
				}
				got, err := waiters[s].Follow(ctx, throughputWaitTime)
				ends[s] = append(ends[s], got...)
				if err != nil {
					errs[s] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	var es []bench.Ended
	if o.Burst {
		if es, err = bench.WaitAll(ctx, waiters, 100*time.Millisecond, throughputWaitTime); err != nil {
			return r, err
		}
	} else {
		for _, e := range ends {
			es = append(es, e...)
		}
	}
	released, err := bench.ReleasedMs(es)
	if err != nil {
		return r, err
	}
	d, rate := bench.Window(es)
	r.WindowS, r.JobsPerS, r.ReleasedMs = d.Seconds(), rate, bench.SpreadOf(released)
	r.StepMs = stepSpreads(es)
	e.Logf("throughput: %.1f jobs/s, submit -> released p50 %.0f ms p99 %.0f ms", r.JobsPerS, r.ReleasedMs.P50, r.ReleasedMs.P99)
	for i := 1; i < len(api.Steps); i++ {
		name := string(api.Steps[i-1]) + "->" + string(api.Steps[i])
		sp := r.StepMs[name]
		e.Logf("throughput:   %-15s p50 %5.0f ms  p99 %5.0f ms", name, sp.P50, sp.P99)
	}
	if prof != nil {
		p, err := prof.finish(ctx, es)
		if err != nil {
			return r, err
		}
		r.Profile = &p
	}
	return r, nil
}

// Figures are the throughput rows, held against the sandbox-bound limit
// when it was measured.
func (r ThroughputReport) Figures(sandbox *SandboxLimit) []bench.Figure {
	name := fmt.Sprintf("%d trivial sandboxed jobs, %d submitters, %d nodes x %d GPUs", r.Jobs, r.Submitters, r.Nodes, throughputGPUs)
	if r.Burst {
		name += ", all at once"
	}
	f := []bench.Figure{
		{Group: "throughput", Name: name, Value: r.JobsPerS, Unit: "jobs/s",
			Measured: fmt.Sprintf("%.1f jobs/s", r.JobsPerS), Goal: fmt.Sprintf(">= %.1fx sandbox-bound limit", goalLimitRatio)},
		{Group: "throughput", Name: "  same run, submit -> released", Value: r.ReleasedMs.P99, Unit: "ms",
			Measured: fmt.Sprintf("p50 %.0f ms, p99 %.0f ms", r.ReleasedMs.P50, r.ReleasedMs.P99),
			Goal:     fmt.Sprintf("p99 <= %s", goalThroughputP99), OK: new(r.ReleasedMs.P99 <= bench.Ms(goalThroughputP99))},
	}
	if sandbox != nil && sandbox.JobsPerS > 0 {
		ratio := r.JobsPerS / sandbox.JobsPerS
		f[0].Baseline = fmt.Sprintf("limit %.0f jobs/s (%d cores / %.1f CPU-ms per bare runc run)", sandbox.JobsPerS, sandbox.Cores, sandbox.BareCPUMs)
		f[0].Ratio, f[0].OK = new(ratio), new(ratio >= goalLimitRatio)
	}
	if r.Profile != nil {
		f = append(f, r.Profile.Figures(sandbox)...)
	}
	return f
}

// stepSpreads is the time from each step to the next over es, keyed
// "submit->rent" and so on; a job that skipped a step counts in neither
// span around it.
func stepSpreads(es []bench.Ended) map[string]bench.Spread {
	spans := map[string][]float64{}
	for _, e := range es {
		for i := 1; i < len(api.Steps); i++ {
			from, ok1 := bench.StepAt(e.Job, api.Steps[i-1])
			to, ok2 := bench.StepAt(e.Job, api.Steps[i])
			if ok1 && ok2 {
				name := string(api.Steps[i-1]) + "->" + string(api.Steps[i])
				spans[name] = append(spans[name], bench.Ms(to.Sub(from)))
			}
		}
	}
	out := make(map[string]bench.Spread, len(spans))
	for name, v := range spans {
		out[name] = bench.SpreadOf(v)
	}
	return out
}
