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
	seeds     int
	every     bool
	epoch     time.Duration
}

func (o *epochBenchOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationSliceVar(&o.latencies, "latency", []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond}, "one-way link latencies measured")
	f.IntVar(&o.jobs, "jobs", 300, "jobs declared per run, at random instants, 20 a second")
	f.IntVar(&o.seeds, "seeds", 3, "runs per latency and mode, each with its own declaration instants; the table shows their mean")
	f.BoolVar(&o.every, "every-mode", false, "also measure the signed cut with fixed 150ms and 300ms delays")
	f.DurationVar(&o.epoch, "epoch", time.Second, "epoch length, as e31d --epoch")
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
timers fired. See testnet/epochbench/doc.go.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			modes := []epochbench.Mode{epochbench.Before, epochbench.Adaptive}
			if o.every {
				modes = []epochbench.Mode{epochbench.Before, epochbench.SignedFixed, epochbench.Signed300, epochbench.Adaptive}
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "latency\tmode\tjobs\tlost/100 jobs\t(min–max)\tsplit/busy/stale\tdeclined/100\tsplit views\tdelay mean\tdelay max\tto lease\tgossip p50\tgossip p99\ttimer lag p99\t")
			for _, lat := range o.latencies {
				// Seeds outermost, modes within: the machine's load drifts
				// over minutes, and alternating spreads it over the modes.
				runs := make([][]epochbench.Result, len(modes))
				for s := range o.seeds {
					for i, m := range modes {
						r, err := epochbench.Run(cmd.Context(), epochbench.Params{Latency: lat, Jobs: o.jobs, Epoch: o.epoch, Mode: m, Seed: uint64(s + 1)})
						if err != nil {
							return fmt.Errorf("%s, %s: %w", lat, m.Name, err)
						}
						// The table aligns only once complete; say how far it got.
						fmt.Fprintf(os.Stderr, "%s, %s, seed %d: %d rounds lost of %d jobs\n", lat, m.Name, s+1, r.Lost, r.Jobs)
						runs[i] = append(runs[i], r)
					}
				}
				for i, m := range modes {
					s := epochbench.Summarise(runs[i])
					fmt.Fprintf(tw, "%s\t%s\t%d×%d\t%.1f\t%.0f–%.0f\t%d/%d/%d\t%.1f\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
						lat, m.Name, o.jobs, len(runs[i]), s.LostPer100, s.LostPer100Min, s.LostPer100Max,
						s.LostSplit, s.LostBusy, s.LostStale, s.DeclinedPer100, s.SplitViews, s.BusyEpochs,
						roundMs(s.MeanDelay), roundMs(s.MaxDelay), roundMs(s.ToLeaseMean), roundMs(s.GossipP50), roundMs(s.GossipP99), roundMs(s.LagP99))
				}
			}
			return tw.Flush()
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func roundMs(d time.Duration) string { return d.Round(time.Millisecond).String() }
