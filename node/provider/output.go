package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// output is the lease's output step: the declared output path plus the
// logs, as one DAG, imported and handed to the submitter; ran is false for
// a job that never ran, which leaves nothing to import. The output
// request, or else the final receipt, tells the submitter of the step; an
// import that takes a while is told of on its own, so the submitter's
// status does not lag behind it.
func (lr *leaseRunner) output(res exec.Result, work string, ran bool) {
	rec := lr.snapshot()
	t := rec.Lease.Terms
	log := lr.log.With("lease", t.ID, "job", t.Job)
	now := time.Now()
	lr.change(func(r *Record) { r.State, r.OutputStart = Output, now })
	if !ran {
		return
	}
	slowImport := time.AfterFunc(outputEventAfter, func() {
		lr.sendEvent(wire.EventRequest{Lease: t.ID, Job: t.Job, Step: api.StepOutput, At: now.UnixMilli()})
	})
	err := lr.handle("importing the output", func() error {
		return lr.importOutput(lr.hard, work, res, rec.Declaration.Request.DiskBytes())
	})
	slowImport.Stop()
	lr.disk.imported(t.ID)
	if err != nil {
		log.Warn("output not imported", "err", err)
		lr.change(func(r *Record) {
			if r.Outcome != ledger.OutcomeCompleted {
				return
			}
			e := ledger.Ending{Outcome: ledger.OutcomeOutputLost, Attribution: ledger.AttributionProvider, Reason: err.Error(), ExitCode: r.ExitCode}
			if refusedContent(err) {
				// The job left what no output may hold.
				e.Outcome, e.Attribution = ledger.OutcomeFailed, ledger.AttributionJob
			}
			r.setEnding(e)
		})
	} else if err := lr.deliverOutput(lr.ctx, outputPatience(lr.cfg.OutputTimeout, rec.heldUntilMost(), time.Now())); err != nil {
		// The submitter is away: the GPUs go back now and the output
		// waits, pinned, for it to return (see settle).
		log.Info("output waits for the submitter", "err", err)
	}
}

// deliverOutput hands the output's CID to the submitter, who fetches and
// checks it before it answers, retrying for up to patience. With no
// patience it tries once, for at most the output timeout.
func (lr *leaseRunner) deliverOutput(ctx context.Context, patience time.Duration) error {
	rec := lr.snapshot()
	t := rec.Lease.Terms
	if rec.Output == "" || !rec.OutputAcked.IsZero() {
		return nil
	}
	// With patience, every attempt ends by the deadline too: the GPUs are
	// held only that long. Without, one attempt may take the whole output
	// timeout, since the submitter answers only once it has the output.
	deadline := time.Now().Add(patience)
	attemptEnd := deadline
	if patience == 0 {
		attemptEnd = time.Now().Add(lr.cfg.OutputTimeout)
	}
	err := task.Retry(ctx, task.Backoff{First: firstRetry, Most: maxRetryOutput}, deadline, func() error {
		cctx, cancel := context.WithDeadline(ctx, attemptEnd)
		defer cancel()
		return lr.d.Calls.Call(cctx, lr.submitter, wire.ProtoOutput, wire.OutputRequest{Lease: t.ID, Job: t.Job, Output: rec.Output, Skipped: rec.Skipped, KeptUntil: keptUntil(rec, lr.cfg.Retention), Steps: rec.steps()}, nil)
	})
	if err != nil {
		return fmt.Errorf("hand output %s to the submitter: %w", rec.Output, err)
	}
	now := time.Now()
	lr.noteRelay()
	return lr.update(func(r *Record) { r.OutputAcked = now })
}

// noteRelay records, when this node reaches the submitter through a relay
// that carries data, that relay: the lease's data moves through it, and
// the final receipt says so.
func (lr *leaseRunner) noteRelay() {
	if lr.d.Path == nil {
		return
	}
	if path, relay := lr.d.Path(lr.submitter); path == p2p.PathRelayedData {
		lr.change(func(r *Record) { r.Relay = relay })
	}
}

// keptUntil is when the provider will release a lease's content: the
// retention window after release, or after now for a lease still running.
func keptUntil(rec Record, retention time.Duration) int64 {
	end := rec.End
	if end.IsZero() {
		end = time.Now()
	}
	return end.Add(retention).UnixMilli()
}

// outputEventAfter is how long an output import may take before the
// output step is told to the submitter on its own rather than with the
// output request that follows the import.
const outputEventAfter = time.Second

// sendEvent tells the submitter of a step, in the background so that an
// absent submitter does not slow the lease; best effort, the receipts carry
// the phases anyway.
func (lr *leaseRunner) sendEvent(ev wire.EventRequest) {
	lr.tasks.Go(func() {
		ctx, cancel := context.WithTimeout(lr.ctx, lr.cfg.EventTimeout)
		defer cancel()
		if err := lr.d.Calls.Call(ctx, lr.submitter, wire.ProtoEvent, ev, nil); err != nil {
			lr.log.Debug("event not delivered", "lease", ev.Lease, "step", ev.Step, "err", err)
		}
	})
}

// confirmTask tells a task's submitter that its lease is recorded here, a
// few times should it not answer at once: the submitter announces a
// task's lease itself, and puts back in the queue a task whose provider
// never confirmed it.
func (lr *leaseRunner) confirmTask(t wire.LeaseTerms) {
	ev := wire.EventRequest{Lease: t.ID, Job: t.Job, Step: api.StepRent, At: time.Now().UnixMilli()}
	lr.tasks.Go(func() {
		err := task.Retry(lr.ctx, task.Backoff{First: firstRetry, Most: maxRetryOutput}, time.Now().Add(lr.cfg.ProposalTTL), func() error {
			ctx, cancel := context.WithTimeout(lr.ctx, lr.cfg.EventTimeout)
			defer cancel()
			return lr.d.Calls.Call(ctx, lr.submitter, wire.ProtoEvent, ev, nil)
		})
		if err != nil {
			lr.log.Warn("task's lease not confirmed to its submitter", "lease", t.ID, "err", err)
		}
	})
}

// maxSkipped bounds how many left-out entries are named to the submitter.
const maxSkipped = 20

// importOutput imports the output folder and the logs as one DAG, pinned
// for the submitter to fetch.
func (lr *leaseRunner) importOutput(ctx context.Context, dir string, res exec.Result, diskBytes uint64) error {
	id := lr.snapshot().ID()
	result := filepath.Join(dir, "result")
	if err := os.RemoveAll(result); err != nil {
		return err
	}
	if err := os.MkdirAll(result, 0o755); err != nil {
		return err
	}
	out := filepath.Join(dir, "out")
	if _, err := os.Stat(out); err == nil {
		if err := os.Rename(out, filepath.Join(result, "out")); err != nil {
			return err
		}
	} else if err := os.Mkdir(filepath.Join(result, "out"), 0o755); err != nil {
		return err
	}
	for _, lg := range []struct{ src, name string }{{res.Stdout, "stdout.log"}, {res.Stderr, "stderr.log"}} {
		b, err := os.ReadFile(lg.src)
		if err != nil {
			b = nil // a run that never started has no logs
		}
		if err := os.WriteFile(filepath.Join(result, lg.name), b, 0o644); err != nil {
			return err
		}
	}
	// What the job left that cannot be stored, or must not leave this
	// machine (a link pointing out of the output), is left out and named in
	// the job's status; it never costs the files that were fine.
	var skipped []string
	skip := func(path, reason string) {
		if len(skipped) < maxSkipped {
			skipped = append(skipped, content.ShowPath(path)+": "+reason)
		}
	}
	c, _, err := lr.d.Store.Import(ctx, result, content.ImportOptions{Pin: pinOutput(id), SkipUnsupported: true, OnSkip: skip, Limits: outputLimits(lr.cfg.Limits, diskBytes)})
	if err != nil {
		return fmt.Errorf("output: %w", namedCap(err))
	}
	lr.d.Access.Allow(lr.submitter, c)
	return lr.update(func(r *Record) { r.Output, r.Skipped = c.String(), skipped })
}

// outputPatience is how long the GPUs wait for the submitter to take the
// output: the output timeout, but never past the held time the lease
// allows (most; zero for none), after which the output waits unheld.
func outputPatience(timeout time.Duration, most, now time.Time) time.Duration {
	if most.IsZero() {
		return timeout
	}
	return max(min(timeout, most.Sub(now)), time.Millisecond) // 0 would mean one try of the whole timeout
}
