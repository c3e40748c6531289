package submitter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
)

// An array with array.max_failures N stops at its N-th failed task, as a
// sweep whose code is broken should: this node withdraws the tasks still
// queued (nothing is owed for them: they never held a GPU), lets the
// tasks already running end as they will, as Snakemake without
// --keep-going and Nextflow's errorStrategy 'finish' do, and the array
// ends failed, its reason naming the count. e31 withdraw ARRAY stops the
// running ones too.

// stopLoop watches the arrays with a max_failures, each in a goroutine
// of its own woken at every change of its tasks, so that the stop
// follows the failure at once; every heartbeat (at most a second), and
// at start, it looks for arrays not watched yet.
func (s *kit) stopLoop(ctx context.Context) {
	every := time.Second
	if s.cfg.Heartbeat > 0 && s.cfg.Heartbeat < every {
		every = s.cfg.Heartbeat
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	watching := map[string]bool{}
	over := make(chan string)
	for {
		for _, j := range s.jobs.live() {
			var bounded bool
			j.view(func(r *Record) { bounded = r.isArray() && r.MaxFailures > 0 && !r.StopDone })
			if bounded && !watching[j.id] {
				watching[j.id] = true
				a := arrayRun{s, j}
				wg.Go(func() {
					a.watchFailures(ctx)
					select {
					case over <- a.p.id:
					case <-ctx.Done():
					}
				})
			}
		}
		t := time.NewTimer(every)
	wait:
		for {
			select {
			case id := <-over:
				delete(watching, id)
			case <-t.C:
				break wait
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

// watchFailures stops the array when its failures reach its bound,
// looking at each change of its tasks, until it is stopped or has ended.
func (a arrayRun) watchFailures(ctx context.Context) {
	var seen uint64
	for ctx.Err() == nil {
		j, wake := a.view(seen, false)
		stopped, err := a.stopIfFailing(ctx)
		if err != nil {
			a.k.log.Warn("stop an array at its max_failures", "array", a.p.id, "err", err)
		}
		if stopped || j.State.Terminal() {
			return
		}
		if wake == nil {
			seen = j.Version
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
		}
	}
}

// stopIfFailing stops the array once as many of its tasks have failed
// as its max_failures allows, and reports whether it is stopped: the
// record marked stopped first, so that the array's view names the stop
// from then on, then its queued tasks withdrawn (not those being leased,
// which run on as running ones do), one withdrawal announced for the
// array, which closes in every view the tasks not leased (a running
// task's lease is not touched by it), and the record marked done last,
// so that a restart in between finishes the stop. It stops an array
// once: tasks the user runs again later run.
func (a arrayRun) stopIfFailing(ctx context.Context) (bool, error) {
	j, _ := a.view(0, true)
	var bound, stopped int
	var done bool
	a.p.view(func(r *Record) { bound, stopped, done = r.MaxFailures, r.Stopped, r.StopDone })
	switch {
	case done:
		return true, nil
	case stopped == 0 && (j.Tasks == nil || bound == 0 || j.Tasks.Failed < bound):
		return false, nil
	case stopped == 0:
		err := a.p.update(func(r *Record) error {
			if r.Stopped > 0 {
				return errSkip
			}
			r.Stopped = j.Tasks.Failed
			return nil
		})
		if err != nil && !errors.Is(err, errSkip) {
			return false, err
		}
	}
	withdrawn := 0
	for _, tid := range a.taskIDs() {
		t := a.k.jobs.get(tid)
		if t == nil {
			continue
		}
		last, ok := a.lastOfTask(tid)
		if !ok || last.State != api.JobQueued {
			continue // being leased, running, or ended: left as it is
		}
		if err := a.k.withdrawLast(ctx, t, false); err != nil && !errors.Is(err, ErrConflict) {
			return false, fmt.Errorf("withdraw task %s: %w", tid, err)
		}
		withdrawn++
	}
	if err := a.k.publishJob(ctx, marketOf(a.p), wire.KindWithdrawal, wire.WithdrawalBody{Job: a.p.id}); err != nil {
		a.k.log.Warn("announce withdrawal", "array", a.p.id, "err", err)
	}
	if err := a.p.update(func(r *Record) error { r.StopDone = true; return nil }); err != nil {
		return false, err
	}
	a.k.log.Info("array stopped at its max_failures", "array", a.p.id, "failed", j.Tasks.Failed, "max_failures", bound, "withdrawn", withdrawn)
	return true, nil
}

// stoppedReason is the reason of an array stopped at its max_failures,
// once every task has ended.
func stoppedReason(r Record, c *api.TaskCounts) string {
	return fmt.Sprintf("stopped at its max_failures, %d failed tasks: %d of %d tasks failed, %d withdrawn", r.MaxFailures, c.Failed, c.Total, c.Withdrawn)
}
