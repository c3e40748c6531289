package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

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
}

// ThroughputReport is the throughput run's figures.
type ThroughputReport struct {
	Nodes      int     `json:"nodes"`
	Submitters int     `json:"submitters"`
	Jobs       int     `json:"jobs"`
	WindowS    float64 `json:"window_s"`
	JobsPerS   float64 `json:"jobs_per_s"`
	ReleasedMs Spread  `json:"released_ms"`
	// Profile is present when profiles were taken.
	Profile *ProfileReport `json:"profile,omitempty"`
}

// MeasureThroughput starts o.Nodes nodes with 4 GPUs each; o.Submitters
// submitters, each on its own node, submit their share of o.Jobs trivial
// jobs back to back, all at once; the figure is the jobs over the span
// from the first submit to the last release.
func MeasureThroughput(ctx context.Context, e Env, o ThroughputOptions) (ThroughputReport, error) {
	r := ThroughputReport{Nodes: o.Nodes, Submitters: min(o.Submitters, o.Nodes), Jobs: o.Jobs}
	decl, err := trivialJob()
	if err != nil {
		return r, err
	}
	e.logf("throughput: %d nodes x %d GPUs, %d jobs from %d submitters", o.Nodes, throughputGPUs, o.Jobs, r.Submitters)
	c, err := startNetwork(ctx, cluster.Options{N: o.Nodes, GPUs: throughputGPUs, Dir: filepath.Join(e.Dir, "throughput"), Bin: e.Bin,
		Heartbeat: time.Second, Metrics: o.ProfileDir != ""})
	if err != nil {
		return r, err
	}
	defer c.Stop()

	var prof *profiler
	if o.ProfileDir != "" {
		if prof, err = startProfiles(ctx, c, o.ProfileDir, o.ProfileFor); err != nil {
			return r, err
		}
		e.logf("throughput: taking a %s CPU profile of every daemon", o.ProfileFor)
	}

	waiters := make([]*jobWaiter, r.Submitters)
	errs := make([]error, r.Submitters)
	var wg sync.WaitGroup
	for s := range r.Submitters {
		waiters[s] = &jobWaiter{cl: c.Client(s)}
		share := o.Jobs / r.Submitters
		if s < o.Jobs%r.Submitters {
			share++
		}
		wg.Go(func() {
			for range share {
				id, err := submit(ctx, waiters[s].cl, decl)
				if err != nil {
					errs[s] = err
					return
				}
				waiters[s].add(id)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	es, err := waitAll(ctx, waiters, 100*time.Millisecond, throughputWaitTime)
	if err != nil {
		return r, err
	}
	var released []float64
	for _, j := range es {
		if err := j.completed(); err != nil {
			return r, err
		}
		released = append(released, ms(j.released.Sub(j.submit)))
	}
	d, rate := window(es)
	r.WindowS, r.JobsPerS, r.ReleasedMs = d.Seconds(), rate, SpreadOf(released)
	e.logf("throughput: %.1f jobs/s, submit -> released p50 %.0f ms p99 %.0f ms", r.JobsPerS, r.ReleasedMs.P50, r.ReleasedMs.P99)
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
func (r ThroughputReport) Figures(sandbox *SandboxLimit) []Figure {
	name := fmt.Sprintf("%d trivial sandboxed jobs, %d submitters, %d nodes x %d GPUs", r.Jobs, r.Submitters, r.Nodes, throughputGPUs)
	f := []Figure{
		{Group: "throughput", Name: name, Value: r.JobsPerS, Unit: "jobs/s",
			Measured: fmt.Sprintf("%.1f jobs/s", r.JobsPerS), Goal: fmt.Sprintf(">= %.1fx sandbox-bound limit", goalLimitRatio)},
		{Group: "throughput", Name: "  same run, submit -> released", Value: r.ReleasedMs.P99, Unit: "ms",
			Measured: fmt.Sprintf("p50 %.0f ms, p99 %.0f ms", r.ReleasedMs.P50, r.ReleasedMs.P99),
			Goal:     fmt.Sprintf("p99 <= %s", goalThroughputP99), OK: ptr(r.ReleasedMs.P99 <= ms(goalThroughputP99))},
	}
	if sandbox != nil && sandbox.JobsPerS > 0 {
		ratio := r.JobsPerS / sandbox.JobsPerS
		f[0].Baseline = fmt.Sprintf("limit %.0f jobs/s (%d cores / %.1f CPU-ms per bare runc run)", sandbox.JobsPerS, sandbox.Cores, sandbox.BareCPUMs)
		f[0].Ratio, f[0].OK = ptr(ratio), ptr(ratio >= goalLimitRatio)
	}
	if r.Profile != nil {
		f = append(f, r.Profile.Figures(sandbox)...)
	}
	return f
}
