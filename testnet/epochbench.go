package main

import (
	"time"

	"github.com/e31network/e31/testnet/bench/epoch"
	"github.com/spf13/cobra"
)

// epochBenchOptions are the flags of the epoch-bench command.
type epochBenchOptions struct {
	run epoch.Options
}

func (o *epochBenchOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationSliceVar(&o.run.Latencies, "latency", []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond}, "one-way link latencies measured")
	f.IntVar(&o.run.Jobs, "jobs", 300, "jobs declared per run, at random instants, 20 a second")
	f.IntVar(&o.run.Seeds, "seeds", 3, "runs per latency and mode, each with its own declaration instants; the table shows their mean")
	f.BoolVar(&o.run.EveryMode, "every-mode", false, "also measure the signed cut with fixed 150ms and 300ms delays")
	f.DurationVar(&o.run.Epoch, "epoch", time.Second, "epoch length, as e31d --epoch")
}

func newEpochBenchCommand() *cobra.Command {
	var o epochBenchOptions
	cmd := &cobra.Command{
		Use:   "epoch-bench",
		Short: "Count matching rounds lost to differing views at WAN latencies, before and after the adaptive epoch delay",
		Long: `epoch-bench starts, in this process, 4 providers and 2 submitters joined
pairwise through delay lines on 127.0.0.1 (every byte held for the one-way
latency), running gossipsub, the node's views and Match once a 1s epoch;
providers claim what their Match gives them by a proposal the submitter
accepts once per job, then announce the lease. For each latency it runs the
node before (views cut on arrival, fixed 150ms delay) and after (cut on
signing times, delay adapted to the announced gossip delays), each with
several seeds. A round is lost when the submitter's Match assigned its job
to a provider and no proposal of that epoch (or before) leased it. Real
gossip delays include this machine's load: the last column shows how late
timers fired. See testnet/bench/epoch/doc.go.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := epoch.Compare(cmd.Context(), o.run, lines(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			return rep.WriteText(cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd)
	return cmd
}
