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
		Long: `nat-bench builds e31d and e31 and runs real daemons three ways, one after
another:

  - hole-punched: the small internet of testnet/netns, a bootstrap peer
    serving as a relay on the public side, a submitter behind one NAT and a
    provider behind another;
  - relayed: the same, with the provider's router filtering everything but
    the bootstrap peer, so that no hole can be punched and the lease's
    control streams go through the relay;
  - loopback: the same two daemons on 127.0.0.1, no NAT at all.

For each it prints the time from the provider's start to its first lease (a
small job, submitted before the provider starts, waits for it), and, where a
direct path exists, the staging throughput of an input of --size: the
staging phase of the job's final receipt (fetch into the provider's store
and lay out on disk). A relayed path carries no data, so it has no
throughput figure. It needs root, ip, nft and nsenter for the namespaces and
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
