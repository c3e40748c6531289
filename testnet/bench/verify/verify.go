package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// Options size a run. Zero values take the defaults named.
type Options struct {
	// Honest is the honest providers (4), GPUs the simulated H100s of
	// each (4); LiarGPUs the simulated L4s of the no-work provider (2).
	Honest, GPUs, LiarGPUs int
	// Tasks is the cost arrays' tasks (1000), TaskRun how long each
	// sleeps (200ms), CostSpot the spot rate of the cost part (0.05).
	Tasks    int
	TaskRun  time.Duration
	CostSpot float64
	// Rates are the catch part's spot rates (0.02, 0.05, 0.1), one array
	// of CatchTasks tasks (200) each.
	Rates      []float64
	CatchTasks int
	// Trials, Ks and Seed are the model's draws: Trials trials (10,000)
	// for each rate and each k of Ks (10, 50, 200), from a math/rand
	// seeded with Seed (1).
	Trials int
	Ks     []int
	Seed   uint64
	// Wait bounds each array, submit to release (10m).
	Wait time.Duration
}

func (o *Options) defaults() {
	bench.Default(&o.Honest, 4)
	bench.Default(&o.GPUs, 4)
	bench.Default(&o.LiarGPUs, 2)
	bench.Default(&o.Tasks, 1000)
	bench.Default(&o.TaskRun, 200*time.Millisecond)
	bench.Default(&o.CostSpot, 0.05)
	bench.Default(&o.CatchTasks, 200)
	bench.Default(&o.Trials, 10_000)
	bench.Default(&o.Seed, 1)
	bench.Default(&o.Wait, 10*time.Minute)
	if len(o.Rates) == 0 {
		o.Rates = []float64{0.02, 0.05, 0.1}
	}
	if len(o.Ks) == 0 {
		o.Ks = []int{10, 50, 200}
	}
}

// honestModel is the honest providers' GPU model, which the cost arrays
// ask for, so that the liar (another model) never runs them.
const honestModel = "H100"

// daemonArgs are the daemons' timings, those of the e2e tests with
// byzantine providers (testnet/e2e, byzantine_test.go).
func daemonArgs() []string {
	return []string{"--epoch", "250ms", "--proposal-ttl", "1500ms", "--receipt-interval", "1s", "--provider-lost-after", "3s", "--grace", "1s"}
}

// Model draws the binomial model for each rate and each k.
func Model(o Options) []Draws {
	o.defaults()
	var out []Draws
	for _, s := range o.Rates {
		for _, k := range o.Ks {
			out = append(out, Simulate(o.Seed, s, k, o.Trials))
		}
	}
	return out
}

// Run builds e31d, e31d with the byzantine tag and e31 into dir/bin,
// starts one testnet in dir (a submitter per spot rate, o.Honest honest
// providers and one no-work provider) and measures the cost and the
// catch parts on it; log, if not nil, receives progress lines.
func Run(ctx context.Context, dir string, log func(format string, args ...any), o Options) (rep Report, err error) {
	o.defaults()
	logf := bench.Env{Log: log}.Logf
	submitters := max(1, len(o.Rates))
	rep = Report{
		Machine: fmt.Sprintf("%s/%s, %d CPUs, no GPU (simulated), %s, load %s at the start", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"), bench.LoadAvg()),
		Network: fmt.Sprintf("%d submitters, %d honest providers x %d simulated %s, 1 no-work provider x %d simulated L4; cost arrays of %d tasks, catch arrays of %d",
			submitters, o.Honest, o.GPUs, honestModel, o.LiarGPUs, o.Tasks, o.CatchTasks),
		TaskRunS: o.TaskRun.Seconds(),
		Model:    Model(o),
		Seed:     o.Seed,
	}
	defer func() { rep.Machine += ", " + bench.LoadAvg() + " at the end" }()
	logf("building e31d, its byzantine build and e31 (load %s)", bench.LoadAvg())
	bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return rep, err
	}
	if bin.E31dByzantine, err = cluster.BuildByzantine(ctx, filepath.Join(dir, "bin")); err != nil {
		return rep, err
	}
	sim := make([]string, submitters)
	for range o.Honest {
		sim = append(sim, fmt.Sprintf("%dx%s:80GiB", o.GPUs, honestModel))
	}
	sim = append(sim, fmt.Sprintf("%dxL4:24GiB", o.LiarGPUs))
	misbehave := make([]string, len(sim))
	misbehave[len(sim)-1] = "no-work"
	c, err := bench.StartNetwork(ctx, cluster.Options{N: len(sim), SimGPUsByNode: sim, Misbehave: misbehave,
		Heartbeat: 500 * time.Millisecond, Args: daemonArgs(), Dir: filepath.Join(dir, "net"), Bin: bin})
	if err != nil {
		return rep, err
	}
	defer c.Stop()
	liar := c.Nodes[len(sim)-1].PeerID
	logf("network up: %s", rep.Network)

	cost := []struct {
		name string
		v    *market.Verify
	}{{"none", nil}, {fmt.Sprintf("spot %g", o.CostSpot), &market.Verify{Spot: o.CostSpot}}, {"replicas 2", &market.Verify{Replicas: 2}}}
	for _, k := range cost {
		d := arrayDecl("cost", o.Tasks, o.TaskRun, k.v)
		d.Request.GPUModel = honestModel
		row := Cost{Verify: k.name, Tasks: o.Tasks}
		if err := d.Validate(); err != nil {
			if !strings.Contains(err.Error(), "verify.replicas") {
				return rep, fmt.Errorf("cost, %s: %w", k.name, err)
			}
			row.NotMeasured = "replicas on arrays not available"
			logf("cost %s: not measured: %v", k.name, err)
			rep.Cost = append(rep.Cost, row)
			continue
		}
		logf("cost %s: %d tasks", k.name, o.Tasks)
		j, wall, err := runArray(ctx, c, c.Client(0), d, o.Wait)
		if err != nil && ctx.Err() == nil && !j.State.Terminal() {
			// The others are still measured, on a network the array
			// no longer holds.
			row.NotMeasured = err.Error()
			logf("cost %s: %v; withdrawn", k.name, err)
			if _, werr := c.Client(0).Withdraw(ctx, j.ID); werr != nil {
				return rep, fmt.Errorf("cost, %s: %w; withdraw: %w", k.name, err, werr)
			}
			if err := bench.WaitIdle(ctx, c, 2*time.Minute); err != nil {
				return rep, fmt.Errorf("cost, %s: %w", k.name, err)
			}
			rep.Cost = append(rep.Cost, row)
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("cost, %s: %w", k.name, err)
		}
		row.WallS, row.Completed = wall.Seconds(), completed(j)
		if j.Held != nil {
			row.GPUHours, row.VerificationGPUHours = j.Held.GPUHours, j.Held.VerificationGPUHours
		}
		if j.Verification != nil {
			row.Checks = j.Verification.Checks
		}
		logf("cost %s: %d/%d completed in %.1fs, %.4f GPU-hours (%.4f checking)", k.name, row.Completed, row.Tasks, row.WallS, row.GPUHours, row.VerificationGPUHours)
		rep.Cost = append(rep.Cost, row)
	}

	for i, s := range o.Rates {
		cl := c.Client(i)
		logf("catch at spot %g: %d tasks from submitter %d", s, o.CatchTasks, i)
		j, wall, err := runArray(ctx, c, cl, arrayDecl(fmt.Sprintf("catch-%g", s), o.CatchTasks, o.TaskRun, &market.Verify{Spot: s}), o.Wait)
		if err != nil {
			rep.CatchError = fmt.Sprintf("spot %g: %v", s, err)
			return rep, nil
		}
		row, err := catchOf(ctx, cl, j, liar)
		if err != nil {
			rep.CatchError = fmt.Sprintf("spot %g: %v", s, err)
			return rep, nil
		}
		row.Spot, row.WallS = s, wall.Seconds()
		row.ModelChecks, row.ModelPCaught = row.ExpectedChecks(), row.PCaught()
		logf("catch at spot %g: k=%d, %d checks on them (expected %.1f), caught %t (P %.4f), %d as checker, %d rerun",
			s, row.LiarTasks, row.LiarChecks, row.ExpectedChecks(), row.Caught, row.PCaught(), row.AsChecker, row.Rerun)
		rep.Catch = append(rep.Catch, row)
	}
	return rep, nil
}

// arrayDecl is an array of n tasks, each writing its index and sleeping
// run, checked as v says.
func arrayDecl(name string, n int, run time.Duration, v *market.Verify) market.Declaration {
	script := fmt.Sprintf(`echo "$E31_TASK_INDEX" > /out/index; sleep %g`, run.Seconds())
	d := market.NewDeclaration(name, []string{"sh", "-c", script}, 1, market.Duration(time.Minute.Milliseconds()), nil)
	d.Request.Memory = 256 * market.MiB
	d.Array = &market.Array{Count: n}
	d.Verify = v
	return d
}

// runArray submits d on cl, follows it to its release, bounded by limit,
// and returns its view then and the time from submit to release; then it
// waits for every view to show the GPUs free, so that the next array
// starts from an idle network.
func runArray(ctx context.Context, c *cluster.Cluster, cl *api.Client, d market.Declaration, limit time.Duration) (api.Job, time.Duration, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return api.Job{}, 0, err
	}
	start := time.Now()
	id, err := bench.Submit(ctx, cl, raw)
	if err != nil {
		return api.Job{}, 0, err
	}
	lctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	j, err := cl.Job(lctx, id)
	for err == nil && !j.State.Terminal() {
		j, err = cl.NextJob(lctx, j, 30*time.Second, 100*time.Millisecond)
	}
	wall := time.Since(start)
	j.ID = id
	if err != nil {
		if errors.Is(lctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return j, wall, fmt.Errorf("array %s not released %s after its submit (%s, %s)", id, limit, j.State, j.Reason)
		}
		return j, wall, fmt.Errorf("array %s: %w", id, err)
	}
	// Asked for by ID, the view carries what its leases held.
	if j, err = cl.Job(ctx, id); err != nil {
		return j, wall, fmt.Errorf("array %s: %w", id, err)
	}
	return j, wall, bench.WaitIdle(ctx, c, time.Minute)
}

func completed(j api.Job) int {
	if j.Tasks == nil {
		return 0
	}
	return j.Tasks.Completed
}
