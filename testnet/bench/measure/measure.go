package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// Options size a run; Run takes them as they are (the command's flags
// give the defaults: 20 gossip nodes, 10 job nodes, 50 jobs, 20s of
// sampling).
type Options struct {
	// Nodes is the gossip network's size (2 GPUs each, heartbeat 500ms).
	Nodes int
	// JobNodes is the job network's size (4 GPUs each, heartbeat 1s).
	JobNodes int
	// Jobs are submitted one after another, per epoch length.
	Jobs int
	// Sample is how long every node's view is sampled for gossip latency.
	Sample time.Duration
}

// Settings of the measured networks; the brief of each figure fixes them.
const (
	gossipGPUs      = 2
	gossipHeartbeat = 500 * time.Millisecond
	jobGPUs         = 4
	jobHeartbeat    = time.Second
	// observerPoll is how often the job network's observer reads its view
	// when timing re-advertised GPUs.
	observerPoll = 20 * time.Millisecond
	// submitSpread bounds the random pause before each submit; it covers
	// every epoch length measured.
	submitSpread = time.Second
)

// Goals the figures are held against in the table.
const (
	goalRSSMiB       = 60
	goalRentP50      = 300 * time.Millisecond
	goalRentP99      = time.Second
	goalReadvertised = time.Second
)

// Report is what a run measured; --json prints it.
type Report struct {
	LoadStart string       `json:"loadavg_start"`
	LoadEnd   string       `json:"loadavg_end"`
	Gossip    gossipReport `json:"gossip"`
	Jobs      []jobsReport `json:"jobs"`
}

// gossipReport holds the figures of the gossip network.
type gossipReport struct {
	Nodes       int     `json:"nodes"`
	GPUsPerNode int     `json:"gpus_per_node"`
	HeartbeatMs float64 `json:"heartbeat_ms"`
	// StartedS is the time from the first process start until the last
	// node wrote its run file; ConvergedS until every view was full.
	StartedS   float64      `json:"started_s"`
	ConvergedS float64      `json:"converged_s"`
	IdleRSSMiB bench.Spread `json:"idle_rss_mib"`
	SampleS    float64      `json:"sample_s"`
	// Observations counts unique (observer, provider, signed_at); LatencyMs
	// is their last_seen - signed_at.
	Observations int          `json:"observations"`
	LatencyMs    bench.Spread `json:"latency_ms"`
	// Publishes counts unique (provider, signed_at) seen by any observer,
	// SeenByAll those seen by every other node, and LastObserverMs, for
	// those, the latency of the last node to see it.
	Publishes      int          `json:"publishes"`
	SeenByAll      int          `json:"seen_by_all"`
	LastObserverMs bench.Spread `json:"last_observer_ms"`
	PollErrors     int          `json:"poll_errors"`
	Load           string       `json:"loadavg"`
	PollIntervalMs float64      `json:"poll_interval_ms"`
}

// jobsReport holds the figures of one run of the job network.
type jobsReport struct {
	Nodes       int     `json:"nodes"`
	GPUsPerNode int     `json:"gpus_per_node"`
	HeartbeatMs float64 `json:"heartbeat_ms"`
	Epoch       string  `json:"epoch"`
	Jobs        int     `json:"jobs"`
	// RentMs is steps[rent].at - steps[submit].at.
	RentMs   bench.Spread   `json:"rent_ms"`
	Outcomes map[string]int `json:"outcomes"`
	// ReadvertisedMs is when the observer first saw the leased GPU free
	// again minus the job's release step; Readvertised counts the jobs
	// measured; OnObserver counts the jobs leased on the observer itself
	// and Unmeasured those whose lease the observer's samples could not
	// tell apart from another (or never showed held).
	ReadvertisedMs bench.Spread `json:"readvertised_ms"`
	Readvertised   int          `json:"readvertised"`
	OnObserver     int          `json:"on_observer"`
	Unmeasured     int          `json:"unmeasured"`
	Observer       string       `json:"observer"`
	Load           string       `json:"loadavg"`
	// Runs are the jobs one by one.
	Runs []jobFigures `json:"runs"`
}

// jobFigures are one job's figures; ReadvertisedMs is absent when the job
// could not be measured.
type jobFigures struct {
	ID             string   `json:"id"`
	Submitter      string   `json:"submitter"`
	Provider       string   `json:"provider"`
	GPU            string   `json:"gpu"`
	Outcome        string   `json:"outcome"`
	RentMs         float64  `json:"rent_ms"`
	ReadvertisedMs *float64 `json:"readvertised_ms,omitempty"`
}

// Run builds e31d and e31 into dir/bin and starts the two networks in dir,
// one after the other; log, if not nil, receives progress lines.
func Run(ctx context.Context, dir string, log func(format string, args ...any), o Options) (Report, error) {
	logf := bench.Env{Log: log}.Logf
	rep := Report{LoadStart: bench.LoadAvg()}
	logf("building e31d and e31 (load %s)", rep.LoadStart)
	bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return rep, err
	}
	rep.Gossip, err = measureGossip(ctx, bin, filepath.Join(dir, "gossip"), o, logf)
	if err != nil {
		return rep, err
	}
	for _, epoch := range []string{"", "250ms"} {
		r, err := measureJobs(ctx, bin, filepath.Join(dir, "jobs"+epoch), o, epoch, logf)
		if err != nil {
			return rep, err
		}
		rep.Jobs = append(rep.Jobs, r)
	}
	rep.LoadEnd = bench.LoadAvg()
	logf("done (load %s)", rep.LoadEnd)
	return rep, nil
}

// measureGossip starts the gossip network and takes figures 1 to 3:
// convergence, idle memory and gossip latency.
func measureGossip(ctx context.Context, bin cluster.Binaries, dir string, o Options, logf func(string, ...any)) (gossipReport, error) {
	r := gossipReport{Nodes: o.Nodes, GPUsPerNode: gossipGPUs, HeartbeatMs: bench.Ms(gossipHeartbeat), SampleS: o.Sample.Seconds()}
	logf("starting %d nodes with %d GPUs each, heartbeat %s", o.Nodes, gossipGPUs, gossipHeartbeat)
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{N: o.Nodes, GPUs: gossipGPUs, Heartbeat: gossipHeartbeat, Dir: dir, Bin: bin})
	if err != nil {
		return r, err
	}
	defer c.Stop()
	r.StartedS = time.Since(start).Seconds()
	wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	err = c.WaitConverged(wctx)
	cancel()
	if err != nil {
		return r, fmt.Errorf("%d nodes did not converge within 120s of starting: %w", o.Nodes, err)
	}
	r.ConvergedS = time.Since(start).Seconds()
	logf("converged %.2fs after the first start; idle for 5s", r.ConvergedS)

	if err := task.Sleep(ctx, 5*time.Second); err != nil {
		return r, err
	}
	var rss []float64
	for _, n := range c.Nodes {
		kib, err := bench.VmRSS(n.PID)
		if err != nil {
			return r, fmt.Errorf("%s: %w", n.Name, err)
		}
		rss = append(rss, float64(kib)/1024)
	}
	r.IdleRSSMiB = bench.SpreadOf(rss)

	interval := gossipHeartbeat / 4
	r.PollIntervalMs = bench.Ms(interval)
	logf("sampling every node's view every %s for %s", interval, o.Sample)
	seen, errs, err := sampleViews(ctx, c.Nodes, interval, o.Sample)
	if err != nil {
		return r, err
	}
	r.PollErrors = errs
	r.Load = bench.LoadAvg()

	var lat []float64
	type publish struct {
		provider string
		signedAt time.Time
	}
	observers := make(map[publish]int)
	worst := make(map[publish]time.Duration)
	for k, lastSeen := range seen {
		d := lastSeen.Sub(k.signedAt)
		lat = append(lat, bench.Ms(d))
		p := publish{k.provider, k.signedAt}
		observers[p]++
		worst[p] = max(worst[p], d)
	}
	r.Observations = len(lat)
	r.LatencyMs = bench.SpreadOf(lat)
	r.Publishes = len(observers)
	var last []float64
	for p, n := range observers {
		if n == o.Nodes-1 {
			last = append(last, bench.Ms(worst[p]))
		}
	}
	r.SeenByAll = len(last)
	r.LastObserverMs = bench.SpreadOf(last)
	if r.SeenByAll == 0 {
		return r, fmt.Errorf("no offer was seen by all %d other nodes in %s of sampling (%d publishes, %d poll errors)", o.Nodes-1, o.Sample, r.Publishes, errs)
	}
	return r, nil
}

// viewKey is one offer version as one observer saw it.
type viewKey struct {
	observer string
	provider string
	signedAt time.Time
}

// sampleViews reads every node's view every interval for a while and keeps,
// for each offer version another node published, the earliest last_seen
// the observer reported. An observer shows only the latest version per
// provider, so interval must be well under the heartbeat.
func sampleViews(ctx context.Context, nodes []*cluster.Node, interval, total time.Duration) (map[viewKey]time.Time, int, error) {
	sctx, cancel := context.WithTimeout(ctx, total)
	defer cancel()
	var (
		mu      sync.Mutex // guards seen, errs, answers and lastErr
		seen    = make(map[viewKey]time.Time)
		errs    int
		answers = make([]int, len(nodes))
		lastErr = make([]error, len(nodes))
		wg      sync.WaitGroup
	)
	for i, n := range nodes {
		// Stagger the observers so that their requests do not arrive
		// together.
		offset := interval * time.Duration(i) / time.Duration(len(nodes))
		wg.Go(func() {
			if task.Sleep(sctx, offset) != nil {
				return
			}
			cl := n.Client()
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				rctx, rcancel := context.WithTimeout(sctx, 2*time.Second)
				view, err := cl.Nodes(rctx)
				rcancel()
				mu.Lock()
				switch {
				case err == nil:
					answers[i]++
					for _, p := range view {
						if p.Self || p.PeerID == n.PeerID {
							continue
						}
						k := viewKey{n.PeerID, p.PeerID, p.SignedAt}
						if old, had := seen[k]; !had || p.LastSeen.Before(old) {
							seen[k] = p.LastSeen
						}
					}
				case sctx.Err() == nil:
					errs++
					lastErr[i] = err
				}
				mu.Unlock()
				select {
				case <-sctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, errs, ctx.Err()
	}
	for i, n := range nodes {
		if answers[i] == 0 {
			return nil, errs, fmt.Errorf("%s answered no view request in %s: %v", n.Name, total, lastErr[i])
		}
	}
	return seen, errs, nil
}

// jobRun is one measured job.
type jobRun struct {
	id        string
	rentMs    float64
	readv     *float64
	submitter int
	rentAt    time.Time
	release   time.Time
	provider  string
	gpu       string
	outcome   string
}

// measureJobs starts the job network and takes figures 4 and 5: submit to
// signed lease, and release to GPU seen free again.
func measureJobs(ctx context.Context, bin cluster.Binaries, dir string, o Options, epoch string, logf func(string, ...any)) (jobsReport, error) {
	r := jobsReport{Nodes: o.JobNodes, GPUsPerNode: jobGPUs, HeartbeatMs: bench.Ms(jobHeartbeat), Epoch: epoch, Outcomes: map[string]int{}}
	var args []string
	if epoch != "" {
		args = []string{"--epoch", epoch}
	} else {
		r.Epoch = "1s (default)"
	}
	logf("starting %d nodes with %d GPUs each, heartbeat %s, epoch %s", o.JobNodes, jobGPUs, jobHeartbeat, r.Epoch)
	c, err := cluster.Start(ctx, cluster.Options{N: o.JobNodes, GPUs: jobGPUs, Heartbeat: jobHeartbeat, Dir: dir, Bin: bin, Args: args})
	if err != nil {
		return r, err
	}
	defer c.Stop()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = c.WaitConverged(wctx)
	cancel()
	if err != nil {
		return r, fmt.Errorf("%d nodes did not converge within 60s of starting: %w", o.JobNodes, err)
	}

	decl, err := json.Marshal(market.NewDeclaration("m", []string{"true"}, 1, market.Duration(60_000), nil))
	if err != nil {
		return r, err
	}
	obsIndex := len(c.Nodes) - 1
	obs := startObserver(ctx, c.Nodes[obsIndex])
	defer obs.stop()
	r.Observer = c.Nodes[obsIndex].Name

	logf("submitting %d jobs one after another, round-robin over the nodes", o.Jobs)
	var runs []*jobRun
	var rent []float64
	for i := range o.Jobs {
		// Matching runs at epoch boundaries and a rent ends just after
		// one, so a job submitted at once after the last one's rent would
		// always wait nearly a whole epoch. A random pause spreads the
		// submits over the epoch, as unrelated users would.
		if err := task.Sleep(ctx, rand.N(submitSpread)); err != nil {
			return r, err
		}
		sub := i % len(c.Nodes)
		cl := c.Client(sub)
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		job, err := cl.Submit(sctx, api.SubmitRequest{Declaration: decl}, nil)
		scancel()
		if err != nil {
			return r, fmt.Errorf("submit job %d on %s: %w", i, c.Nodes[sub].Name, err)
		}
		job, err = bench.WaitJob(ctx, cl, job.ID, 30*time.Second, func(j api.Job) (bool, error) {
			if _, ok := bench.StepAt(j, "rent"); ok {
				return true, nil
			}
			if j.State == api.JobRejected || j.State == api.JobWithdrawn || j.State == api.JobReleased {
				return false, fmt.Errorf("ended %s (%s) without a rent step", j.State, j.Outcome)
			}
			return false, nil
		})
		if err != nil {
			return r, fmt.Errorf("job %d (%s on %s): %w", i, job.ID, c.Nodes[sub].Name, err)
		}
		submitAt, _ := bench.StepAt(job, "submit")
		rentAt, _ := bench.StepAt(job, "rent")
		rent = append(rent, bench.Ms(rentAt.Sub(submitAt)))
		runs = append(runs, &jobRun{id: job.ID, submitter: sub, rentAt: rentAt, rentMs: bench.Ms(rentAt.Sub(submitAt))})
	}
	r.Jobs = len(runs)
	r.RentMs = bench.SpreadOf(rent)
	logf("submit -> rent p50 %.0f ms, p99 %.0f ms; waiting for every job to be released", r.RentMs.P50, r.RentMs.P99)

	deadline := time.Now().Add(120 * time.Second)
	for _, run := range runs {
		cl := c.Client(run.submitter)
		left := time.Until(deadline)
		job, err := bench.WaitJob(ctx, cl, run.id, left, func(j api.Job) (bool, error) {
			return j.State.Terminal(), nil
		})
		if err != nil {
			return r, fmt.Errorf("job %s on %s was not released within 120s of the last submit: %w", run.id, c.Nodes[run.submitter].Name, err)
		}
		run.outcome = job.Outcome
		if run.outcome == "" {
			run.outcome = string(job.State)
		}
		r.Outcomes[run.outcome]++
		run.provider = job.Provider
		if len(job.GPUs) > 0 {
			run.gpu = job.GPUs[0]
		}
		run.release, _ = bench.StepAt(job, "release")
	}
	// Give the observer time to see the last GPUs come back.
	if err := obs.waitAllFree(ctx, 10*time.Second); err != nil {
		logf("%v; measuring what it saw", err)
	}
	timeline := obs.stop()
	r.Load = bench.LoadAvg()

	var readv []float64
	byGPU := make(map[string][]*jobRun)
	for _, run := range runs {
		switch {
		case run.provider == c.Nodes[obsIndex].PeerID:
			r.OnObserver++
		case run.gpu == "" || run.release.IsZero():
			r.Unmeasured++
		default:
			byGPU[run.gpu] = append(byGPU[run.gpu], run)
		}
	}
	for gpu, jobs := range byGPU {
		got := readvertised(timeline[gpu], jobs)
		readv = append(readv, got...)
		r.Unmeasured += len(jobs) - len(got)
	}
	r.Readvertised = len(readv)
	r.ReadvertisedMs = bench.SpreadOf(readv)
	for _, run := range runs {
		r.Runs = append(r.Runs, jobFigures{
			ID: run.id, Submitter: c.Nodes[run.submitter].Name, Provider: nodeName(c, run.provider), GPU: run.gpu,
			Outcome: run.outcome, RentMs: run.rentMs, ReadvertisedMs: run.readv,
		})
	}
	return r, nil
}

// readvertised pairs the observer's held runs of one GPU with the jobs
// leased on it and returns, for each job that owns a run without doubt, how
// long after its release step the GPU was first seen free again. A lease is
// seen held only after it is rented, and the next lease of the GPU is rented
// only after the last one is released, so a held run belongs to the one job
// rented between the start of the previous held run and its own start; when
// two jobs were, the observer missed a free moment and the run is skipped.
func readvertised(samples []gpuSample, jobs []*jobRun) []float64 {
	var out []float64
	prevHeld := time.Time{}
	for i, s := range samples {
		if s.free || i+1 == len(samples) {
			continue
		}
		// samples alternate, so samples[i+1] is the first free one after
		// this held run.
		freeAt := samples[i+1].at
		var owner *jobRun
		n := 0
		for _, run := range jobs {
			if run.rentAt.After(prevHeld) && run.rentAt.Before(s.at) {
				owner, n = run, n+1
			}
		}
		if n == 1 {
			d := bench.Ms(freeAt.Sub(owner.release))
			owner.readv = &d
			out = append(out, d)
		}
		prevHeld = s.at
	}
	return out
}

// gpuSample is a change of one GPU's free flag in the observer's view, with
// the time the answer that showed it arrived.
type gpuSample struct {
	at   time.Time
	free bool
}

// observer polls one node's view and records every change of every other
// provider's GPUs.
type observer struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex // guards the fields below
	timeline map[string][]gpuSample
	allFree  bool
}

func startObserver(ctx context.Context, n *cluster.Node) *observer {
	octx, cancel := context.WithCancel(ctx)
	o := &observer{cancel: cancel, done: make(chan struct{}), timeline: make(map[string][]gpuSample)}
	go func() {
		defer close(o.done)
		cl := n.Client()
		t := time.NewTicker(observerPoll)
		defer t.Stop()
		for {
			rctx, rcancel := context.WithTimeout(octx, 2*time.Second)
			view, err := cl.Nodes(rctx)
			rcancel()
			at := time.Now()
			if err == nil {
				o.mu.Lock()
				all := true
				for _, p := range view {
					for _, g := range p.GPUs {
						all = all && g.Free
						if p.Self {
							continue
						}
						tl := o.timeline[g.UUID]
						if len(tl) == 0 || tl[len(tl)-1].free != g.Free {
							o.timeline[g.UUID] = append(tl, gpuSample{at, g.Free})
						}
					}
				}
				o.allFree = all
				o.mu.Unlock()
			}
			select {
			case <-octx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return o
}

// waitAllFree waits until the observer's view shows every GPU free.
func (o *observer) waitAllFree(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		o.mu.Lock()
		all := o.allFree
		o.mu.Unlock()
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the observer still saw a GPU held %s after every job was released", limit)
		}
		if err := task.Sleep(ctx, observerPoll); err != nil {
			return err
		}
	}
}

// stop ends the polling and returns the timeline of every GPU.
func (o *observer) stop() map[string][]gpuSample {
	o.cancel()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.timeline
}

// nodeName is the name of the node with a peer ID, or the ID itself.
func nodeName(c *cluster.Cluster, peerID string) string {
	for _, n := range c.Nodes {
		if n.PeerID == peerID {
			return n.Name
		}
	}
	return peerID
}

// WriteText prints the figures for people, each held against its goal.
func (r Report) WriteText(w io.Writer) error {
	g := r.Gossip
	fmt.Fprintf(w, "load average %s at start, %s at end\n\n", r.LoadStart, r.LoadEnd)
	fmt.Fprintf(w, "%d nodes x %d GPUs, heartbeat %s (load %s after sampling)\n", g.Nodes, g.GPUsPerNode, gossipHeartbeat, g.Load)
	fmt.Fprintf(w, "  %-40s %8.2f s   (all started after %.2f s)\n", "first start -> every view full", g.ConvergedS, g.StartedS)
	fmt.Fprintf(w, "  %-40s min %.1f  median %.1f  max %.1f MiB   goal <= %d %s\n", "idle RSS per e31d", g.IdleRSSMiB.Min, g.IdleRSSMiB.P50, g.IdleRSSMiB.Max, goalRSSMiB, bench.Verdict(g.IdleRSSMiB.Max <= goalRSSMiB))
	fmt.Fprintf(w, "  %-40s p50 %.1f  p99 %.1f  max %.1f ms   (n=%d)\n", "gossip latency, per observation", g.LatencyMs.P50, g.LatencyMs.P99, g.LatencyMs.Max, g.Observations)
	fmt.Fprintf(w, "  %-40s p50 %.1f  p99 %.1f ms   (%d of %d publishes seen by all)\n", fmt.Sprintf("publish -> last of %d observers", g.Nodes-1), g.LastObserverMs.P50, g.LastObserverMs.P99, g.SeenByAll, g.Publishes)
	if g.PollErrors > 0 {
		fmt.Fprintf(w, "  %d view requests failed while sampling\n", g.PollErrors)
	}
	for _, j := range r.Jobs {
		fmt.Fprintf(w, "\n%d nodes x %d GPUs, heartbeat %s, epoch %s (load %s)\n", j.Nodes, j.GPUsPerNode, jobHeartbeat, j.Epoch, j.Load)
		fmt.Fprintf(w, "  %-40s p50 %.0f  p99 %.0f  max %.0f ms   goal <= %s / %s %s\n", fmt.Sprintf("submit -> signed lease (%d jobs)", j.Jobs), j.RentMs.P50, j.RentMs.P99, j.RentMs.Max, goalRentP50, goalRentP99,
			bench.Verdict(j.RentMs.P50 <= bench.Ms(goalRentP50) && j.RentMs.P99 <= bench.Ms(goalRentP99)))
		fmt.Fprintf(w, "  %-40s p50 %.0f  max %.0f ms   (n=%d; %d on %s, %d unmeasured) goal <= %s %s\n", "release -> GPU seen free by "+j.Observer, j.ReadvertisedMs.P50, j.ReadvertisedMs.Max, j.Readvertised, j.OnObserver, j.Observer, j.Unmeasured, goalReadvertised,
			bench.Verdict(j.Readvertised > 0 && j.ReadvertisedMs.Max <= bench.Ms(goalReadvertised)))
		fmt.Fprintf(w, "  %-40s %s\n", "outcomes", outcomes(j.Outcomes))
	}
	return nil
}

func outcomes(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
