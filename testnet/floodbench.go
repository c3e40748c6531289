package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/bench/flood"
	"github.com/spf13/cobra"
)

type floodBenchOptions struct {
	flood flood.Options
	json  bool
	keep  bool
}

func newFloodBenchCommand() *cobra.Command {
	var o floodBenchOptions
	cmd := &cobra.Command{
		Use:   "flood-bench",
		Short: "Measure what a Sybil and an invalid-message flood cost honest daemons (needs root and runc)",
		Long: `flood-bench builds e31d and e31, starts --nodes honest daemons on
127.0.0.1, and runs --jobs honest jobs twice: once on a quiet network, and
once while two flooding peers (testnet/byzantine/flood) run, one publishing
valid declarations from fresh identities (Sybil), one mixing those with
invalid and oversized messages. It prints the figures of issue 16: honest
jobs completed and how much longer they took, how many of each flooder's
messages spread (an observer connected only to the daemons counts them),
whether the mixed flooder was graylisted, and the CPU the honest daemons
spent on the flood (their /proc/PID/stat CPU over the flood less that of a
quiet interval of the same length).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFloodBench(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.flood.Nodes, "nodes", 4, "honest daemons, each a provider")
	f.IntVar(&o.flood.GPUs, "gpus", 2, "simulated GPUs per daemon")
	f.IntVar(&o.flood.Jobs, "jobs", 8, "honest jobs in each phase")
	f.DurationVar(&o.flood.Window, "window", 30*time.Second, "least length of each phase")
	f.Float64Var(&o.flood.SybilRate, "sybil-rate", 400, "Sybil declarations a second")
	f.Float64Var(&o.flood.MixedRate, "mixed-rate", 100, "mixed flooder's messages a second")
	f.BoolVar(&o.json, "json", false, "print the report as JSON")
	f.BoolVar(&o.keep, "keep", false, "keep the daemons' data dirs and logs, and print where")
	return cmd
}

func runFloodBench(ctx context.Context, o floodBenchOptions, stdout, stderr io.Writer) error {
	logf := progress(stderr)
	if os.Geteuid() != 0 {
		return bench.ErrNeedsRoot
	}
	dir, done, err := workDir("", "e31-flood-bench-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	r, err := flood.Run(ctx, dir, logf, o.flood)
	if err != nil {
		return err
	}
	if o.json {
		return jsonOut(stdout, r)
	}
	return r.WriteText(stdout)
}
