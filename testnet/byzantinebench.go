package main

import (
	"context"
	"io"
	"time"

	"github.com/e31network/e31/testnet/bench/byzantine"
	"github.com/spf13/cobra"
)

// byzantineBenchOptions are the flags of the byzantine-bench command.
type byzantineBenchOptions struct {
	run  byzantine.Options
	keep bool
}

func (o *byzantineBenchOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&o.run.Honest, "honest", 10, "honest providers")
	f.IntVar(&o.run.GPUs, "gpus", 4, "simulated GPUs per provider")
	f.IntVar(&o.run.Jobs, "jobs", 0, "one-GPU jobs in the batch (default: one per GPU of the byzantine network, so every provider is assigned work)")
	f.DurationVar(&o.run.Run, "run", 6*time.Second, "how long each job runs")
	f.StringSliceVar(&o.run.Misbehave, "misbehave", []string{"squat", "no-run", "silent", "withhold-receipt", "fake-model"}, "one byzantine provider per entry, each an e31d --misbehave list")
	f.DurationVar(&o.run.Wait, "wait", 5*time.Minute, "how long a batch may take before the jobs still open count as not completed")
	f.BoolVar(&o.keep, "keep", false, "keep the networks' data dirs and logs")
}

func newByzantineBenchCommand() *cobra.Command {
	var o byzantineBenchOptions
	cmd := &cobra.Command{
		Use:   "byzantine-bench",
		Short: "Measure what byzantine providers cost honest jobs: jobs completed and extra time over a clean run",
		Long: `byzantine-bench runs the same batch of one-GPU jobs twice from one submitter:
on a network of honest providers only, then on the same network with one
more provider per --misbehave entry, each running an e31d built with the
byzantine tag. It prints, for each run, the jobs completed of those
submitted, the time from the first submission to the last release and the
mean and slowest job (submission to release), the extra time the byzantine
providers cost, and how many jobs ended up avoiding each of them. The
default timings are those of TestByzantineProviders (testnet/e2e).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runByzantineBench(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func runByzantineBench(ctx context.Context, o byzantineBenchOptions, stdout, stderr io.Writer) error {
	dir, done, err := workDir("", "e31-byzantine-bench-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	rep, err := byzantine.Run(ctx, dir, lines(stderr), o.run)
	if err != nil {
		return err
	}
	return rep.WriteText(stdout)
}
