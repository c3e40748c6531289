package byzantine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// Options size a run.
type Options struct {
	// Honest is the number of honest providers, GPUs the simulated GPUs of
	// each provider.
	Honest, GPUs int
	// Jobs is the batch's one-GPU jobs; zero is one per GPU of the
	// byzantine network, so that every provider is assigned work.
	Jobs int
	// Run is how long each job runs.
	Run time.Duration
	// Misbehave adds one byzantine provider per entry, each an e31d
	// --misbehave list.
	Misbehave []string
	// Wait is how long a batch may take before the jobs still open count
	// as not completed.
	Wait time.Duration
}

// daemonArgs are the daemons' timings: every defence's bound derives from
// them (node/submitter, avoid.go).
func daemonArgs() []string {
	return []string{"--epoch", "250ms", "--proposal-ttl", "1500ms", "--receipt-interval", "1s", "--provider-lost-after", "3s", "--grace", "1s"}
}

// Batch is how one batch went.
type Batch struct {
	Submitted, Completed int
	// Makespan is from the first submission to the last release.
	Makespan time.Duration
	// Latency is, for each completed job, submission to release.
	Latency []time.Duration
	// Avoided counts, by provider, the jobs that ended up avoiding it.
	Avoided map[string]int
}

// Report is the two batches: on honest providers only, and with the
// byzantine ones.
type Report struct {
	Honest, Byzantine    int
	Clean, WithByzantine Batch
	// Names is the --misbehave list of each byzantine provider, by peer ID.
	Names map[string]string
}

// Run builds e31d, e31d with the byzantine tag and e31 into dir/bin and
// runs the batch twice in dir: on o.Honest providers, then on the same
// network with the byzantine providers added; log, if not nil, receives
// progress lines.
func Run(ctx context.Context, dir string, log func(format string, args ...any), o Options) (Report, error) {
	logf := bench.Env{Log: log}.Logf
	rep := Report{Honest: o.Honest, Byzantine: len(o.Misbehave)}
	bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return rep, err
	}
	if bin.E31dByzantine, err = cluster.BuildByzantine(ctx, filepath.Join(dir, "bin")); err != nil {
		return rep, err
	}
	jobs := o.Jobs
	if jobs == 0 {
		jobs = (o.Honest + len(o.Misbehave)) * o.GPUs
	}
	run := func(name string, byzantine []string) (Batch, map[string]string, error) {
		sim := []string{""}
		misbehave := make([]string, 1+o.Honest)
		for range o.Honest + len(byzantine) {
			sim = append(sim, fmt.Sprintf("%dxH100:80GiB", o.GPUs))
		}
		misbehave = append(misbehave, byzantine...)
		c, err := cluster.Start(ctx, cluster.Options{N: len(sim), SimGPUsByNode: sim, Misbehave: misbehave,
			Heartbeat: 500 * time.Millisecond, Args: daemonArgs(), Dir: filepath.Join(dir, name), Bin: bin})
		if err != nil {
			return Batch{}, nil, err
		}
		defer c.Stop()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = c.WaitConverged(wctx)
		cancel()
		if err != nil {
			return Batch{}, nil, err
		}
		names := map[string]string{}
		for i, m := range misbehave {
			if m != "" {
				names[c.Nodes[i].PeerID] = m
			}
		}
		logf("%s: %d providers, %d jobs", name, len(sim)-1, jobs)
		r, err := batch(ctx, c.Client(0), jobs, o.Run, o.Wait, logf)
		return r, names, err
	}
	if rep.Clean, _, err = run("clean", nil); err != nil {
		return rep, fmt.Errorf("clean run: %w", err)
	}
	if rep.WithByzantine, rep.Names, err = run("byzantine", o.Misbehave); err != nil {
		return rep, fmt.Errorf("byzantine run: %w", err)
	}
	return rep, nil
}

// WriteText prints the two batches as a table, the extra time the
// byzantine providers cost, and how many jobs avoided each of them.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "network\tproviders\tcompleted/submitted\tmakespan\tmean job\tslowest job\t")
	row := func(name string, providers int, b Batch) {
		fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%s\t%s\t%s\t\n", name, providers, b.Completed, b.Submitted,
			roundMs(b.Makespan), roundMs(meanOf(b.Latency)), roundMs(slices.Max(append([]time.Duration{0}, b.Latency...))))
	}
	row("honest only", r.Honest, r.Clean)
	row("with byzantine", r.Honest+r.Byzantine, r.WithByzantine)
	if err := tw.Flush(); err != nil {
		return err
	}
	clean, byz := r.Clean, r.WithByzantine
	fmt.Fprintf(w, "extra time with byzantine providers: makespan +%s, mean job +%s\n",
		roundMs(byz.Makespan-clean.Makespan), roundMs(meanOf(byz.Latency)-meanOf(clean.Latency)))
	for _, p := range slices.Sorted(maps.Keys(r.Names)) {
		if _, err := fmt.Fprintf(w, "%s provider %s: avoided by %d jobs\n", r.Names[p], market.ShortID(p), byz.Avoided[p]); err != nil {
			return err
		}
	}
	return nil
}

// batch submits n one-GPU jobs at once and waits until each is released
// or wait has passed; logf hears of the jobs that did not complete.
func batch(ctx context.Context, cl *api.Client, n int, run, wait time.Duration, logf func(string, ...any)) (Batch, error) {
	r := Batch{Submitted: n, Avoided: map[string]int{}}
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
			r.Avoided[p]++
		}
		if j.State != api.JobReleased || j.Outcome != string(ledger.OutcomeCompleted) {
			logf("job %s not completed: %s %s (%s)", id, j.State, j.Outcome, j.Reason)
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
		r.Completed++
		r.Latency = append(r.Latency, rel.Sub(sub))
		r.Makespan = max(r.Makespan, rel.Sub(start))
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

func roundMs(d time.Duration) string { return d.Round(time.Millisecond).String() }
