package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// byzantineBenchOptions are the flags of the byzantine-bench command.
type byzantineBenchOptions struct {
	honest    int
	gpus      int
	jobs      int
	run       time.Duration
	misbehave []string
	wait      time.Duration
	keep      bool
}

func (o *byzantineBenchOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&o.honest, "honest", 10, "honest providers")
	f.IntVar(&o.gpus, "gpus", 4, "simulated GPUs per provider")
	f.IntVar(&o.jobs, "jobs", 0, "one-GPU jobs in the batch (default: one per GPU of the byzantine network, so every provider is assigned work)")
	f.DurationVar(&o.run, "run", 6*time.Second, "how long each job runs")
	f.StringSliceVar(&o.misbehave, "misbehave", []string{"squat", "no-run", "silent", "withhold-receipt", "fake-model"}, "one byzantine provider per entry, each an e31d --misbehave list")
	f.DurationVar(&o.wait, "wait", 5*time.Minute, "how long a batch may take before the jobs still open count as not completed")
	f.BoolVar(&o.keep, "keep", false, "keep the networks' data dirs and logs")
}

// byzantineBenchArgs are the daemons' timings: every defence's bound derives
// from them (node/submitter, avoid.go).
var byzantineBenchArgs = []string{"--epoch", "250ms", "--proposal-ttl", "1500ms", "--receipt-interval", "1s", "--provider-lost-after", "3s", "--grace", "1s"}

func newByzantineBenchCommand() *cobra.Command {
	var o byzantineBenchOptions
	cmd := &cobra.Command{
		Use:   "byzantine-bench",
		Short: "Measure what byzantine providers cost honest jobs: jobs completed and extra time over a clean run",
		Long: `byzantine-bench runs the same batch of one-GPU jobs twice from one submitter:
on a network of honest providers only, then on the same network with one
more provider per --misbehave entry, each running an e31d built with the
byzantine tag. It prints, for each run, the jobs completed of those
submitted, the time from the first submission to the last release and the
mean and slowest job (submission to release), the extra time the byzantine
providers cost, and how many jobs ended up avoiding each of them. The
default timings are those of TestByzantineProviders (testnet/e2e).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runByzantineBench(cmd.Context(), o) },
	}
	o.AddFlags(cmd)
	return cmd
}

// byzantineRun is how one batch went.
type byzantineRun struct {
	submitted, completed int
	makespan             time.Duration
	latency              []time.Duration // completed jobs, submission to release
	avoided              map[string]int  // provider -> jobs avoiding it
}

func runByzantineBench(ctx context.Context, o byzantineBenchOptions) error {
	dir, done, err := workDir("", "e31-byzantine-bench-", o.keep, os.Stderr)
	if err != nil {
		return err
	}
	defer done()
	bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	if bin.E31dByzantine, err = cluster.BuildByzantine(ctx, filepath.Join(dir, "bin")); err != nil {
		return err
	}
	jobs := o.jobs
	if jobs == 0 {
		jobs = (o.honest + len(o.misbehave)) * o.gpus
	}
	run := func(name string, byzantine []string) (byzantineRun, map[string]string, error) {
		sim := []string{""}
		misbehave := make([]string, 1+o.honest)
		for range o.honest + len(byzantine) {
			sim = append(sim, fmt.Sprintf("%dxH100:80GiB", o.gpus))
		}
		misbehave = append(misbehave, byzantine...)
		c, err := cluster.Start(ctx, cluster.Options{N: len(sim), SimGPUsByNode: sim, Misbehave: misbehave,
			Heartbeat: 500 * time.Millisecond, Args: byzantineBenchArgs, Dir: filepath.Join(dir, name), Bin: bin})
		if err != nil {
			return byzantineRun{}, nil, err
		}
		defer c.Stop()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = c.WaitConverged(wctx)
		cancel()
		if err != nil {
			return byzantineRun{}, nil, err
		}
		names := map[string]string{}
		for i, m := range misbehave {
			if m != "" {
				names[c.Nodes[i].PeerID] = m
			}
		}
		fmt.Fprintf(os.Stderr, "%s: %d providers, %d jobs\n", name, len(sim)-1, jobs)
		r, err := byzantineBatch(ctx, c.Client(0), jobs, o.run, o.wait)
		return r, names, err
	}
	clean, _, err := run("clean", nil)
	if err != nil {
		return fmt.Errorf("clean run: %w", err)
	}
	byz, names, err := run("byzantine", o.misbehave)
	if err != nil {
		return fmt.Errorf("byzantine run: %w", err)
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "network\tproviders\tcompleted/submitted\tmakespan\tmean job\tslowest job\t")
	row := func(name string, providers int, r byzantineRun) {
		fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%s\t%s\t%s\t\n", name, providers, r.completed, r.submitted,
			roundMs(r.makespan), roundMs(meanOf(r.latency)), roundMs(slices.Max(append([]time.Duration{0}, r.latency...))))
	}
	row("honest only", o.honest, clean)
	row("with byzantine", o.honest+len(o.misbehave), byz)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("extra time with byzantine providers: makespan +%s, mean job +%s\n",
		roundMs(byz.makespan-clean.makespan), roundMs(meanOf(byz.latency)-meanOf(clean.latency)))
	for _, p := range slices.Sorted(maps.Keys(names)) {
		fmt.Printf("%s provider %s: avoided by %d jobs\n", names[p], market.ShortID(p), byz.avoided[p])
	}
	return nil
}

// byzantineBatch submits n one-GPU jobs at once and waits until each is
// released or wait has passed.
func byzantineBatch(ctx context.Context, cl *api.Client, n int, run, wait time.Duration) (byzantineRun, error) {
	r := byzantineRun{submitted: n, avoided: map[string]int{}}
	script := fmt.Sprintf("sleep %g; echo done > /out/result", run.Seconds())
	start := time.Now()
	var ids []string
	for i := range n {
		d := market.NewDeclaration(fmt.Sprintf("honest-%02d", i), []string{"sh", "-c", script}, 1, 5*market.Minute, nil)
		d.Request.Memory = 256 * market.MiB
		raw, err := json.Marshal(d)
		if err != nil {
			return r, err
		}
		j, err := cl.Submit(ctx, api.SubmitRequest{Declaration: raw}, nil)
		if err != nil {
			return r, fmt.Errorf("submit: %w", err)
		}
		ids = append(ids, j.ID)
	}
	deadline := start.Add(wait)
	for _, id := range ids {
		var j api.Job
		for {
			var err error
			if j, err = cl.Job(ctx, id); err == nil && j.State.Terminal() || time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return r, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		for _, p := range j.Avoid {
			r.avoided[p]++
		}
		if j.State != api.JobReleased || j.Outcome != string(ledger.OutcomeCompleted) {
			fmt.Fprintf(os.Stderr, "job %s not completed: %s %s (%s)\n", id, j.State, j.Outcome, j.Reason)
			continue
		}
		var sub, rel time.Time
		for _, s := range j.Steps {
			switch s.Step {
			case api.StepSubmit:
				sub = s.At
			case api.StepRelease:
				rel = s.At
			}
		}
		r.completed++
		r.latency = append(r.latency, rel.Sub(sub))
		r.makespan = max(r.makespan, rel.Sub(start))
	}
	return r, nil
}

func meanOf(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(len(ds), 1))
}
