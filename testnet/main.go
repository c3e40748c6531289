// Command testnet runs a local E31 network of real e31d processes on
// 127.0.0.1, for development and demonstrations.
//
//	go run ./testnet up -n 5 --gpus 2 --dir /tmp/e31net
//	go run ./testnet down --dir /tmp/e31net
//	go run ./testnet demo
//	go run ./testnet measure
//	go run ./testnet image-bench --size 256MiB
//	go run ./testnet epoch-bench
//	sudo go run ./testnet nat-bench
//	go run ./testnet bench --only idle,throughput --profile /tmp/prof
//	go run ./testnet byzantine-bench
//	go run ./testnet gravity-bench --dataset-mib 64
//	go run ./testnet verify-bench --tasks 1000
//
// Each benchmark is a package of its own: bench is testnet/bench/speed,
// measure is testnet/bench/measure and <name>-bench is testnet/bench/<name>;
// testnet/bench itself is the kit they share. A command here parses its
// flags, makes the work dir and calls the package.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "testnet",
		Short:         "Run a local E31 network on 127.0.0.1",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newUpCommand(), newDownCommand(), newDemoCommand(), newMeasureCommand(), newImageBenchCommand(), newNATBenchCommand(), newEpochBenchCommand(), newBenchCommand(), newFloodBenchCommand(), newByzantineBenchCommand(), newGravityBenchCommand(), newScaleBenchCommand(), newRogueBenchCommand(), newVerifyBenchCommand())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "testnet:", err)
		os.Exit(1)
	}
}
