package submitter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// An array with array.max_failures N stops at its N-th failed task, as a
// sweep whose code is broken should: this node withdraws the tasks still
// queued (nothing is owed for them: they never held a GPU), lets the
// tasks already running end as they will, as Snakemake without
// --keep-going and Nextflow's errorStrategy 'finish' do, and the array
// ends failed, its reason naming the count. e31 withdraw ARRAY stops the
// running ones too.

// stopLoop stops the arrays that failed too often: every heartbeat (at
// most a second), and at start for those a previous run left.
func (s *kit) stopLoop(ctx context.Context) {
	every := time.Second
	if s.cfg.Heartbeat > 0 && s.cfg.Heartbeat < every {
		every = s.cfg.Heartbeat
	}
	task.NowAndEvery(ctx, every, func(time.Time) {
		for _, j := range s.jobs.live() {
			var bounded bool
			j.view(func(r *Record) { bounded = r.isArray() && r.MaxFailures > 0 && r.Stopped == 0 })
			if bounded {
				if err := (arrayRun{s, j}).stopIfFailing(ctx); err != nil {
					s.log.Warn("stop an array at its max_failures", "array", j.id, "err", err)
				}
			}
		}
	})
}

// stopIfFailing stops the array once as many of its tasks have failed
// as its max_failures allows: its queued tasks withdrawn, one withdrawal
// announced for the array, which closes in every view the tasks not
// leased (a running task's lease is not touched by it), and the record
// marked stopped last, so that a restart in between stops it again.
// It stops an array once: tasks the user runs again later run.
func (a arrayRun) stopIfFailing(ctx context.Context) error {
	j, _ := a.view(0, true)
	var bound, stopped int
	a.p.view(func(r *Record) { bound, stopped = r.MaxFailures, r.Stopped })
	if j.Tasks == nil || bound == 0 || stopped > 0 || j.Tasks.Failed < bound {
		return nil
	}
	withdrawn := 0
	for _, tid := range a.taskIDs() {
		t := a.k.jobs.get(tid)
		if t == nil {
			continue
		}
		last, ok := a.lastOfTask(tid)
		if !ok || classOf(last.API()) != taskQueued {
			continue // running, or ended: left as it is
		}
		if err := a.k.withdrawLast(ctx, t, false); err != nil && !errors.Is(err, ErrConflict) {
			return fmt.Errorf("withdraw task %s: %w", tid, err)
		}
		withdrawn++
	}
	if _, err := a.k.d.Gossip.Publish(ctx, p2p.TopicJobs, wire.KindWithdrawal, wire.WithdrawalBody{Job: a.p.id}); err != nil {
		a.k.log.Warn("announce withdrawal", "array", a.p.id, "err", err)
	}
	err := a.p.update(func(r *Record) error {
		if r.Stopped > 0 {
			return errSkip
		}
		r.Stopped = j.Tasks.Failed
		return nil
	})
	if err != nil && !errors.Is(err, errSkip) {
		return err
	}
	a.k.log.Info("array stopped at its max_failures", "array", a.p.id, "failed", j.Tasks.Failed, "max_failures", bound, "withdrawn", withdrawn)
	return nil
}

// stoppedReason is the reason of an array stopped at its max_failures,
// once every task has ended.
func stoppedReason(r Record, c *api.TaskCounts) string {
	return fmt.Sprintf("stopped after %d failed tasks (max_failures %d): %d of %d tasks failed, %d withdrawn", r.Stopped, r.MaxFailures, c.Failed, c.Total, c.Withdrawn)
}
