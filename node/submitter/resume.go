package submitter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// A chain goes on by a new attempt: by hand (e31 resume), or by itself
// when its last attempt ended as its declaration asks to go on from
// (Record.autoContinues), the claim on disk first (claimResume). Each
// resumption is made under the kit's resuming lock, so that an attempt is
// continued once.

// errNotResumable: the attempt was resumed already, or is not to be.
var errNotResumable = errors.New("not to be resumed")

// resumeChain submits the next attempt of a job: its last attempt's (with
// exact, that of the attempt named, which must still be the last),
// continued from its last checkpoint or, with fromStart, run again. It
// returns the job, under the ID it was submitted with.
func (k *kit) resumeChain(ctx context.Context, id string, fromStart, exact bool) (api.Job, error) {
	return k.continueChain(ctx, id, exact, func(of *jobTracker) (market.Declaration, error) { return of.resumption(fromStart) })
}

// continueChain submits the next attempt of a job, as resumeChain, with
// the declaration next builds from the attempt it continues.
func (k *kit) continueChain(ctx context.Context, id string, exact bool, next func(of *jobTracker) (market.Declaration, error)) (api.Job, error) {
	k.resuming.Lock()
	defer k.resuming.Unlock()
	of := k.jobs.get(id)
	if of == nil {
		return api.Job{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if exact {
		var failed string
		of.view(func(r *Record) { failed = r.ResumeFailed })
		if failed != "" {
			return api.Job{}, fmt.Errorf("attempt %s: %w: %s", id, errNotResumable, failed)
		}
	}
	if last := k.lastAttempt(of); last != of {
		if exact {
			return api.Job{}, fmt.Errorf("attempt %s: %w as %s", id, errNotResumable, last.id)
		}
		of = last
	}
	decl, err := next(of)
	if err != nil {
		return api.Job{}, err
	}
	parent := of.snapshot()
	attempt, err := k.in.submit(ctx, decl, &parent, nil, nil)
	if err != nil {
		return api.Job{}, err
	}
	// The new attempt is on disk (submit writes it before it broadcasts);
	// a stop before this link is mended at the next start (linkAttempts).
	of.change(func(r *Record) error { r.Next = attempt.ID; return nil })
	out, _, err := k.view(parent.root(), 0, true)
	return out, err
}

// withdrawLast withdraws the last attempt of the job first is the first
// attempt of; one lost with its provider and due to be resumed is not
// resumed. Without announce, a task's withdrawal is left to its array's
// (a task that is its own first attempt; a later attempt is a job of its
// own, announced apart).
func (k *kit) withdrawLast(ctx context.Context, first *jobTracker, announce bool) error {
	// Held throughout: a resumption or a held job's release does not slip
	// in between finding the last attempt and withdrawing it.
	k.resuming.Lock()
	defer k.resuming.Unlock()
	last := k.lastAttempt(first)
	err := last.update(func(r *Record) error {
		if !r.resumeDue() {
			return errSkip
		}
		r.ResumeFailed = "withdrawn before it was resumed"
		r.Reason += "; withdrawn before it was resumed"
		return nil
	})
	if err == nil {
		return nil
	}
	if err != errSkip {
		return err
	}
	_, err = last.withdraw(ctx, announce || last != first)
	return err
}

// autoResume resubmits a job lost with its provider, or failed by its own
// fault, from its last checkpoint (or from the start, if none was taken),
// when its declaration asks for it (resume: auto, request.retries) and
// those are not used up.
func (k *kit) autoResume(ctx context.Context, id string) {
	j := k.jobs.get(id)
	if j == nil || !j.claimResume() {
		return
	}
	k.resumeAttempt(ctx, id)
}

// resumeAttempt submits the automatic resumption of an attempt whose claim
// is on disk, unless it was resumed already. A resumption that cannot be
// submitted is recorded on the attempt: the job ends there, and the reason
// says so.
func (k *kit) resumeAttempt(ctx context.Context, id string) {
	// A retry of a job that declares no checkpoints runs it again from
	// the beginning.
	fromStart := false
	if j := k.jobs.get(id); j != nil {
		j.view(func(r *Record) { fromStart = r.Declaration.Output.Checkpoints == nil })
	}
	r, err := k.resumeChain(ctx, id, fromStart, true)
	switch {
	case errors.Is(err, errNotResumable):
		return
	case err != nil && ctx.Err() != nil:
		// Cut by this node's own stop (a pin, an import, the
		// announcement): no fault of the job's. The claim stays on disk,
		// and the next start submits the resumption (resumeDueAtStart).
		k.log.Info("automatic resume cut by the stop; the next start makes it", "job", id, "err", err)
		return
	case err != nil:
		k.log.Warn("automatic resume", "job", id, "err", err)
		if j := k.jobs.get(id); j != nil {
			j.change(func(r *Record) error {
				r.ResumeFailed = err.Error()
				r.Reason += "; not resumed: " + err.Error()
				return nil
			})
		}
		return
	}
	if n := len(r.Attempts); n >= 2 {
		k.log.Info("went on by itself", "job", r.ID, "after", r.Attempts[n-2].Outcome, "attempt", n, "as", r.Attempts[n-1].ID)
	}
}

// resumeDueAtStart submits the automatic resumptions that a previous run
// owed and did not submit: it stopped between an attempt's loss and its
// resumption (linkAttempts found no attempt that continues it).
func (k *kit) resumeDueAtStart(ctx context.Context) {
	for id, j := range k.jobs.live() {
		var due, claimed bool
		j.view(func(r *Record) { due, claimed = r.resumeDue(), r.Resumed })
		switch {
		case !due:
		case claimed:
			k.resumeAttempt(ctx, id)
		default:
			k.autoResume(ctx, id)
		}
	}
}

// resumption builds the declaration of a job that continues this one from
// its last checkpoint: the same work, with the checkpoint laid out at the
// checkpoint path. With fromStart it builds the one that runs it again from
// the beginning instead: its declaration as first submitted.
func (j *jobTracker) resumption(fromStart bool) (market.Declaration, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	of, r := j.id, j.rec
	if !r.terminal() {
		return market.Declaration{}, conflict(fmt.Errorf("job %s is still %s; withdraw it first", of, r.State))
	}
	if fromStart {
		return fromTheStart(r.Declaration), nil
	}
	cp := r.Declaration.Output.Checkpoints
	if cp == nil {
		return market.Declaration{}, invalid(fmt.Errorf("job %s declares no checkpoints to resume from; e31 resume --from-start %s runs it again from the beginning", of, of))
	}
	d := r.Declaration
	if r.Checkpoint == "" && cp.From != "" {
		// A resumption lost before a checkpoint of its own: the next
		// starts from the same one.
		return d, d.Validate()
	}
	if r.Checkpoint == "" {
		if !r.Resumed {
			return market.Declaration{}, conflict(fmt.Errorf("job %s has no checkpoint yet; e31 resume --from-start %s runs it again from the beginning", of, of))
		}
		// Lost before its first checkpoint: an automatic resume starts it
		// again from the beginning.
		return d, d.Validate()
	}
	// The resumed run finds its last checkpoint at its own checkpoint
	// path, writable, as it left it: the provider lays it out there before
	// the run (market.Checkpoints.From). E31_RESUME_FROM names the path too,
	// for a program that wants to know it was resumed.
	d = fromTheStart(d)
	d.Output.Checkpoints.From = r.Checkpoint
	d.Request.Limit = leftToRun(d.Request.Limit, r.ranToCheckpoint(), cp.Every)
	d.Work.Env = maps.Clone(d.Work.Env)
	if d.Work.Env == nil {
		d.Work.Env = map[string]string{}
	}
	d.Work.Env["E31_RESUME_FROM"] = cp.Path
	return d, d.Validate()
}

// fromTheStart is a job's declaration without what resuming it added: the
// checkpoint to start from and E31_RESUME_FROM, and the input beside the
// checkpoint path that older versions staged it as. The job's own
// variables and inputs stay. Nothing the result holds is shared with d but
// what neither changes.
func fromTheStart(d market.Declaration) market.Declaration {
	if cp := d.Output.Checkpoints; cp != nil {
		c := *cp
		c.From = ""
		d.Output.Checkpoints = &c
		d.Data = slices.DeleteFunc(slices.Clone(d.Data), func(in market.Input) bool { return in.Mount == cp.Path+"-resume" })
		if _, ok := d.Work.Env["E31_RESUME_FROM"]; ok {
			d.Work.Env = maps.Clone(d.Work.Env)
			delete(d.Work.Env, "E31_RESUME_FROM")
		}
	}
	return d
}

// claimResume records, once, that the job lost with its provider is
// resumed, when its declaration asks for it and its resumes are not used
// up, and reports whether the caller is to submit the resumption: only
// once the claim is on disk, since resuming before could resume twice
// after a restart.
func (j *jobTracker) claimResume() bool {
	err := j.update(func(r *Record) error {
		if !r.terminal() || r.Resumed || !r.autoContinues() {
			return errSkip
		}
		r.Resumed = true
		return nil
	})
	if err == errSkip {
		return false
	}
	if err != nil {
		// Not on disk: resuming now could resume twice after a restart.
		j.log.Warn("automatic resume not recorded; not resuming", "job", j.id, "err", err)
		j.change(func(r *Record) error {
			r.ResumeFailed = "the resumption could not be recorded: " + err.Error()
			return nil
		})
		return false
	}
	return true
}

// minResumeLimit is the least limit leftToRun gives a resumption: the
// time to stage, start and get somewhere.
const minResumeLimit = 10 * market.Minute

// leftToRun is the limit of a resumption: the attempt's own limit less
// what it ran up to the checkpoint the resumption starts from, since each
// attempt's limit is already what its predecessors left it; at least two
// checkpoint intervals and minResumeLimit, and never more than the limit.
// A resumed job so asks only for the time it has left, and fits windows
// that its whole limit would not. The limit is the declaration's own
// field, which every peer reads, and the lease's, which bounds its
// receipts (ledger.BoundRule).
func leftToRun(limit, ran, every market.Duration) market.Duration {
	floor := min(limit, max(minResumeLimit, 2*every))
	return max(limit-max(ran, 0), floor)
}

// ranToCheckpoint is how long the attempt ran before the checkpoint it
// took last, by the provider's clock as its events said; 0 when the
// checkpoint is not its own (it came from an earlier attempt) or either
// instant is unknown.
func (r *Record) ranToCheckpoint() market.Duration {
	run := r.stepAt(api.StepRun)
	if r.Lease == nil || r.CheckpointLease != r.Lease.Terms.ID || run.IsZero() || !r.CheckpointAt.After(run) {
		return 0
	}
	return market.Duration(r.CheckpointAt.Sub(run).Milliseconds())
}
