package main

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/testnet/epochbench"
	"github.com/spf13/cobra"
)

// epochBenchOptions are the flags of the epoch-bench command.
type epochBenchOptions struct {
	latencies []time.Duration
	jobs      int
	seed      uint64
}

func (o *epochBenchOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationSliceVar(&o.latencies, "latency", []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond}, "one-way link latencies measured")
	f.IntVar(&o.jobs, "jobs", 100, "jobs declared per run, at random instants, 10 a second")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the declaration instants")
}

func newEpochBenchCommand() *cobra.Command {
	var o epochBenchOptions
	cmd := &cobra.Command{
		Use:   "epoch-bench",
		Short: "Count matching rounds lost to differing views at WAN latencies, before and after the adaptive epoch delay",
		Long: `epoch-bench starts, in this process, 4 providers and 2 submitters joined
pairwise through delay lines on 127.0.0.1 (every byte held for the one-way
latency), running gossipsub, the node's views and Match once a 1s epoch.
For each latency it declares the jobs three times: cutting views on arrival
with the fixed 150ms delay (the node before), on signing times with 150ms,
and on signing times with the adaptive delay (the node now). A round is lost
when the submitter's Match assigned its job to a provider and no provider
claimed it in that epoch. See testnet/epochbench/doc.go.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "latency\tjobs\tmode\tclaimed\trounds lost\tper 100 jobs\tdouble claims\tdelay mean\tdelay max\tdelay splits\t")
			for _, lat := range o.latencies {
				for _, m := range []epochbench.Mode{epochbench.Before, epochbench.SignedFixed, epochbench.Adaptive} {
					r, err := epochbench.Run(cmd.Context(), epochbench.Params{Latency: lat, Jobs: o.jobs, Mode: m, Seed: o.seed})
					if err != nil {
						return fmt.Errorf("%s, %s: %w", lat, m.Name, err)
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%.1f\t%d\t%s\t%s\t%d\t\n", lat, r.Jobs, m.Name, r.Claimed, r.Lost,
						100*float64(r.Lost)/float64(r.Jobs), r.Doubles, r.MeanDelay.Round(time.Millisecond), r.MaxDelay, r.DelaySplits)
					// The table aligns only once complete; say how far it got.
					fmt.Fprintf(os.Stderr, "%s, %s: %d rounds lost\n", lat, m.Name, r.Lost)
				}
			}
			return tw.Flush()
		},
	}
	o.AddFlags(cmd)
	return cmd
}
