package main

import (
	"context"
	"fmt"
	"io"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/testnet/bench/nat"
	"github.com/spf13/cobra"
)

type natBenchOptions struct {
	size int64
	keep bool
}

func newNATBenchCommand() *cobra.Command {
	var o natBenchOptions
	var size string
	cmd := &cobra.Command{
		Use:   "nat-bench",
		Short: "Measure leases and staging behind NAT, on an internet of network namespaces (needs root)",
		Long: `nat-bench builds e31d and e31 and runs real daemons on an internet of
network namespaces (testnet/netns): a bootstrap peer serving as a relay that
carries data on the public side, a submitter behind a dropping home router,
and a provider behind each kind of router in turn: dropping (the common
one, a hole punch gets through), rejecting (answers with resets and ICMP
errors), symmetric (a random port per connection) and filtering (admits
nothing but the relay). Then the same two daemons on 127.0.0.1, no NAT at
all, as the baseline.

Each time it submits a job staging an input of --size the moment both home
daemons have started, and prints the time from then to its lease, the data
path its status reported (direct, or relayed-data through the relay where
no hole opened) and the staging throughput: the staging phase of the job's
final receipt. It needs root, ip, nft and nsenter for the namespaces and
runc for the jobs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sz, err := market.ParseSize(size)
			if err != nil || sz <= 0 {
				return fmt.Errorf("--size %q: want a size such as 256MiB", size)
			}
			o.size = int64(sz)
			return runNATBench(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&size, "size", "256MiB", "size of the staged input")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the daemons' data dirs and logs, and print where")
	return cmd
}

func runNATBench(ctx context.Context, o natBenchOptions, stdout, stderr io.Writer) error {
	if err := nat.Check(); err != nil {
		return err
	}
	logf := progress(stderr)
	dir, done, err := workDir("", "e31-nat-bench-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	rep, err := nat.Run(ctx, dir, logf, nat.Options{Size: o.size})
	if err != nil {
		return err
	}
	return rep.WriteText(stdout)
}
