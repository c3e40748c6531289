package main

import (
	"fmt"

	"github.com/e31network/e31/testnet/cluster"
	"github.com/spf13/cobra"
)

func newDownCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the nodes of a testnet started with up, and sweep what a killed node left: its job's sandbox and disk",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := cluster.StopDir(dir)
			if err != nil {
				return err
			}
			fmt.Printf("stopped %d nodes\n", n)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultDir(), "directory given to up")
	return cmd
}
