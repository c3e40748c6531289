package gravity

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// Goals of the data gravity figures (issue 14).
const (
	goalSubmitterSends = 1.2 // × the dataset, in all
	goalTotalMoved     = 1.2 // × the dataset × providers used
	goalRentToRun      = 0.2 // full configuration's median over the baseline's
)

// Config is one configuration of the network that the gravity
// bench runs the same workload on: the e31d flags every node gets.
type Config struct {
	Name string
	Args []string
}

// Configs are the configurations measured, the baseline first. The
// baseline turns off each data-gravity feature by its flag: one line here
// per feature.
func Configs() []Config {
	return []Config{
		{Name: "baseline", Args: []string{
			"--single-source", // staging from the submitter alone
			"--no-prestage",   // no fetch before the lease
			"--no-locality",   // Match ignores what providers hold
		}},
		{Name: "full", Args: nil},
		// Delay scheduling: a job may wait up to a minute for a provider that
		// holds its data rather than take one that must fetch it.
		{Name: "full+wait", Args: []string{"--locality-wait", "1m"}},
	}
}

// Options size the gravity run.
type Options struct {
	DatasetBytes int64
	Jobs         int
	Providers    int
	GPUs         int // per provider
	// Over is the span the jobs are submitted over, evenly.
	Over time.Duration
	// Run is how long each job runs (sleep), after staging.
	Run time.Duration
	// UploadLimit is the submitter's --upload-limit.
	UploadLimit string
	// DataDir holds the generated dataset (default: Env.Dir).
	DataDir string
	// Configs names the configurations to run (default: all of
	// Configs); the baseline is the ratios' denominator.
	Configs []string
	// Keep keeps each configuration's nodes' folders and logs.
	Keep bool
}

// ConfigRun is one configuration's figures.
type ConfigRun struct {
	Config         string       `json:"config"`
	Args           []string     `json:"args"`
	SubmitterSent  int64        `json:"submitter_sent_bytes"`
	TotalMoved     int64        `json:"total_moved_bytes"`
	FromProviders  int64        `json:"from_providers_bytes"`
	Prestaged      int64        `json:"prestaged_bytes"`
	ProvidersUsed  int          `json:"providers_used"`
	RentToRunMs    bench.Spread `json:"rent_to_run_ms"`
	SubmitToRunMs  bench.Spread `json:"submit_to_run_ms"`
	Completed      int          `json:"completed"`
	DurationS      float64      `json:"duration_s"`
	DatasetRoot    string       `json:"dataset_root"`
	FailedOutcomes []string     `json:"failed_outcomes,omitempty"`
}

// Report is the gravity run's figures, one run per configuration.
type Report struct {
	DatasetBytes int64       `json:"dataset_bytes"`
	Jobs         int         `json:"jobs"`
	Providers    int         `json:"providers"`
	GPUs         int         `json:"gpus_per_provider"`
	OverS        float64     `json:"over_s"`
	UploadLimit  string      `json:"upload_limit"`
	Runs         []ConfigRun `json:"runs"`

	// over and the load averages around the run are for WriteText.
	over               time.Duration
	loadStart, loadEnd string
}

// Run builds e31d and e31 into dir/bin and runs Measure on them, in dir;
// log, if not nil, receives progress lines.
func Run(ctx context.Context, dir string, log func(format string, args ...any), o Options) (Report, error) {
	e := bench.Env{Dir: dir, Log: log}
	e.Logf("building e31d and e31")
	bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return Report{}, err
	}
	e.Bin = bin
	load0 := bench.LoadAvg()
	r, err := Measure(ctx, e, o)
	r.loadStart, r.loadEnd = load0, bench.LoadAvg()
	return r, err
}

// Measure runs, for each of Configs, a fresh network of one
// submitter (with o.UploadLimit) and o.Providers providers of o.GPUs GPUs,
// and submits o.Jobs one-GPU jobs that all read the same dataset, evenly
// over o.Over; it reports what the submitter sent, what all the providers
// fetched, and the jobs' rent→run times.
func Measure(ctx context.Context, e bench.Env, o Options) (Report, error) {
	r := Report{DatasetBytes: o.DatasetBytes, Jobs: o.Jobs, Providers: o.Providers, GPUs: o.GPUs,
		OverS: o.Over.Seconds(), UploadLimit: o.UploadLimit, over: o.Over}
	dataDir := o.DataDir
	if dataDir == "" {
		dataDir = e.Dir
	}
	dataset := filepath.Join(dataDir, "dataset")
	e.Logf("gravity: writing a dataset of %d MiB", o.DatasetBytes>>20)
	if err := writeDataset(dataset, o.DatasetBytes); err != nil {
		return r, err
	}
	defer os.RemoveAll(dataset)
	for _, cfg := range Configs() {
		if len(o.Configs) > 0 && !slices.Contains(o.Configs, cfg.Name) {
			continue
		}
		run, err := measureConfig(ctx, e, o, cfg, dataset)
		if err != nil {
			return r, fmt.Errorf("%s: %w", cfg.Name, err)
		}
		r.Runs = append(r.Runs, run)
	}
	return r, nil
}

// writeDataset writes n pseudo-random (incompressible) bytes under dir, in
// files of at most 256 MiB.
func writeDataset(dir string, n int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r := rand.NewChaCha8([32]byte{14})
	for i := 0; n > 0; i++ {
		size := min(n, 256<<20)
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%03d", i)))
		if err != nil {
			return err
		}
		_, err = io.CopyN(f, r, size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		n -= size
	}
	return nil
}

func measureConfig(ctx context.Context, e bench.Env, o Options, cfg Config, dataset string) (ConfigRun, error) {
	run := ConfigRun{Config: cfg.Name, Args: cfg.Args}
	e.Logf("gravity %s: 1 submitter (upload limit %s) + %d providers x %d GPUs, flags %v", cfg.Name, o.UploadLimit, o.Providers, o.GPUs, cfg.Args)
	byNode := make([]string, o.Providers+1)
	for i := 1; i <= o.Providers; i++ {
		byNode[i] = fmt.Sprintf("%dxH100:80GiB", o.GPUs)
	}
	argsByNode := [][]string{{"--upload-limit", o.UploadLimit}}
	c, err := bench.StartNetwork(ctx, cluster.Options{N: o.Providers + 1, SimGPUsByNode: byNode, Dir: filepath.Join(e.Dir, "gravity-"+cfg.Name),
		Bin: e.Bin, Heartbeat: time.Second, Metrics: true, Args: cfg.Args, ArgsByNode: argsByNode})
	// Removed once its nodes have stopped (defers run last first).
	defer func() {
		if !o.Keep {
			_ = os.RemoveAll(filepath.Join(e.Dir, "gravity-"+cfg.Name))
		}
	}()
	if err != nil {
		return run, err
	}
	defer c.Stop()

	cl := c.Client(0)
	limit := market.Duration((o.Run + 10*time.Minute).Milliseconds())
	cmd := []string{"sleep", strconv.FormatFloat(o.Run.Seconds(), 'f', 1, 64)}
	source := dataset
	w := bench.NewJobWaiter(cl)
	began := time.Now()
	every := o.Over / time.Duration(max(o.Jobs-1, 1))
	for i := range o.Jobs {
		if err := task.Sleep(ctx, time.Until(began.Add(time.Duration(i)*every))); err != nil {
			return run, err
		}
		decl, err := json.Marshal(market.NewDeclaration(fmt.Sprintf("gravity-%d", i), cmd, 1, limit,
			[]market.Input{{Source: source, Mount: "/data"}}))
		if err != nil {
			return run, err
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		j, err := cl.Submit(sctx, api.SubmitRequest{Declaration: decl}, nil)
		cancel()
		if err != nil {
			return run, fmt.Errorf("submit job %d: %w", i, err)
		}
		if i == 0 {
			// The dataset is imported once; the other jobs name its root.
			if len(j.Inputs) != 1 {
				return run, fmt.Errorf("job %s lists inputs %v", j.ID, j.Inputs)
			}
			source, run.DatasetRoot = j.Inputs[0], j.Inputs[0]
			e.Logf("gravity %s: dataset imported as %s in %.1fs", cfg.Name, source, time.Since(began).Seconds())
		}
		w.Add(j.ID)
	}
	es, err := bench.WaitAll(ctx, []*bench.JobWaiter{w}, time.Second, 2*o.Run+30*time.Minute)
	if err != nil {
		return run, err
	}
	run.DurationS = time.Since(began).Seconds()
	used := map[string]bool{}
	var rentRun, submitRun []float64
	for _, x := range es {
		if err := x.Completed(); err != nil {
			run.FailedOutcomes = append(run.FailedOutcomes, err.Error())
			continue
		}
		run.Completed++
		used[x.Job.Provider] = true
		rent, ok1 := bench.StepAt(x.Job, api.StepRent)
		start, ok2 := bench.StepAt(x.Job, api.StepRun)
		if ok1 && ok2 {
			rentRun = append(rentRun, bench.Ms(start.Sub(rent)))
			submitRun = append(submitRun, bench.Ms(start.Sub(x.Submit)))
		}
	}
	run.ProvidersUsed = len(used)
	run.RentToRunMs, run.SubmitToRunMs = bench.SpreadOf(rentRun), bench.SpreadOf(submitRun)

	sent, err := scrape(ctx, c.Nodes[0].Metrics, "e31_content_served_bytes_total")
	if err != nil {
		return run, err
	}
	run.SubmitterSent = int64(sent[""])
	for _, n := range c.Nodes[1:] {
		got, err := scrape(ctx, n.Metrics, "e31_content_fetched_bytes_total")
		if err != nil {
			return run, err
		}
		run.TotalMoved += int64(got[""])
		run.FromProviders += int64(got[`from="provider"`])
		pre, err := scrape(ctx, n.Metrics, "e31_bytes_prestaged_total")
		if err != nil {
			return run, err
		}
		run.Prestaged += int64(pre[""])
	}
	e.Logf("gravity %s: %d of %d jobs completed on %d providers; submitter sent %.2fx the dataset, %.2fx moved in all; rent->run p50 %.0f ms",
		cfg.Name, run.Completed, o.Jobs, run.ProvidersUsed, float64(run.SubmitterSent)/float64(o.DatasetBytes),
		float64(run.TotalMoved)/float64(o.DatasetBytes), run.RentToRunMs.P50)
	return run, nil
}

// scrape reads the counters named name from a node's /metrics: the value of
// each labelled series by its labels (`from="provider"`), and their sum
// under "".
func scrape(ctx context.Context, addr, name string) (map[string]float64, error) {
	if addr == "" {
		return nil, fmt.Errorf("node has no metrics endpoint")
	}
	all, err := bench.Scrape(ctx, addr)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{"": 0}
	for series, v := range all {
		if series == name {
			out[""] += v
			continue
		}
		if labels, ok := strings.CutPrefix(series, name+"{"); ok {
			out[strings.TrimSuffix(labels, "}")] += v
			out[""] += v
		}
	}
	return out, nil
}

// Figures are the gravity rows: each configuration's, the full one held
// against the goals, with the baseline's beside it.
func (r Report) Figures() []bench.Figure {
	if len(r.Runs) == 0 {
		return nil
	}
	ds := float64(r.DatasetBytes)
	// The ratios are against the baseline, when it ran.
	bi := slices.IndexFunc(r.Runs, func(g ConfigRun) bool { return g.Config == Configs()[0].Name })
	var base ConfigRun
	if bi >= 0 {
		base = r.Runs[bi]
	}
	var f []bench.Figure
	for i, run := range r.Runs {
		g := "gravity " + run.Config
		sent := float64(run.SubmitterSent) / ds
		moved := float64(run.TotalMoved) / (ds * float64(max(run.ProvidersUsed, 1)))
		fs := []bench.Figure{
			{Group: g, Name: fmt.Sprintf("%s: jobs completed", run.Config), Value: float64(run.Completed), Unit: "jobs",
				Measured: fmt.Sprintf("%d of %d on %d providers", run.Completed, r.Jobs, run.ProvidersUsed)},
			{Group: g, Name: fmt.Sprintf("%s: bytes sent by the submitter", run.Config), Value: sent, Unit: "datasets",
				Measured: fmt.Sprintf("%.2f x dataset (%d MiB)", sent, run.SubmitterSent>>20)},
			{Group: g, Name: fmt.Sprintf("%s: bytes moved in all", run.Config), Value: moved, Unit: "datasets per provider used",
				Measured: fmt.Sprintf("%.2f x dataset x providers used (%d MiB, %d MiB between providers, %d MiB before the lease)",
					moved, run.TotalMoved>>20, run.FromProviders>>20, run.Prestaged>>20)},
			{Group: g, Name: fmt.Sprintf("%s: rent -> run", run.Config), Value: run.RentToRunMs.P50, Unit: "ms",
				Measured: fmt.Sprintf("p50 %.0f ms, p99 %.0f ms", run.RentToRunMs.P50, run.RentToRunMs.P99)},
			// Waiting for a holder moves time from the meter to the queue:
			// the whole wait says what it cost.
			{Group: g, Name: fmt.Sprintf("%s: submit -> run", run.Config), Value: run.SubmitToRunMs.P50, Unit: "ms",
				Measured: fmt.Sprintf("p50 %.0f ms, p99 %.0f ms", run.SubmitToRunMs.P50, run.SubmitToRunMs.P99)},
		}
		if i != bi {
			fs[0].OK = new(run.Completed == r.Jobs)
		}
		if i != bi && bi >= 0 {
			fs[1].Goal, fs[1].OK = fmt.Sprintf("<= %.1fx dataset", goalSubmitterSends), new(sent <= goalSubmitterSends)
			fs[1].Baseline = fmt.Sprintf("%.2fx", float64(base.SubmitterSent)/ds)
			fs[2].Goal, fs[2].OK = fmt.Sprintf("<= %.1fx dataset x providers", goalTotalMoved), new(moved <= goalTotalMoved)
			fs[2].Baseline = fmt.Sprintf("%.2fx", float64(base.TotalMoved)/(ds*float64(max(base.ProvidersUsed, 1))))
			if base.RentToRunMs.P50 > 0 {
				ratio := run.RentToRunMs.P50 / base.RentToRunMs.P50
				fs[3].Baseline = fmt.Sprintf("p50 %.0f ms", base.RentToRunMs.P50)
				fs[3].Ratio, fs[3].Goal, fs[3].OK = new(ratio), fmt.Sprintf("<= %.1fx baseline", goalRentToRun), new(ratio <= goalRentToRun)
			}
		}
		f = append(f, fs...)
	}
	return f
}

// Notes say what each configuration turned off.
func (r Report) Notes() []string {
	var n []string
	for _, run := range r.Runs {
		n = append(n, fmt.Sprintf("%s: e31d %s", run.Config, strings.Join(append([]string{"(defaults)"}, run.Args...), " ")))
		for _, o := range slices.Compact(slices.Sorted(slices.Values(run.FailedOutcomes))) {
			n = append(n, "  failed: "+o)
		}
	}
	return n
}

// WriteText prints the figures as a table, headed by the run's sizes and
// the load average before and after it.
func (r Report) WriteText(w io.Writer) error {
	t := bench.Table{
		Machine: fmt.Sprintf("%d jobs x %d MiB dataset, %d providers x %d GPUs, submitted over %s, submitter upload %s; load %s -> %s",
			r.Jobs, r.DatasetBytes>>20, r.Providers, r.GPUs, r.over, r.UploadLimit, r.loadStart, r.loadEnd),
		Figures: r.Figures(),
		Notes:   r.Notes(),
	}
	return t.WriteTextSummary(w)
}
