package speed

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// Goals of the idle-network figures.
const (
	goalIdleRentP50     = 30 * time.Millisecond
	goalIdleRentP99     = 100 * time.Millisecond
	goalIdleReleasedP50 = 250 * time.Millisecond
)

// IdleReport is the idle network's figures.
type IdleReport struct {
	Nodes int `json:"nodes"`
	Jobs  int `json:"jobs"`
	// RentMs is submit -> signed lease; ReleasedMs submit -> released.
	RentMs     bench.Spread `json:"rent_ms"`
	ReleasedMs bench.Spread `json:"released_ms"`
	// WaitMs is the wall time of `e31 submit --wait` for a trivial job,
	// from the CLI's start to its exit with the output written and the
	// final receipt printed: what a user waits for.
	WaitMs bench.Spread `json:"wait_ms"`
}

// idleCLIRuns is how many jobs of the idle run go through the CLI.
const idleCLIRuns = 10

// MeasureIdle starts nodes nodes with 2 GPUs each and runs jobs trivial
// jobs one at a time, round-robin over the nodes, each after the last one
// was released and its GPU seen free again everywhere.
func MeasureIdle(ctx context.Context, e bench.Env, nodes, jobs int) (IdleReport, error) {
	r := IdleReport{Nodes: nodes, Jobs: jobs}
	decl, err := bench.TrivialJob()
	if err != nil {
		return r, err
	}
	e.Logf("idle: %d nodes x 2 GPUs, %d jobs one at a time", nodes, jobs)
	c, err := bench.StartNetwork(ctx, cluster.Options{N: nodes, GPUs: 2, Dir: filepath.Join(e.Dir, "idle"), Bin: e.Bin, Heartbeat: time.Second})
	if err != nil {
		return r, err
	}
	defer c.Stop()
	var rent, released []float64
	for i := range jobs {
		cl := c.Client(i % nodes)
		id, err := bench.Submit(ctx, cl, decl)
		if err != nil {
			return r, err
		}
		w := bench.NewJobWaiter(cl)
		w.Add(id)
		got, err := w.Follow(ctx, 60*time.Second)
		if err != nil {
			return r, err
		}
		j := got[0]
		if err := j.Completed(); err != nil {
			return r, err
		}
		rent = append(rent, bench.Ms(j.Rent.Sub(j.Submit)))
		released = append(released, bench.Ms(j.Released.Sub(j.Submit)))
		if err := bench.WaitIdle(ctx, c, 10*time.Second); err != nil {
			return r, err
		}
	}
	r.RentMs, r.ReleasedMs = bench.SpreadOf(rent), bench.SpreadOf(released)
	e.Logf("idle: submit -> lease p50 %.1f ms p99 %.1f ms; submit -> released p50 %.0f ms", r.RentMs.P50, r.RentMs.P99, r.ReleasedMs.P50)

	var waits []float64
	for i := range idleCLIRuns {
		n := c.Nodes[i%nodes]
		cmd := exec.CommandContext(ctx, e.Bin.E31, "--api", n.API, "--api-token-file", n.TokenFile, "submit", "--wait", "--gpus", "1", "--limit", "1m",
			"-o", filepath.Join(e.Dir, "idle", fmt.Sprintf("cli-out-%d", i)), "--", "true")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return r, fmt.Errorf("e31 submit --wait: %w\n%s", err, out)
		}
		waits = append(waits, bench.Ms(time.Since(start)))
		if err := bench.WaitIdle(ctx, c, 10*time.Second); err != nil {
			return r, err
		}
	}
	r.WaitMs = bench.SpreadOf(waits)
	e.Logf("idle: e31 submit --wait p50 %.0f ms p99 %.0f ms", r.WaitMs.P50, r.WaitMs.P99)
	return r, nil
}

// Figures are the idle network's rows; sandbox, when measured, is the
// baseline of submit -> released (a bare runc run's wall time).
func (r IdleReport) Figures(sandbox *SandboxLimit) []bench.Figure {
	rentOK := r.RentMs.P50 <= bench.Ms(goalIdleRentP50) && r.RentMs.P99 <= bench.Ms(goalIdleRentP99)
	f := []bench.Figure{
		{Group: "idle", Name: fmt.Sprintf("idle network (%d nodes), submit -> signed lease", r.Nodes), Value: r.RentMs.P50, Unit: "ms",
			Measured: fmt.Sprintf("p50 %.1f ms, p99 %.1f ms (n=%d)", r.RentMs.P50, r.RentMs.P99, r.RentMs.N),
			Goal:     fmt.Sprintf("p50 <= %s, p99 <= %s", goalIdleRentP50, goalIdleRentP99), OK: new(rentOK)},
		{Group: "idle", Name: "idle network, trivial job submit -> released", Value: r.ReleasedMs.P50, Unit: "ms",
			Measured: fmt.Sprintf("p50 %.0f ms, p99 %.0f ms", r.ReleasedMs.P50, r.ReleasedMs.P99),
			Goal:     fmt.Sprintf("p50 <= %s", goalIdleReleasedP50), OK: new(r.ReleasedMs.P50 <= bench.Ms(goalIdleReleasedP50))},
	}
	if sandbox != nil && sandbox.BareWallMs.P50 > 0 {
		f[1].Baseline = fmt.Sprintf("bare runc run p50 %.0f ms", sandbox.BareWallMs.P50)
		f[1].Ratio = new(r.ReleasedMs.P50 / sandbox.BareWallMs.P50)
	}
	if r.WaitMs.N > 0 {
		f = append(f, bench.Figure{Group: "idle", Name: "  same, `e31 submit --wait` start to exit (output written, receipt printed)", Value: r.WaitMs.P50, Unit: "ms",
			Measured: fmt.Sprintf("p50 %.0f ms, p99 %.0f ms (n=%d)", r.WaitMs.P50, r.WaitMs.P99, r.WaitMs.N),
			Goal:     fmt.Sprintf("p50 <= %s", goalIdleReleasedP50), OK: new(r.WaitMs.P50 <= bench.Ms(goalIdleReleasedP50))})
	}
	return f
}
