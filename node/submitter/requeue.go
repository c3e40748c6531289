package submitter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// What becomes of a job whose provider failed it (avoid.go finds them):
// the provider is named in the job's avoid list for a while, the lease is
// given up (released as never run, or ended on this side when its
// receipts are withheld), and the job goes back to the queue, announced
// again with its avoid list.

// avoid adds provider to the queued job's avoid list, with reason as what
// the job waits on, and re-announces the job at once. lease, when set,
// must still be the job's lease: the job then goes back to the queue.
func (j failureWatch) avoid(ctx context.Context, provider, lease, reason string) bool {
	return j.requeue(ctx, provider, lease, reason, true)
}

// requeue is avoid, avoiding the provider only when avoid is set: a gang
// given up whole puts back parts whose providers did nothing wrong.
func (j failureWatch) requeue(ctx context.Context, provider, lease, reason string, avoidIt bool) bool {
	self := j.d.Self.String()
	now := time.Now()
	var env []byte
	var avoid []wire.Avoided
	err := j.apply(func(cur *jobTracker) error {
		r := cur.rec
		switch {
		case lease != "":
			if r.Lease == nil || r.Lease.Terms.ID != lease || r.terminal() {
				return errSkip
			}
			r.State, r.Lease, r.LastReceipt = api.JobQueued, nil, time.Time{}
			r.Steps = slices.DeleteFunc(r.Steps, func(st api.Step) bool { return st.Step != api.StepSubmit })
		case r.State != api.JobQueued:
			return errSkip
		}
		r.Wait = reason + "; back in the queue"
		if avoidIt && provider != self {
			if !slices.Contains(r.Avoid, provider) {
				r.Avoid = append(r.Avoid, provider)
			}
			if r.Avoided == nil {
				r.Avoided = map[string]int{}
			}
			if r.AvoidUntil == nil {
				r.AvoidUntil = map[string]time.Time{}
			}
			delete(cur.notes, provider)
			r.Avoided[provider]++
			until := now.Add(j.cfg.avoidFor(r.Avoided[provider]))
			r.AvoidUntil[provider] = until
			r.Wait += fmt.Sprintf(", avoiding it until %s", until.Format(time.TimeOnly))
		}
		env, avoid = r.Envelope, r.avoiding(now, j.cfg.avoidFor(1))
		return nil
	})
	if err == errSkip {
		return false
	}
	if err != nil {
		j.log.Warn("avoid provider: record not saved", "job", j.id, "provider", provider, "err", err)
	}
	switch {
	case !avoidIt:
		j.log.Info("back in the queue", "job", j.id, "provider", provider, "reason", reason)
	case provider == self:
		j.log.Warn("this node's own provider failed the job: back in the queue", "job", j.id, "reason", reason)
	default:
		j.log.Warn("provider failed the job: avoiding it", "job", j.id, "provider", provider, "reason", reason)
	}
	announceAvoiding(ctx, j.parts, marketOf(j.jobTracker), j.id, env, avoid)
	return true
}

// avoiding is the record's avoid list, each with the time it lifts; one
// saved without (by an older version) lifts first after now.
func (r *Record) avoiding(now time.Time, first time.Duration) []wire.Avoided {
	out := make([]wire.Avoided, 0, len(r.Avoid))
	for _, p := range r.Avoid {
		until, ok := r.AvoidUntil[p]
		if !ok {
			until = now.Add(first)
		}
		out = append(out, wire.Avoided{Provider: p, Until: until})
	}
	return out
}

// liftAvoids ends the job's avoids whose time has come (and gives one
// saved without a time its first), and, where one ended on a queued job,
// re-announces it with what is left: every peer's Match may place it on
// that provider again.
func (j failureWatch) liftAvoids(ctx context.Context, now time.Time) {
	var env []byte
	var avoid []wire.Avoided
	var lifted []string
	queued := false
	err := j.update(func(r *Record) error {
		if len(r.Avoid) == 0 || r.terminal() {
			return errSkip
		}
		changed := false
		keep := r.Avoid[:0]
		for _, p := range r.Avoid {
			until, ok := r.AvoidUntil[p]
			switch {
			case !ok:
				if r.AvoidUntil == nil {
					r.AvoidUntil = map[string]time.Time{}
				}
				r.AvoidUntil[p], changed = now.Add(j.cfg.avoidFor(1)), true
			case !now.Before(until):
				delete(r.AvoidUntil, p)
				lifted, changed = append(lifted, p), true
				continue
			}
			keep = append(keep, p)
		}
		if !changed {
			return errSkip
		}
		r.Avoid = slices.Clip(keep)
		if len(r.Avoid) == 0 {
			r.Avoid = nil
		}
		queued = r.State == api.JobQueued && !r.placeholder() && !r.isArray()
		if len(lifted) > 0 && queued {
			r.Wait = fmt.Sprintf("the avoid of %s lifted; back in the queue for it", strings.Join(lifted, ", "))
		}
		env, avoid = r.Envelope, r.avoiding(now, j.cfg.avoidFor(1))
		return nil
	})
	if err == errSkip {
		return
	}
	if err != nil {
		j.log.Warn("lift avoids: record not saved", "job", j.id, "err", err)
	}
	if len(lifted) == 0 {
		return
	}
	j.log.Info("avoid lifted", "job", j.id, "providers", lifted)
	if queued {
		announceAvoiding(ctx, j.parts, marketOf(j.jobTracker), j.id, env, avoid)
	}
}

// announceAvoiding re-announces one queued job with its avoid list. Should
// peers refuse the list, the job is announced without it: a job not
// re-announced leaves every view, and would wait for nothing.
func announceAvoiding(ctx context.Context, p *parts, m *p2p.Shard, job string, env []byte, avoid []wire.Avoided) {
	// A record saved by a version that could name this node keeps its
	// name; peers refuse a list naming the signer.
	avoid = slices.DeleteFunc(avoid, func(q wire.Avoided) bool { return q.Provider == p.d.Self.String() })
	err := p.publishJob(ctx, m, wire.KindRequeue, wire.RequeueAvoiding(job, env, avoid))
	if err == nil || ctx.Err() != nil {
		return
	}
	p.log.Warn("re-announce job with its avoid list: announcing it without", "err", err)
	if err := p.publishJob(ctx, m, wire.KindRequeue, wire.RequeueBody{Declarations: [][]byte{env}}); err != nil && ctx.Err() == nil {
		p.log.Warn("re-announce job", "err", err)
	}
}

// giveUpLease releases a lease of the job that never reached its run, as
// never run, and puts the job back in the queue avoiding its provider. This
// side's one-sided record holds what was countersigned (nothing, since no
// receipt came), with the lease as evidence.
func (j failureWatch) giveUpLease(ctx context.Context, leaseID, reason string, now time.Time) {
	j.releaseUnrun(ctx, leaseID, reason, now, true)
}

// releaseUnrun is giveUpLease, avoiding the provider only when avoid is
// set.
func (j *jobTracker) releaseUnrun(ctx context.Context, leaseID, reason string, now time.Time, avoid bool) {
	j.mu.Lock()
	r := j.rec
	if r.Lease == nil || r.Lease.Terms.ID != leaseID || r.terminal() {
		j.mu.Unlock()
		return
	}
	lease := *r.Lease
	rent := r.stepAt(api.StepRent)
	j.mu.Unlock()
	t := lease.Terms
	es, err := j.d.Ledger.ByLease(ctx, t.ID)
	if err != nil {
		j.log.Warn("receipts of a lease never run", "lease", t.ID, "err", err)
	}
	lost := ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, Reason: reason}
	(lossWatch{j}).recordOneSided(ctx, lease, es, rent, rent, lost)
	var heldMs int64
	if len(es) > 0 {
		heldMs = es[len(es)-1].Receipt.Held().Milliseconds()
	}
	// Released first, so that peers hold the job open to the announcement
	// that follows (view.Market.ReleaseLease).
	body := wire.ReleaseBody{Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: lost.Outcome, Attribution: lost.Attribution, HeldMs: heldMs, At: now.UnixMilli(), Requeued: true}
	if err := j.publishJob(ctx, marketOf(j), wire.KindRelease, body); err != nil {
		j.log.Warn("announce release of a lease never run", "lease", t.ID, "err", err)
	}
	(failureWatch{j}).requeue(ctx, t.Provider, t.ID, reason, avoid)
}

// endWithheld ends, on this side, a lease of the job whose provider
// withholds its receipts. This side's record holds only what it
// countersigned. A job whose output came back is complete; one without goes
// back to the queue avoiding the provider.
func (j failureWatch) endWithheld(ctx context.Context, leaseID, reason string, now time.Time) {
	j.mu.Lock()
	r := j.rec
	if r.Lease == nil || r.Lease.Terms.ID != leaseID || r.terminal() {
		j.mu.Unlock()
		return
	}
	lease, output := *r.Lease, r.Output
	from := r.stepAt(api.StepRent)
	j.mu.Unlock()
	if output == "" {
		j.giveUpLease(ctx, leaseID, reason, now)
		return
	}
	t := lease.Terms
	es, err := j.d.Ledger.ByLease(ctx, t.ID)
	if err != nil {
		j.log.Warn("receipts of a lease whose receipts are withheld", "lease", t.ID, "err", err)
	}
	// Until the start: the one-sided record claims no time beyond the last
	// receipt both signed (recordOneSided takes that one's end).
	(lossWatch{j.jobTracker}).recordOneSided(ctx, lease, es, from, from, ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, Reason: reason})
	withheld := ledger.Ending{Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionProvider,
		Reason: reason + "; the output came back, and only countersigned time is on record"}
	err = j.update(func(r *Record) error {
		if r.terminal() || r.Lease == nil || r.Lease.Terms.ID != t.ID {
			return errSkip
		}
		r.State = api.JobReleased
		r.setEnding(withheld)
		r.step(api.StepRelease, now)
		return nil
	})
	if err == errSkip {
		return
	}
	j.log.Warn("provider withholds receipts: lease ended on this side", "job", t.Job, "lease", t.ID, "provider", t.Provider)
	if err := j.publishJob(ctx, marketOf(j.jobTracker), wire.KindRelease, releaseOnThisSide(t, es, withheld, now)); err != nil {
		j.log.Warn("announce release of a lease with withheld receipts", "lease", t.ID, "err", err)
	}
}
