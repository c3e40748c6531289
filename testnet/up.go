package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/e31network/e31/testnet/cluster"
	"github.com/spf13/cobra"
)

type upOptions struct {
	n         int
	gpus      int
	simGPUs   string
	dir       string
	heartbeat time.Duration
	metrics   bool
}

func defaultDir() string { return filepath.Join(os.TempDir(), "e31-testnet") }

func newUpCommand() *cobra.Command {
	var o upOptions
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start N e31d nodes on 127.0.0.1 and wait until they all see each other's offers",
		Long: `up builds e31d and e31 into DIR/bin, starts N daemons on 127.0.0.1 (node 0
is the bootstrap peer of the rest), each with simulated GPUs, waits until every
node sees every offer, and writes DIR/nodes.json: each node's peer ID,
addresses, API, network name and the e31d flags that join the network through
it (--network testnet --bootstrap ADDR). The nodes keep running after
up returns; stop them with "testnet down --dir DIR".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runUp(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.IntVarP(&o.n, "nodes", "n", 3, "number of nodes")
	f.IntVar(&o.gpus, "gpus", 2, "simulated H100 80GiB GPUs per node")
	f.StringVar(&o.simGPUs, "sim-gpus", "", `simulated GPUs per node as a spec ("2xA100:40GiB,1xL4:24GiB"); overrides --gpus`)
	f.StringVar(&o.dir, "dir", defaultDir(), "directory for the nodes' data, logs and nodes.json")
	f.DurationVar(&o.heartbeat, "heartbeat", time.Second, "offer heartbeat of every node")
	f.BoolVar(&o.metrics, "metrics", false, "serve each node's Prometheus metrics and Go profiles (/debug/pprof/) on a loopback port, listed in nodes.json")
	return cmd
}

func runUp(ctx context.Context, o upOptions) error {
	if o.n < 1 {
		return fmt.Errorf("-n %d: need at least one node", o.n)
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, cluster.NodesFile)); err == nil {
		if n, _ := cluster.StopDir(dir); n > 0 {
			fmt.Printf("stopped %d nodes of an earlier testnet in %s\n", n, dir)
		}
	}
	fmt.Printf("building e31d and e31 into %s\n", filepath.Join(dir, "bin"))
	bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{N: o.n, GPUs: o.gpus, SimGPUs: o.simGPUs, Dir: dir, Bin: bin, Heartbeat: o.heartbeat, Detach: true, Metrics: o.metrics})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.WaitConverged(wctx); err != nil {
		return err
	}
	fmt.Printf("%d nodes up, every view holds every offer (%.2fs)\n\n", o.n, time.Since(start).Seconds())
	for _, n := range c.Nodes {
		fmt.Printf("  %-6s %s  api %s  pid %d", n.Name, n.PeerID, n.API, n.PID)
		if n.Metrics != "" {
			fmt.Printf("  metrics %s", n.Metrics)
		}
		fmt.Println()
	}
	fmt.Printf("\nnodes: %s\n", filepath.Join(dir, cluster.NodesFile))
	fmt.Printf("join:  %s %s --data DIR   # network %q; without --network a daemon is on another\n",
		bin.E31d, c.Nodes[0].Join, c.Nodes[0].Network)
	fmt.Printf("try:   export E31_API=%s E31_API_TOKEN_FILE=%s\n       %s nodes\n", c.Nodes[0].API, c.Nodes[0].TokenFile, bin.E31)
	fmt.Printf("       %s ui   # a one-time link to node0's dashboard\n", bin.E31)
	fmt.Printf("stop:  go run ./testnet down --dir %s\n", dir)
	return nil
}
