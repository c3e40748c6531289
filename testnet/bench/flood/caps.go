package flood

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/testnet/bench"
	flooder "github.com/e31network/e31/testnet/byzantine/flood"
	"github.com/e31network/e31/testnet/cluster"
)

// CapsOptions configure MeasureCaps; zero values take the defaults noted.
type CapsOptions struct {
	// Nodes is the number of honest daemons, each a provider; default 3.
	Nodes int
	// GPUs per node; default 2.
	GPUs int
	// Hoard is the flood: by default 20 fresh identities, each declaring
	// as much as one submitter may hold in a view (testnet/byzantine/flood).
	// Its Rounds are ignored: the flood goes on until the honest jobs have
	// ended and MinRounds are done.
	Hoard flooder.HoardConfig
	// MinRounds is the fewest rounds of the flood measured; default 1.
	MinRounds int
	// Heartbeat of the daemons; default 10s, e31d's own: a job not
	// re-announced for ten heartbeats leaves a view, and the flood must
	// be in the views whole to measure them full.
	Heartbeat time.Duration
	// Jobs is the number of honest jobs, submitted round-robin once every
	// daemon's view is at a bound (it refused or evicted something);
	// default 3. FullLimit bounds the wait for that; default 3m.
	Jobs      int
	FullLimit time.Duration
	// JobLimit bounds how long the honest jobs may take; default 3m.
	JobLimit time.Duration
	// Unbounded runs the daemons' views without bounds (e31d --view-jobs 0
	// --view-bytes 0), as they were before them: the honest jobs are then
	// submitted once the flood's first round is out.
	Unbounded bool
}

func (o CapsOptions) withDefaults() CapsOptions {
	bench.Default(&o.Nodes, 3)
	bench.Default(&o.GPUs, 2)
	bench.Default(&o.MinRounds, 1)
	bench.Default(&o.Heartbeat, 10*time.Second)
	bench.Default(&o.Jobs, 3)
	bench.Default(&o.JobLimit, 3*time.Minute)
	bench.Default(&o.FullLimit, 3*time.Minute)
	return o
}

// Daemon is one honest daemon's memory and view under the flood.
type Daemon struct {
	Name string `json:"name"`
	// BaseKiB is its resident memory before the flood, PeakKiB the most it
	// ever held (VmHWM), EndKiB what it held when the flood stopped.
	BaseKiB int64 `json:"base_kib"`
	PeakKiB int64 `json:"peak_kib"`
	EndKiB  int64 `json:"end_kib"`
	// HeldJobs and HeldBytes are the most its view held, sampled every
	// second (e31_view_held).
	HeldJobs  float64 `json:"held_jobs"`
	HeldBytes float64 `json:"held_bytes"`
	// Refused and Evicted are its view's counts by reason
	// (e31_view_refused_total, e31_view_evicted_total).
	Refused map[string]float64 `json:"refused"`
	Evicted map[string]float64 `json:"evicted"`
}

// CapsReport is what MeasureCaps measured.
type CapsReport struct {
	Unbounded bool            `json:"unbounded,omitempty"`
	Hoard     flooder.Hoarded `json:"flood"`
	WallS     float64         `json:"wall_s"`
	// Submitted and Completed count the honest jobs; Job is their submit
	// to release, in ms.
	Submitted int          `json:"submitted"`
	Completed int          `json:"completed"`
	Job       bench.Spread `json:"job_ms"`
	Daemons   []Daemon     `json:"daemons"`
	// PeakKiB is the most any daemon held.
	PeakKiB int64 `json:"peak_kib"`
}

// RunCaps builds e31d and e31 into dir/bin and runs MeasureCaps on them,
// in dir; log, if not nil, receives progress lines.
func RunCaps(ctx context.Context, dir string, log func(format string, args ...any), o CapsOptions) (CapsReport, error) {
	return bench.BuildAndMeasure(ctx, dir, log, o, MeasureCaps)
}

// MeasureCaps runs a flood of the views' bounds against a network of
// daemons (issue 51): fresh identities each declaring as much as one
// submitter may hold (testnet/byzantine/flood's Hoard), re-announced
// round after round, and honest jobs submitted once the first round is
// out. It reports each daemon's resident memory, at its peak and as the
// flood stops, what its view held and what its bounds refused and
// evicted, and the honest jobs' times. Honest jobs that do not complete
// are an error.
func MeasureCaps(ctx context.Context, e bench.Env, o CapsOptions) (CapsReport, error) {
	o = o.withDefaults()
	r := CapsReport{Unbounded: o.Unbounded}
	const network = "caps"
	var args []string
	if o.Unbounded {
		args = []string{"--view-jobs", "0", "--view-bytes", "0"}
	}
	c, err := bench.StartNetwork(ctx, cluster.Options{N: o.Nodes, GPUs: o.GPUs, Dir: filepath.Join(e.Dir, "caps"), Bin: e.Bin,
		Heartbeat: o.Heartbeat, Network: network, Metrics: true, Args: args})
	if err != nil {
		return r, err
	}
	defer c.Stop()
	r.Daemons = make([]Daemon, len(c.Nodes))
	for i, n := range c.Nodes {
		r.Daemons[i] = Daemon{Name: n.Name, Refused: map[string]float64{}, Evicted: map[string]float64{}}
		if r.Daemons[i].BaseKiB, err = bench.VmRSS(n.PID); err != nil {
			return r, fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	addrs := c.Addrs()
	f, err := startFlooder(ctx, network, "hoard", addrs)
	if err != nil {
		return r, err
	}
	defer f.Close()

	start := time.Now()
	fctx, stopFlood := context.WithCancel(ctx)
	defer stopFlood()
	var (
		mu       sync.Mutex // guards hoarded and hoardErr
		hoarded  flooder.Hoarded
		hoardErr error
		done     = make(chan struct{})
	)
	hc := o.Hoard
	hc.Rounds = 0
	hc.OnRound = func(h flooder.Hoarded) {
		mu.Lock()
		defer mu.Unlock()
		hoarded = h
	}
	go func() {
		defer close(done)
		_, err := f.Hoard(fctx, hc)
		mu.Lock()
		defer mu.Unlock()
		hoardErr = err
	}()
	roundsDone := func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return hoarded.Rounds, hoardErr
	}
	// sample reads every daemon's view series. A daemon busy with the
	// flood may not answer a scrape in time: it is read at the next
	// sample, and only the last sample must reach every daemon.
	samples := 0
	sample := func(last bool) error {
		if samples++; samples%10 == 0 {
			var views []string
			for _, d := range r.Daemons {
				views = append(views, fmt.Sprintf("%.0f jobs %s", d.HeldJobs, bench.HumanBytes(int64(d.HeldBytes))))
			}
			got, _ := roundsDone()
			e.Logf("flood-bench caps: %.0f s, %d rounds out; views held at most %s", time.Since(start).Seconds(), got, strings.Join(views, "; "))
		}
		for i, n := range c.Nodes {
			m, err := bench.Scrape(ctx, n.Metrics)
			for try := 0; err != nil && last && try < 5 && ctx.Err() == nil; try++ {
				m, err = bench.Scrape(ctx, n.Metrics)
			}
			if err != nil && !last {
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
			d := &r.Daemons[i]
			d.HeldJobs = max(d.HeldJobs, m[`e31_view_held{what="jobs"}`])
			d.HeldBytes = max(d.HeldBytes, m[`e31_view_held{what="bytes"}`])
			for _, reason := range view.BoundReasons() {
				d.Refused[reason] = m[`e31_view_refused_total{reason="`+reason+`"}`]
				if v, ok := m[`e31_view_evicted_total{reason="`+reason+`"}`]; ok {
					d.Evicted[reason] = v
				}
			}
		}
		return nil
	}
	// full says every daemon's view is at a bound, as last sampled.
	full := func() bool {
		for _, d := range r.Daemons {
			n := 0.0
			for _, reason := range []string{view.BoundJobs, view.BoundBytes} {
				n += d.Refused[reason] + d.Evicted[reason]
			}
			if n == 0 {
				return false
			}
		}
		return true
	}
	// waitFor samples until n rounds are out and, with untilFull, every
	// view is at a bound, or limit passes.
	waitFor := func(n int, untilFull bool, limit time.Duration) error {
		deadline := time.Now().Add(limit)
		for {
			got, err := roundsDone()
			if err != nil {
				return fmt.Errorf("flood: %w", err)
			}
			if got >= n && (!untilFull || full()) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("after %s, %d rounds of the flood out (want %d), every view at a bound: %v", limit, got, n, full())
			}
			if err := sample(false); err != nil {
				return err
			}
			if err := task.Sleep(ctx, time.Second); err != nil {
				return err
			}
		}
	}
	e.Logf("flood-bench caps: fresh identities declaring their bounds against %d daemons", o.Nodes)
	// finish reads what the daemons held at most and what the flood
	// sent, whatever ends the run.
	finish := func() {
		for i, n := range c.Nodes {
			d := &r.Daemons[i]
			if kib, err := bench.ProcStatusKiB(n.PID, "VmHWM:"); err == nil {
				d.PeakKiB = kib
			}
			if kib, err := bench.VmRSS(n.PID); err == nil {
				d.EndKiB = kib
			}
			r.PeakKiB = max(r.PeakKiB, d.PeakKiB)
		}
		mu.Lock()
		r.Hoard = hoarded
		mu.Unlock()
		r.WallS = time.Since(start).Seconds()
	}
	if o.Unbounded {
		err = waitFor(1, false, time.Hour)
	} else {
		err = waitFor(0, true, o.FullLimit)
	}
	if err != nil {
		finish()
		return r, err
	}
	e.Logf("flood-bench caps: every view at a bound (or, unbounded, the first round out) after %.0f s; %d honest jobs", time.Since(start).Seconds(), o.Jobs)
	ws, submitted, err := submitHonest(ctx, c, o.Jobs)
	r.Submitted = submitted
	if err != nil {
		finish()
		return r, err
	}
	jobsDone := make(chan struct{})
	var es []bench.Ended
	var jobsErr error
	go func() {
		defer close(jobsDone)
		es, jobsErr = bench.WaitAll(ctx, ws, 200*time.Millisecond, o.JobLimit)
	}()
	for waiting := true; waiting; {
		select {
		case <-jobsDone:
			waiting = false
		case <-ctx.Done():
			finish()
			return r, ctx.Err()
		case <-time.After(time.Second):
			if err := sample(false); err != nil {
				return r, err
			}
		}
	}
	if err := waitFor(o.MinRounds, false, time.Hour); err != nil {
		finish()
		return r, err
	}
	sampled := sample(true)
	finish()
	stopFlood()
	<-done
	if sampled != nil {
		return r, sampled
	}
	var why []string
	if jobsErr != nil {
		why = append([]string{jobsErr.Error()}, pending(ctx, ws)...)
	}
	completed, job, failed := tally(es)
	r.Completed, r.Job, why = completed, job, append(why, failed...)
	if len(why) > 0 {
		return r, fmt.Errorf("%d of %d honest jobs did not complete: %s", r.Submitted-r.Completed, r.Submitted, strings.Join(why, "; "))
	}
	return r, nil
}

// WriteText prints the report for people.
func (r CapsReport) WriteText(w io.Writer) error {
	bounds := "the default bounds"
	if r.Unbounded {
		bounds = "views without bounds (--view-jobs 0 --view-bytes 0)"
	}
	h := r.Hoard
	if _, err := fmt.Fprintf(w, `flood-bench --mode caps: %d daemons, %s
  flood: %d identities, each %d single jobs (%d of the largest size) and %d tasks in %d arrays: %s of declarations a round, in %d requeue messages; %d rounds in %.0f s
  honest jobs submitted during the flood: %d/%d completed, submit to release median %.0f ms, max %.0f ms
  most resident memory of any daemon: %s
`, len(r.Daemons), bounds, h.Identities, h.Singles/max(h.Identities, 1), h.Big/max(h.Identities, 1), h.Tasks/max(h.Identities, 1), h.Arrays/max(h.Identities, 1),
		bench.HumanBytes(h.Bytes), h.Messages/max(h.Rounds, 1), h.Rounds, r.WallS,
		r.Completed, r.Submitted, r.Job.P50, r.Job.Max, bench.HumanBytes(r.PeakKiB<<10)); err != nil {
		return err
	}
	byReason := func(m map[string]float64) string {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, fmt.Sprintf("%s %.0f", k, m[k]))
		}
		return strings.Join(out, ", ")
	}
	for _, d := range r.Daemons {
		if _, err := fmt.Fprintf(w, "  %s: resident %s before, %s at most, %s at the end; view held at most %.0f jobs and %s; refused %s; evicted %s\n",
			d.Name, bench.HumanBytes(d.BaseKiB<<10), bench.HumanBytes(d.PeakKiB<<10), bench.HumanBytes(d.EndKiB<<10),
			d.HeldJobs, bench.HumanBytes(int64(d.HeldBytes)), byReason(d.Refused), byReason(d.Evicted)); err != nil {
			return err
		}
	}
	return nil
}
