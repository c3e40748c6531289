package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/e31network/e31/testnet/bench/measure"
	"github.com/spf13/cobra"
)

// measureOptions are the flags of the measure command.
type measureOptions struct {
	run  measure.Options
	json bool
	keep bool
}

func (o *measureOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVarP(&o.run.Nodes, "nodes", "n", 20, "nodes of the gossip network (2 GPUs each, heartbeat 500ms)")
	f.IntVar(&o.run.JobNodes, "job-nodes", 10, "nodes of the job network (4 GPUs each, heartbeat 1s)")
	f.IntVar(&o.run.Jobs, "jobs", 50, "jobs submitted, one after another, per epoch length")
	f.DurationVar(&o.run.Sample, "sample", 20*time.Second, "how long every node's view is sampled for gossip latency")
	f.BoolVar(&o.json, "json", false, "print the figures as one JSON object")
	f.BoolVar(&o.keep, "keep", false, "keep the nodes' data dirs and logs, and print where")
}

func newMeasureCommand() *cobra.Command {
	var o measureOptions
	cmd := &cobra.Command{
		Use:   "measure",
		Short: "Start testnets, measure convergence, gossip latency, memory and job latencies, and stop them",
		Long: `measure builds e31d and e31 into a temporary directory and starts real
testnets on 127.0.0.1, one after another, stopping each before the next:

  - N nodes (-n, default 20) with 2 simulated GPUs and a 500ms heartbeat:
    the time from the first process start until every node sees every
    offer; each daemon's resident memory after 5s idle; and, from sampling
    every node's view of offers, how long gossip takes to bring an offer to
    each node and to the last of them.
  - 10 nodes with 4 simulated GPUs and a 1s heartbeat, once with the default
    epoch and once with --epoch 250ms: small jobs submitted one after
    another, round-robin over the nodes, each after a random pause under
    1s so that submits fall anywhere in an epoch; the time from submit to
    the signed lease, and from the release step until a node other than
    the provider sees the GPU free again.

The figures depend on the load of the machine; the load average is printed
with them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMeasure(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func runMeasure(ctx context.Context, o measureOptions, stdout, stderr io.Writer) error {
	if o.run.Nodes < 2 || o.run.JobNodes < 2 {
		return fmt.Errorf("-n %d, --job-nodes %d: each network needs at least 2 nodes", o.run.Nodes, o.run.JobNodes)
	}
	if o.run.Jobs < 1 {
		return fmt.Errorf("--jobs %d: need at least one job", o.run.Jobs)
	}
	logf := progress(stderr)
	dir, done, err := workDir("", "e31-measure-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	rep, err := measure.Run(ctx, dir, logf, o.run)
	if err != nil {
		return err
	}
	return printReport(stdout, o.json, rep, rep.WriteText)
}
