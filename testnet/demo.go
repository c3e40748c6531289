package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/e31network/e31/testnet/cluster"
	"github.com/spf13/cobra"
)

func newDemoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Start 3 nodes, show the network, and stop them",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runDemo(cmd.Context()) },
	}
}

func runDemo(ctx context.Context) error {
	began := time.Now()
	dir, err := os.MkdirTemp("", "e31-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	step := func(format string, args ...any) {
		fmt.Printf("[%5.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	step("building e31d and e31")
	bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	step("starting 3 nodes on 127.0.0.1 with 2 simulated H100s each")
	c, err := cluster.Start(ctx, cluster.Options{N: 3, GPUs: 2, Dir: dir, Bin: bin, Heartbeat: 500 * time.Millisecond})
	if err != nil {
		return err
	}
	defer c.Stop()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitConverged(wctx); err != nil {
		return err
	}
	step("every node sees every offer; e31 nodes on node0:")
	cmd := exec.CommandContext(ctx, bin.E31, "nodes")
	cmd.Env = append(os.Environ(), "E31_API="+c.Nodes[0].API)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("e31 nodes: %w", err)
	}
	step("stopping the testnet")
	c.Stop()
	step("done")
	return nil
}
