package main

import (
	"context"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"slices"
	"time"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/bench/gravity"
	"github.com/spf13/cobra"
)

// gravityBenchOptions are the flags of the gravity-bench command.
type gravityBenchOptions struct {
	datasetMiB  int64
	jobs        int
	providers   int
	gpus        int
	over        time.Duration
	run         time.Duration
	uploadLimit string
	dir         string
	json        bool
	keep        bool
	configs     []string
}

func (o *gravityBenchOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Int64Var(&o.datasetMiB, "dataset-mib", 2048, "size of the dataset every job reads, in MiB")
	f.IntVar(&o.jobs, "jobs", 20, "one-GPU jobs submitted")
	f.IntVar(&o.providers, "providers", 5, "providers")
	f.IntVar(&o.gpus, "gpus", 4, "simulated GPUs per provider")
	f.DurationVar(&o.over, "over", time.Minute, "span the jobs are submitted over, evenly")
	f.DurationVar(&o.run, "run", 30*time.Second, "how long each job runs once staged")
	f.StringVar(&o.uploadLimit, "upload-limit", "100MiB/s", "the submitter's --upload-limit")
	f.StringVar(&o.dir, "dir", "", "work folder (default: the system's temp folder); needs about providers × jobs-per-provider × dataset of disk")
	f.BoolVar(&o.json, "json", false, "print the figures as one JSON object")
	f.BoolVar(&o.keep, "keep", false, "keep the work folder, with every node's folder and log, and print where")
	f.StringSliceVar(&o.configs, "configs", nil, "configurations to run, comma-separated: baseline, full, full+wait (default all)")
}

func newGravityBenchCommand() *cobra.Command {
	var o gravityBenchOptions
	cmd := &cobra.Command{
		Use:   "gravity-bench",
		Short: "Measure what moving one dataset to many jobs costs, with and without many sources and staging before the lease",
		Long: `gravity-bench starts, for each configuration in turn, a fresh network of real
e31d processes on 127.0.0.1: one submitter whose content uploads are capped
(--upload-limit) and --providers providers of --gpus simulated GPUs. The
submitter submits --jobs one-GPU jobs (sleep --run, in a runc sandbox) that
all read the same dataset of --dataset-mib, evenly over --over. It reports
the bytes the submitter sent (in datasets), the bytes all providers fetched
(against dataset × providers used) and the median time from rent to run,
from the jobs' own step times.

Configurations: baseline (each data-gravity feature off by its flag), full
(the defaults) and full+wait (jobs may wait a minute for a provider that
holds their data: --locality-wait 1m). It needs root and runc.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGravityBench(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func runGravityBench(ctx context.Context, o gravityBenchOptions, stdout, stderr io.Writer) error {
	if o.datasetMiB < 1 || o.jobs < 1 || o.providers < 1 || o.gpus < 1 {
		return fmt.Errorf("--dataset-mib, --jobs, --providers and --gpus must be at least 1")
	}
	for _, name := range o.configs {
		if !slices.ContainsFunc(gravity.Configs(), func(c gravity.Config) bool { return c.Name == name }) {
			return fmt.Errorf("--configs: no configuration %q (baseline, full, full+wait)", name)
		}
	}
	if _, err := osexec.LookPath("runc"); os.Geteuid() != 0 || err != nil {
		return bench.ErrNeedsRoot
	}
	logf := progress(stderr)
	dir, done, err := workDir(o.dir, "e31-gravity-bench-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	rep, err := gravity.Run(ctx, dir, logf, gravity.Options{
		DatasetBytes: o.datasetMiB << 20, Jobs: o.jobs, Providers: o.providers, GPUs: o.gpus,
		Over: o.over, Run: o.run, UploadLimit: o.uploadLimit, Configs: o.configs, Keep: o.keep,
	})
	if err != nil {
		return err
	}
	return printReport(stdout, o.json, rep, rep.WriteText)
}
