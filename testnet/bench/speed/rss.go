package speed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// Goals of the memory and deep-queue figures.
const (
	goalRSSRatio  = 1.5
	goalDeepRatio = 0.9
	// shortQueue is how many jobs the short-queue baseline keeps in flight.
	shortQueue = 10
	rssGPUs    = 4
	rssProvs   = 3
)

// RSSOptions size the memory run.
type RSSOptions struct {
	// Jobs are submitted all at once (the deep queue); ShortJobs go first,
	// shortQueue at a time, for the baseline rate.
	Jobs, ShortJobs int
	// IdleFor is how long the network idles before its memory is read.
	IdleFor time.Duration
	// Settle is how long the network rests after the last job before its
	// memory is read again: the node at rest after the work, not in the
	// middle of it. Default 45s.
	Settle time.Duration
	// ProfileDir, when set, receives a heap profile of every daemon idle
	// and after the work (NAME-idle.pb.gz, NAME-after.pb.gz), each taken
	// after its memory was read so that the forced collection does not
	// lower the figure.
	ProfileDir string
	// CPUProfileDir, when set, receives a CPU profile of every daemon
	// taken for CPUProfileFor while the short queue runs (short/) and
	// once the deep queue is submitted (deep/), and the run reports the
	// CPU one job cost by phase in each: what a deep queue costs more.
	CPUProfileDir string
	CPUProfileFor time.Duration
}

// RSSReport is the memory run's figures.
type RSSReport struct {
	Jobs      int `json:"jobs"`
	ShortJobs int `json:"short_jobs"`
	// Idle and After are resident memory in MiB, of the submitter and of
	// each provider, idle and after every job was released.
	IdleSubmitterMiB  float64   `json:"idle_submitter_mib"`
	AfterSubmitterMiB float64   `json:"after_submitter_mib"`
	IdleProvidersMiB  []float64 `json:"idle_providers_mib"`
	AfterProvidersMiB []float64 `json:"after_providers_mib"`
	// AnonSubmitterMiB is the submitter's anonymous (private, not file
	// backed) resident memory at the end: its own heap, without the pages
	// of mapped store files the kernel may drop.
	AnonSubmitterMiB   float64 `json:"anon_submitter_mib"`
	ShortJobsPerS      float64 `json:"short_jobs_per_s"`
	DeepJobsPerS       float64 `json:"deep_jobs_per_s"`
	DeepSubmitS        float64 `json:"deep_submit_s"`
	DeepReleasedP50Ms  float64 `json:"deep_released_p50_ms"`
	ShortReleasedP50Ms float64 `json:"short_released_p50_ms"`
	// ShortProfile and DeepProfile are the CPU per job by phase in each
	// queue, with CPUProfileDir.
	ShortProfile *ProfileReport `json:"short_profile,omitempty"`
	DeepProfile  *ProfileReport `json:"deep_profile,omitempty"`
}

// MeasureRSS starts one submitter without GPUs and three providers with 4
// each; reads memory idle; runs o.ShortJobs jobs shortQueue at a time from
// the submitter, then o.Jobs submitted as fast as it takes them; and reads
// memory again once all are released.
func MeasureRSS(ctx context.Context, e bench.Env, o RSSOptions) (RSSReport, error) {
	r := RSSReport{Jobs: o.Jobs, ShortJobs: o.ShortJobs}
	decl, err := bench.TrivialJob()
	if err != nil {
		return r, err
	}
	byNode := []string{""}
	for range rssProvs {
		byNode = append(byNode, fmt.Sprintf("%dxH100:80GiB", rssGPUs))
	}
	e.Logf("memory: 1 submitter, %d providers x %d GPUs; idle %s", rssProvs, rssGPUs, o.IdleFor)
	c, err := bench.StartNetwork(ctx, cluster.Options{N: len(byNode), SimGPUsByNode: byNode, Dir: filepath.Join(e.Dir, "rss"), Bin: e.Bin, Heartbeat: time.Second, Metrics: o.ProfileDir != "" || o.CPUProfileDir != ""})
	if err != nil {
		return r, err
	}
	defer c.Stop()
	if err := task.Sleep(ctx, o.IdleFor); err != nil {
		return r, err
	}
	read := func() (float64, []float64, error) {
		var provs []float64
		var sub float64
		for i, n := range c.Nodes {
			kib, err := bench.VmRSS(n.PID)
			if err != nil {
				return 0, nil, fmt.Errorf("%s: %w", n.Name, err)
			}
			if i == 0 {
				sub = float64(kib) / 1024
			} else {
				provs = append(provs, float64(kib)/1024)
			}
		}
		return sub, provs, nil
	}
	if r.IdleSubmitterMiB, r.IdleProvidersMiB, err = read(); err != nil {
		return r, err
	}
	if err := heapProfiles(ctx, c, o.ProfileDir, "idle"); err != nil {
		return r, err
	}
	cl := c.Client(0)
	if o.CPUProfileFor <= 0 {
		o.CPUProfileFor = 15 * time.Second
	}
	profile := func(when string) (*profiler, error) {
		if o.CPUProfileDir == "" {
			return nil, nil
		}
		e.Logf("memory: taking a %s CPU profile of every daemon (%s queue)", o.CPUProfileFor, when)
		return startProfiles(ctx, c, filepath.Join(o.CPUProfileDir, when), o.CPUProfileFor)
	}
	finish := func(p *profiler, es []bench.Ended, into **ProfileReport) error {
		if p == nil {
			return nil
		}
		rep, err := p.finish(ctx, es)
		if err != nil {
			return err
		}
		*into = &rep
		e.Logf("memory: %d jobs in the profile, %.1f ms of daemon CPU and %.1f ms of runc per job", rep.Jobs, rep.DaemonMs, rep.RuncMs)
		for _, ph := range rep.Phases {
			e.Logf("memory:   %-28s %6.2f ms/job", ph.Phase, bench.Ms(ph.CPU))
		}
		return nil
	}
	shortProf, err := profile("short")
	if err != nil {
		return r, err
	}

	// The short queue: shortQueue workers, each submitting and waiting.
	e.Logf("memory: %d jobs, %d at a time", o.ShortJobs, shortQueue)
	var (
		mu    sync.Mutex // guards short and errs
		short []bench.Ended
		errs  []error
		next  = make(chan struct{}, o.ShortJobs)
		wg    sync.WaitGroup
	)
	for range o.ShortJobs {
		next <- struct{}{}
	}
	close(next)
	for range shortQueue {
		wg.Go(func() {
			for range next {
				id, err := bench.Submit(ctx, cl, decl)
				var got []bench.Ended
				if err == nil {
					w := bench.NewJobWaiter(cl)
					w.Add(id)
					got, err = bench.WaitAll(ctx, []*bench.JobWaiter{w}, 20*time.Millisecond, 2*time.Minute)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				short = append(short, got...)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return r, errs[0]
	}
	rel, err := bench.ReleasedMs(short)
	if err != nil {
		return r, err
	}
	_, r.ShortJobsPerS = bench.Window(short)
	if err := finish(shortProf, short, &r.ShortProfile); err != nil {
		return r, err
	}
	r.ShortReleasedP50Ms = bench.SpreadOf(rel).P50

	// The deep queue: everything submitted before the first is waited for.
	e.Logf("memory: %d jobs submitted at once", o.Jobs)
	w := bench.NewJobWaiter(cl)
	t0 := time.Now()
	for i := range o.Jobs {
		id, err := bench.Submit(ctx, cl, decl)
		if err != nil {
			return r, fmt.Errorf("deep queue, job %d: %w", i, err)
		}
		w.Add(id)
	}
	r.DeepSubmitS = time.Since(t0).Seconds()
	deepProf, err := profile("deep")
	if err != nil {
		return r, err
	}
	deep, err := bench.WaitAll(ctx, []*bench.JobWaiter{w}, 500*time.Millisecond, max(10*time.Minute, time.Duration(o.Jobs)*time.Second))
	if err != nil {
		return r, err
	}
	if rel, err = bench.ReleasedMs(deep); err != nil {
		return r, err
	}
	_, r.DeepJobsPerS = bench.Window(deep)
	if err := finish(deepProf, deep, &r.DeepProfile); err != nil {
		return r, err
	}
	r.DeepReleasedP50Ms = bench.SpreadOf(rel).P50
	if o.Settle == 0 {
		o.Settle = 45 * time.Second
	}
	e.Logf("memory: all released; resting %s", o.Settle)
	if err := task.Sleep(ctx, o.Settle); err != nil {
		return r, err
	}
	if r.AfterSubmitterMiB, r.AfterProvidersMiB, err = read(); err != nil {
		return r, err
	}
	if kib, err := bench.ProcStatusKiB(c.Nodes[0].PID, "RssAnon:"); err == nil {
		r.AnonSubmitterMiB = float64(kib) / 1024
	}
	if err := heapProfiles(ctx, c, o.ProfileDir, "after"); err != nil {
		return r, err
	}
	e.Logf("memory: submitter anonymous resident %.0f MiB", r.AnonSubmitterMiB)
	e.Logf("memory: submitter %.0f -> %.0f MiB; deep queue %.1f jobs/s vs %.1f", r.IdleSubmitterMiB, r.AfterSubmitterMiB, r.DeepJobsPerS, r.ShortJobsPerS)
	return r, nil
}

// Figures are the memory and deep-queue rows.
func (r RSSReport) Figures() []bench.Figure {
	total := r.Jobs + r.ShortJobs
	sub := r.AfterSubmitterMiB / r.IdleSubmitterMiB
	worst, wi := 0.0, 0
	for i := range r.AfterProvidersMiB {
		if q := r.AfterProvidersMiB[i] / r.IdleProvidersMiB[i]; q > worst {
			worst, wi = q, i
		}
	}
	f := []bench.Figure{
		{Group: "rss", Name: fmt.Sprintf("e31d RSS after %d jobs, submitter", total), Value: r.AfterSubmitterMiB, Unit: "MiB",
			Measured: fmt.Sprintf("%.0f MiB", r.AfterSubmitterMiB), Baseline: fmt.Sprintf("idle %.0f MiB", r.IdleSubmitterMiB),
			Ratio: new(sub), Goal: fmt.Sprintf("<= %.1fx idle", goalRSSRatio), OK: new(sub <= goalRSSRatio)},
	}
	if len(r.AfterProvidersMiB) > 0 {
		f = append(f, bench.Figure{Group: "rss", Name: fmt.Sprintf("e31d RSS after %d jobs, providers (worst of %d)", total, len(r.AfterProvidersMiB)),
			Value: r.AfterProvidersMiB[wi], Unit: "MiB", Measured: fmt.Sprintf("%.0f MiB", r.AfterProvidersMiB[wi]),
			Baseline: fmt.Sprintf("idle %.0f MiB", r.IdleProvidersMiB[wi]), Ratio: new(worst),
			Goal: fmt.Sprintf("<= %.1fx idle", goalRSSRatio), OK: new(worst <= goalRSSRatio)})
	}
	var deep *float64
	if r.ShortJobsPerS > 0 {
		deep = new(r.DeepJobsPerS / r.ShortJobsPerS)
	}
	f = append(f, bench.Figure{Group: "rss", Name: fmt.Sprintf("throughput with %d queued (submitted in %.0fs)", r.Jobs, r.DeepSubmitS),
		Value: r.DeepJobsPerS, Unit: "jobs/s", Measured: fmt.Sprintf("%.1f jobs/s", r.DeepJobsPerS),
		Baseline: fmt.Sprintf("%.1f jobs/s with %d at a time", r.ShortJobsPerS, shortQueue), Ratio: deep,
		Goal: fmt.Sprintf("no slower (>= %.1fx)", goalDeepRatio), OK: new(deep != nil && *deep >= goalDeepRatio)})
	return f
}

// heapProfiles saves a heap profile of every node into dir as
// NAME-when.pb.gz, with its /proc smaps as NAME-when.smaps; nothing when dir
// is empty.
func heapProfiles(ctx context.Context, c *cluster.Cluster, dir, when string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		// smaps says which mappings the resident memory is in: the heap,
		// or the pages of mapped store files that the heap profile misses.
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(n.PID) + "/smaps"); err == nil {
			if err := os.WriteFile(filepath.Join(dir, n.Name+"-"+when+".smaps"), b, 0o644); err != nil {
				return err
			}
		}
		url := fmt.Sprintf("http://%s/debug/pprof/heap", n.Metrics)
		if err := fetchTo(ctx, url, filepath.Join(dir, n.Name+"-"+when+".pb.gz"), 30*time.Second); err != nil {
			return fmt.Errorf("heap profile of %s: %w", n.Name, err)
		}
	}
	return nil
}
