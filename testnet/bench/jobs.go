package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
)

// TrivialJob is the job most daemon figures run: `true` in the sandbox on
// the host's system directories, one GPU, the declaration's defaults for
// the rest (1 CPU, 1 GiB).
func TrivialJob() (json.RawMessage, error) {
	return json.Marshal(market.NewDeclaration("bench", []string{"true"}, 1, market.Duration(60_000), nil))
}

// StepAt is when job j reached step name.
func StepAt(j api.Job, name api.StepName) (time.Time, bool) {
	for _, s := range j.Steps {
		if s.Step == name {
			return s.At, true
		}
	}
	return time.Time{}, false
}

// Ended is a finished job's timings, from the daemon's own step times.
type Ended struct {
	Job      api.Job
	Submit   time.Time
	Rent     time.Time // zero when it never rented
	Released time.Time
}

// EndedOf reads the timings of a job that has ended; a job without a
// submit or a release step is an error.
func EndedOf(j api.Job) (Ended, error) {
	e := Ended{Job: j}
	var ok bool
	if e.Submit, ok = StepAt(j, api.StepSubmit); !ok {
		return e, fmt.Errorf("job %s has no submit step", j.ID)
	}
	e.Rent, _ = StepAt(j, api.StepRent)
	if e.Released, ok = StepAt(j, api.StepRelease); !ok {
		return e, fmt.Errorf("job %s ended %s without a release step", j.ID, j.State)
	}
	return e, nil
}

// Completed fails unless the job completed: a figure of failed jobs would
// measure the failure path, not the job.
func (e Ended) Completed() error {
	if e.Job.Outcome != "completed" {
		return fmt.Errorf("job %s ended %s/%s: %s", e.Job.ID, e.Job.State, e.Job.Outcome, e.Job.Reason)
	}
	return nil
}

// ReleasedMs is each job's submit to release, in ms, where every job
// completed; else the first that did not is the error (Completed).
func ReleasedMs(es []Ended) ([]float64, error) {
	ms := make([]float64, 0, len(es))
	for _, e := range es {
		if err := e.Completed(); err != nil {
			return nil, err
		}
		ms = append(ms, Ms(e.Released.Sub(e.Submit)))
	}
	return ms, nil
}

// JobWaiter follows jobs submitted to one daemon until they end. Jobs end
// roughly in the order they were submitted, so each round asks about the
// oldest unfinished jobs only, and stops at the first still running: a
// deep queue costs the daemon a few requests a round, not one per job.
// One goroutine uses a JobWaiter at a time.
type JobWaiter struct {
	cl      *api.Client
	pending []string
}

// NewJobWaiter follows jobs on cl.
func NewJobWaiter(cl *api.Client) *JobWaiter { return &JobWaiter{cl: cl} }

// Client is the daemon the jobs were submitted to.
func (w *JobWaiter) Client() *api.Client { return w.cl }

// Add follows job id too.
func (w *JobWaiter) Add(id string) { w.pending = append(w.pending, id) }

// Pending lists the jobs not yet seen ended, oldest first.
func (w *JobWaiter) Pending() []string { return w.pending }

// poll asks about pending jobs from the oldest, returning those that ended,
// and looks at most ahead jobs past one still running (so that a job that
// ends out of order does not wait for the slow one before it).
func (w *JobWaiter) poll(ctx context.Context, ahead int) ([]Ended, error) {
	var out []Ended
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
		e, err := EndedOf(j)
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	w.pending = keep
	return out, nil
}

// Follow waits for each pending job to end in turn, the daemon answering
// at each change of the job (api.Client.WaitJob) rather than being asked on
// a timer: how a user's `e31 submit --wait` follows a job, down to asking
// again only after a pause when the daemon answers at once with nothing
// new. For one job in flight at a time, where polling would add up to a
// poll interval to each job's turn and cost the daemon a request per
// interval.
func (w *JobWaiter) Follow(ctx context.Context, limit time.Duration) ([]Ended, error) {
	const wait, pause = 30 * time.Second, 20 * time.Millisecond
	lctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var out []Ended
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
		e, err := EndedOf(j)
		if err != nil {
			return out, err
		}
		out = append(out, e)
		w.pending = w.pending[1:]
	}
	return out, nil
}

// WaitAll polls every waiter, every so often, until all their jobs ended
// or limit passes.
func WaitAll(ctx context.Context, ws []*JobWaiter, every, limit time.Duration) ([]Ended, error) {
	deadline := time.Now().Add(limit)
	var out []Ended
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

// Window is the span from the first submit to the last release of es, and
// the jobs per second it gives.
func Window(es []Ended) (time.Duration, float64) {
	if len(es) == 0 {
		return 0, 0
	}
	first, last := es[0].Submit, es[0].Released
	for _, e := range es[1:] {
		if e.Submit.Before(first) {
			first = e.Submit
		}
		if e.Released.After(last) {
			last = e.Released
		}
	}
	d := last.Sub(first)
	if d <= 0 {
		return d, 0
	}
	return d, float64(len(es)) / d.Seconds()
}

// jobPoll is how often WaitJob asks about its job; the latencies come from
// the daemon's own step times, so it only paces the run.
const jobPoll = 20 * time.Millisecond

// WaitJob polls one job until done says it is, fails, or limit passes.
func WaitJob(ctx context.Context, cl *api.Client, id string, limit time.Duration, done func(api.Job) (bool, error)) (api.Job, error) {
	deadline := time.Now().Add(limit)
	var last api.Job
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		j, err := cl.Job(rctx, id)
		cancel()
		if err != nil && ctx.Err() != nil {
			return last, ctx.Err()
		}
		if err == nil {
			last = j
			ok, err := done(j)
			if err != nil {
				return j, err
			}
			if ok {
				return j, nil
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return last, fmt.Errorf("timed out after %s: %w", limit, err)
			}
			return last, fmt.Errorf("timed out after %s in state %s (%s)", limit, last.State, last.Reason)
		}
		if err := task.Sleep(ctx, jobPoll); err != nil {
			return last, err
		}
	}
}
