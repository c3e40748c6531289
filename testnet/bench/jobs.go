package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
)

// Spread summarises a sample; percentiles are nearest-rank, so with fewer
// than 100 values p99 is the maximum.
type Spread struct {
	N   int     `json:"n"`
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// SpreadOf summarises v.
func SpreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(float64(len(s))*p+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Spread{N: len(s), Min: s[0], P50: rank(0.50), P99: rank(0.99), Max: s[len(s)-1]}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// trivialJob is the job every daemon figure runs: `true` in the sandbox on
// the host's system directories, one GPU, the declaration's defaults for
// the rest (1 CPU, 1 GiB).
func trivialJob() (json.RawMessage, error) {
	return json.Marshal(market.NewDeclaration("bench", []string{"true"}, 1, market.Duration(60_000), nil))
}

// stepAt is when job j reached step name.
func stepAt(j api.Job, name api.StepName) (time.Time, bool) {
	for _, s := range j.Steps {
		if s.Step == name {
			return s.At, true
		}
	}
	return time.Time{}, false
}

// ended is a finished job's timings, from the daemon's own step times.
type ended struct {
	job      api.Job
	submit   time.Time
	rent     time.Time // zero when it never rented
	released time.Time
}

func endedOf(j api.Job) (ended, error) {
	e := ended{job: j}
	var ok bool
	if e.submit, ok = stepAt(j, api.StepSubmit); !ok {
		return e, fmt.Errorf("job %s has no submit step", j.ID)
	}
	e.rent, _ = stepAt(j, api.StepRent)
	if e.released, ok = stepAt(j, api.StepRelease); !ok {
		return e, fmt.Errorf("job %s ended %s without a release step", j.ID, j.State)
	}
	return e, nil
}

// completed fails unless the job completed: a figure of failed jobs would
// measure the failure path, not the job.
func (e ended) completed() error {
	if e.job.Outcome != "completed" {
		return fmt.Errorf("job %s ended %s/%s: %s", e.job.ID, e.job.State, e.job.Outcome, e.job.Reason)
	}
	return nil
}

// jobWaiter follows jobs submitted to one daemon until they end. Jobs end
// roughly in the order they were submitted, so each round asks about the
// oldest unfinished jobs only, and stops at the first still running: a
// deep queue costs the daemon a few requests a round, not one per job.
type jobWaiter struct {
	cl      *api.Client
	pending []string
}

func (w *jobWaiter) add(id string) { w.pending = append(w.pending, id) }

// poll asks about pending jobs from the oldest, returning those that ended,
// and looks at most ahead jobs past one still running (so that a job that
// ends out of order does not wait for the slow one before it).
func (w *jobWaiter) poll(ctx context.Context, ahead int) ([]ended, error) {
	var out []ended
	keep := w.pending[:0:0]
	running := 0
	for i, id := range w.pending {
		if running > ahead {
			keep = append(keep, w.pending[i:]...)
			break
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		j, err := w.cl.Job(rctx, id)
		cancel()
		if err != nil {
			return out, fmt.Errorf("job %s: %w", id, err)
		}
		if !j.State.Terminal() {
			keep = append(keep, id)
			running++
			continue
		}
		e, err := endedOf(j)
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	w.pending = keep
	return out, nil
}

// follow waits for each pending job to end in turn, the daemon answering
// at each change of the job (api.Client.WaitJob) rather than being asked on
// a timer: how a user's `e31 submit --wait` follows a job, down to asking
// again only after a pause when the daemon answers at once with nothing
// new. For one job in flight at a time, where polling would add up to a
// poll interval to each job's turn and cost the daemon a request per
// interval.
func (w *jobWaiter) follow(ctx context.Context, limit time.Duration) ([]ended, error) {
	const wait, pause = 30 * time.Second, 20 * time.Millisecond
	lctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var out []ended
	for len(w.pending) > 0 {
		id := w.pending[0]
		j, err := w.cl.Job(lctx, id)
		for err == nil && !j.State.Terminal() {
			j, err = w.cl.NextJob(lctx, j, wait, pause)
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if lctx.Err() != nil {
			return out, fmt.Errorf("job %s had not ended %s after its submit", id, limit)
		}
		if err != nil {
			return out, fmt.Errorf("job %s: %w", id, err)
		}
		e, err := endedOf(j)
		if err != nil {
			return out, err
		}
		out = append(out, e)
		w.pending = w.pending[1:]
	}
	return out, nil
}

// waitAll polls every waiter until all their jobs ended or limit passes.
func waitAll(ctx context.Context, ws []*jobWaiter, every, limit time.Duration) ([]ended, error) {
	deadline := time.Now().Add(limit)
	var out []ended
	for {
		left := 0
		for _, w := range ws {
			got, err := w.poll(ctx, 8)
			out = append(out, got...)
			if err != nil {
				return out, err
			}
			left += len(w.pending)
		}
		if left == 0 {
			return out, nil
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("%d jobs had not ended %s after the last submit", left, limit)
		}
		if err := task.Sleep(ctx, every); err != nil {
			return out, err
		}
	}
}

// window is the span from the first submit to the last release of es, and
// the jobs per second it gives.
func window(es []ended) (time.Duration, float64) {
	if len(es) == 0 {
		return 0, 0
	}
	first, last := es[0].submit, es[0].released
	for _, e := range es[1:] {
		if e.submit.Before(first) {
			first = e.submit
		}
		if e.released.After(last) {
			last = e.released
		}
	}
	d := last.Sub(first)
	if d <= 0 {
		return d, 0
	}
	return d, float64(len(es)) / d.Seconds()
}
