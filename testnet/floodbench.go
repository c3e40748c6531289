package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/bench/flood"
	"github.com/spf13/cobra"
)

type floodBenchOptions struct {
	flood flood.Options
	// mode is rate (honest jobs under a Sybil and an invalid-message
	// flood) or caps (a flood of the views' bounds); caps configures the
	// latter, unbounded runs it on views without bounds.
	mode      string
	caps      flood.CapsOptions
	unbounded bool
	json      bool
	keep      bool
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
quiet interval of the same length).

With --mode caps it measures instead what a flood of the views' bounds
costs (issue 51): --identities fresh identities, each declaring as much as
one submitter may hold in a view (--singles single jobs, some of the
largest size, and --tasks array tasks), re-announced round after round,
against --nodes daemons at e31d's own heartbeat, and --jobs honest jobs
submitted once the flood's first round is out. It prints each daemon's
resident memory at its peak (VmHWM), what its view held, what its bounds
refused and evicted, and how long the honest jobs took; --unbounded runs
the same on views without bounds (e31d --view-jobs 0 --view-bytes 0).`,
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
	f.StringVar(&o.mode, "mode", "rate", "rate: honest jobs under a Sybil and an invalid-message flood; caps: a flood of the views' bounds")
	f.IntVar(&o.caps.Hoard.Identities, "identities", 20, "with --mode caps, the fresh identities that flood")
	f.IntVar(&o.caps.Hoard.Singles, "singles", 10_000, "with --mode caps, the single jobs each identity declares")
	f.IntVar(&o.caps.Hoard.Tasks, "tasks", 100_000, "with --mode caps, the array tasks each identity declares")
	f.Float64Var(&o.caps.Hoard.Rate, "hoard-rate", 90, "with --mode caps, the flood's requeue messages a second")
	f.IntVar(&o.caps.MinRounds, "rounds", 1, "with --mode caps, the fewest rounds of the flood (declarations, then re-announcements) measured")
	f.BoolVar(&o.unbounded, "unbounded", false, "with --mode caps, run the daemons' views without bounds")
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
	switch o.mode {
	case "rate":
	case "caps":
		return runCapsBench(ctx, dir, logf, o, stdout)
	default:
		return fmt.Errorf("--mode %q: want rate or caps", o.mode)
	}
	r, err := flood.Run(ctx, dir, logf, o.flood)
	if err != nil {
		return err
	}
	return printReport(stdout, o.json, r, r.WriteText)
}

// runCapsBench is flood-bench --mode caps.
func runCapsBench(ctx context.Context, dir string, logf func(string, ...any), o floodBenchOptions, stdout io.Writer) error {
	c := o.caps
	c.Nodes, c.GPUs, c.Jobs = o.flood.Nodes, o.flood.GPUs, o.flood.Jobs
	c.Unbounded = o.unbounded
	r, err := flood.RunCaps(ctx, dir, logf, c)
	if err != nil {
		_ = r.WriteText(stdout)
		return err
	}
	return printReport(stdout, o.json, r, r.WriteText)
}
