package main

import (
	"context"
	"io"
	"time"

	"github.com/e31network/e31/testnet/bench/verify"
	"github.com/spf13/cobra"
)

// verifyBenchOptions are the flags of the verify-bench command.
type verifyBenchOptions struct {
	run    verify.Options
	asJSON bool
	keep   bool
}

func (o *verifyBenchOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&o.run.Honest, "honest", 4, "honest providers")
	f.IntVar(&o.run.GPUs, "gpus", 4, "simulated H100s per honest provider")
	f.IntVar(&o.run.LiarGPUs, "liar-gpus", 2, "simulated L4s of the no-work provider")
	f.IntVar(&o.run.Tasks, "tasks", 1000, "tasks of each cost array (none, spot, replicas)")
	f.DurationVar(&o.run.TaskRun, "task-run", 200*time.Millisecond, "how long each task sleeps after writing its index")
	f.Float64Var(&o.run.CostSpot, "spot", 0.05, "spot rate of the cost part's checked array")
	f.Float64SliceVar(&o.run.Rates, "rates", []float64{0.02, 0.05, 0.1}, "spot rates of the catch part, one array (and one submitter) each")
	f.IntVar(&o.run.CatchTasks, "catch-tasks", 200, "tasks of each catch array")
	f.IntVar(&o.run.Trials, "trials", 10_000, "trials of the model's draws for each rate and k")
	f.IntSliceVar(&o.run.Ks, "k", []int{10, 50, 200}, "a liar's tasks in the model's draws")
	f.Uint64Var(&o.run.Seed, "seed", 1, "seed of the model's draws")
	f.DurationVar(&o.run.Wait, "wait", 10*time.Minute, "how long each array may take from submit to release before the run fails")
	f.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&o.keep, "keep", false, "keep the network's data dirs and logs")
}

func newVerifyBenchCommand() *cobra.Command {
	var o verifyBenchOptions
	cmd := &cobra.Command{
		Use:   "verify-bench",
		Short: "Measure what checking results costs, and how often spot checks catch a liar against the binomial model",
		Long: `verify-bench starts one testnet: a submitter per catch rate, honest
providers with simulated H100s, and one provider with simulated L4s that
runs an e31d built with the byzantine tag and returns empty outputs
without running anything (--misbehave no-work).

Cost: the same array (--tasks tasks, each writing its index and sleeping
--task-run) is submitted with no verification, with verify.spot (--spot)
and with verify.replicas: 2, asking for H100s so that only honest
providers run it; for each, the time from submit to the array's release
(which waits for its checks) and the GPU-hours its leases held, the
checks' share among them, each beside the unverified array's. Replicas on
an array are printed "not measured" where this version refuses them.

Catch: an array of --catch-tasks tasks at each of --rates, each from its
own submitter, on any GPU model: k (the tasks the liar returned), the
checks drawn on them, whether it was caught, and the binomial model's s·k
and 1-(1-s)^k beside them; the checks of other tasks the liar ran count
apart (they catch it too).

Model: --trials seeded draws of k tasks (each --k) at each rate, the share
of trials that caught the liar beside 1-(1-s)^k.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVerifyBench(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func runVerifyBench(ctx context.Context, o verifyBenchOptions, stdout, stderr io.Writer) error {
	dir, done, err := workDir("", "e31-verify-bench-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	rep, err := verify.Run(ctx, dir, progress(stderr), o.run)
	if err != nil {
		return err
	}
	return printReport(stdout, o.asJSON, rep, rep.WriteText)
}
