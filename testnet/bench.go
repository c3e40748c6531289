package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/e31network/e31/testnet/bench/speed"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/spf13/cobra"
)

// benchOptions are the flags of the bench command.
type benchOptions struct {
	only       []string
	json       bool
	markdown   bool
	keep       bool
	profileDir string
	profileFor time.Duration
	run        speed.Options
}

func (o *benchOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringSliceVar(&o.only, "only", nil, "parts to run, comma-separated: micro (= match,receipts,staging), "+strings.Join(speed.Parts(), ", ")+" (default all but array)")
	f.BoolVar(&o.json, "json", false, "print every figure and the raw measurements as one JSON object")
	f.BoolVar(&o.markdown, "markdown", false, "print the table as markdown, for the figures table in docs/figures.md")
	f.BoolVar(&o.keep, "keep", false, "keep the work dir (nodes' data dirs and logs) and print where")
	f.StringVar(&o.profileDir, "profile", "", "take a CPU profile of every daemon during the throughput load into this dir, and print the CPU per job by phase")
	f.DurationVar(&o.profileFor, "profile-seconds", 20*time.Second, "length of the CPU profiles")
	f.IntVar(&o.run.IdleNodes, "idle-nodes", 5, "nodes of the idle network (2 GPUs each)")
	f.IntVar(&o.run.IdleJobs, "idle-jobs", 30, "jobs run one at a time on the idle network")
	f.IntVar(&o.run.Throughput.Nodes, "nodes", 10, "nodes of the throughput network (4 GPUs each)")
	f.IntVar(&o.run.Throughput.Submitters, "submitters", 10, "concurrent submitters of the throughput run, one per node")
	f.IntVar(&o.run.Throughput.Jobs, "jobs", 200, "jobs of the throughput run")
	f.BoolVar(&o.run.Throughput.Burst, "burst", false, "throughput run: submit every job at once instead of each submitter's next when its last has ended")
	f.IntVar(&o.run.RSS.Jobs, "rss-jobs", 2000, "jobs submitted at once through one submitter and 3 providers x 4 GPUs (the issue's figure is 10000)")
	f.IntVar(&o.run.RSS.ShortJobs, "short-jobs", 200, "jobs run 10 at a time first, the deep queue's baseline")
	f.StringVar(&o.run.RSS.ProfileDir, "rss-profile", "", "save a heap profile of every daemon of the memory run, idle and after, into this dir")
	f.StringVar(&o.run.RSS.CPUProfileDir, "rss-cpu-profile", "", "take a CPU profile of every daemon of the memory run in the short queue and in the deep queue into this dir, and print the CPU per job by phase of each")
	f.DurationVar(&o.run.RSS.IdleFor, "idle-for", 5*time.Second, "how long the memory network idles before its idle RSS is read")
	f.IntVar(&o.run.Array.Nodes, "array-nodes", 10, "nodes of the array run (4 GPUs each)")
	f.IntVar(&o.run.Array.Tasks, "array-tasks", 10_000, "tasks of the array run's one array")
	f.IntVar(&o.run.Array.Singles, "array-singles", 0, "single jobs of the array run's baseline (default as many as --array-tasks)")
	f.IntVar(&o.run.SandboxRuns, "sandbox-runs", 40, "bare runc runs that measure the sandbox-bound limit")
	f.IntVar(&o.run.Micro.StagingMiB, "staging-mib", 1024, "MiB staged by content's benchmark")
	f.IntVar(&o.run.Micro.StagingRuns, "staging-runs", 3, "times the raw stream and the bulk path are each measured, one after the other; the figure is the run with the median ratio")
	f.IntVar(&o.run.Micro.MatchRuns, "match-runs", 10, "passes of market's Match benchmark")
}

func newBenchCommand() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure every figure of the speed goals against its in-run baseline, and print the table",
		Long: `bench measures the figures of the speed goals (issue 12) on this machine and
prints each beside the baseline measured in the same run, the ratio, the goal
and whether it is met:

  match       market's BenchmarkMatch, 10k providers x 100k jobs, -cpu 1
  receipts    ledger's BenchmarkAppend and BenchmarkVerify, -cpu 2, beside
              the Ed25519 work alone
  staging     content's BenchmarkStaging (--staging-mib): bulk path against
              a raw libp2p stream to /dev/null
  idle        5 idle nodes, 30 trivial jobs one at a time: submit -> signed
              lease, submit -> released
  throughput  200 trivial sandboxed jobs from 10 submitters on 10 nodes x 4
              GPUs, each submitter's next job submitted when its last has
              ended (--burst: all at once), against the sandbox-bound
              limit: cores / CPU-seconds of
              one bare runc run of the same job's bundle; with --profile, a
              CPU profile of every daemon and the CPU one job costs by phase
  rss         e31d memory idle and after --rss-jobs jobs through one
              submitter and 3 providers x 4 GPUs, and the throughput of that
              deep queue against 10 jobs at a time

The daemon figures run real e31d processes on 127.0.0.1 and real runc
sandboxes, so they need root and runc; the micro figures need neither
(--only micro). Trivial jobs run "true" on the host's system directories.
Figures depend on the machine's load; the load average is printed with them.
--markdown prints the table for docs/figures.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func runBench(ctx context.Context, o benchOptions, stdout, stderr io.Writer) error {
	if o.json && o.markdown {
		return fmt.Errorf("--json and --markdown: choose one")
	}
	root, err := cluster.ModuleRoot()
	if err != nil {
		return err
	}
	logf := progress(stderr)
	dir, done, err := workDir("", "e31-bench-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	o.run.Only, o.run.ModuleRoot = o.only, root
	if o.profileDir != "" {
		if o.run.Throughput.ProfileDir, err = filepath.Abs(o.profileDir); err != nil {
			return err
		}
		o.run.Throughput.ProfileFor = o.profileFor
	}
	if o.run.RSS.ProfileDir != "" {
		if o.run.RSS.ProfileDir, err = filepath.Abs(o.run.RSS.ProfileDir); err != nil {
			return err
		}
	}
	rep, err := speed.Run(ctx, dir, logf, o.run)
	if err != nil {
		return err
	}
	switch {
	case o.json:
		return jsonOut(stdout, rep)
	case o.markdown:
		return rep.Table.WriteMarkdown(stdout)
	}
	return rep.Table.WriteTextSummary(stdout)
}
