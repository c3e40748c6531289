package submitter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
)

// gangRun drives one gang attempt, from its assembly to its end, above the
// trackers of its parts: it assembles the gang and hands out its gang
// lease once every part is leased (gangrun_assembly.go), gives the parts'
// leases up when they are not all held in time, ends the parts still
// running once one has failed, and has the whole gang go on, or notes it
// over (check). Its loop looks at the parts at the provider watch's pace
// (each second, or a quarter of ProviderLostAfter where that is shorter)
// until the gang is over or the Submitter shuts down; then it waits for
// the calls it made and leaves the registry. No part's tracker knows the
// run, nor its siblings.
type gangRun struct {
	// Immutable after newGangRun.
	g  *gangs // the registry, and the parts of the node it acts through
	id string // the gang's record's ID
	n  int    // the number of parts
	// ctx ends with the Submitter's; the run's calls are made under it.
	ctx context.Context
	// tasks are the run's goroutines besides its loop: the assembly, the
	// starts and the ends of parts, each a call to a provider. The loop
	// waits for them as it ends. It has its own lock.
	tasks task.Group

	// mu guards assembling and startedAt. A state lock: held over them
	// alone, never across a call.
	mu sync.Mutex
	// assembling is set while the gang lease is being signed and handed
	// out: one assembly at a time, and the check leaves the gang to it.
	assembling bool
	// startedAt is when the gang's start was last handed out, so that a
	// start not delivered is handed out again, but not every second.
	startedAt time.Time
}

func newGangRun(g *gangs, id string, n int) *gangRun {
	r := &gangRun{g: g, id: id, n: n, ctx: g.ctx}
	r.tasks.OnPanic = g.tasks.OnPanic
	return r
}

// loop checks the gang at the pace of the provider watch until it is over
// or the Submitter shuts down.
func (r *gangRun) loop() {
	defer r.g.left(r)
	defer r.tasks.Wait(context.Background()) //nolint:errcheck // no deadline: waits until they end
	tick := time.NewTicker(min(r.g.cfg.ProviderLostAfter/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case now := <-tick.C:
			if r.check(r.ctx, now) {
				return
			}
		}
	}
}

// claim marks the gang as being assembled, unless it is already.
func (r *gangRun) claim() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.assembling {
		return false
	}
	r.assembling = true
	return true
}

// assembled ends what claim began.
func (r *gangRun) assembled() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.assembling = false
}

// busy reports whether the gang is being assembled.
func (r *gangRun) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.assembling
}

// started notes the gang's start handed out at now.
func (r *gangRun) started(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startedAt = now
}

// startDue reports whether the gang's start may be handed out again: not
// within every of the last time.
func (r *gangRun) startDue(now time.Time, every time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Sub(r.startedAt) >= every
}

// partsRead is what check reads of a gang's parts.
type partsRead struct {
	failed *Record // of the parts that failed, the first to end
	// ended, leased: how many parts have ended, and how many are leased
	// and not ended; oldest is when the first of those was leased.
	ended, leased int
	oldest        time.Time
	// running are the parts not ended and not yet told to stop: leased,
	// or still queued.
	running []*jobTracker
	// renting: some part is leased but not started yet.
	renting bool
	// assembled: every part leased under the very leases the gang lease
	// names.
	assembled bool
}

// read reads the parts of the gang, whose record is gang.
func (r *gangRun) read(gang *Record) partsRead {
	parts := r.g.members(r.id, r.n)
	out := partsRead{assembled: gang.GangLease != nil && len(gang.GangLease.Terms.Parts) == len(parts)}
	for rank, t := range parts {
		if t == nil {
			out.assembled = false
			continue
		}
		var p Record
		t.view(func(rec *Record) { p = rec.copy() })
		if p.Lease == nil || !out.assembled || gang.GangLease.Terms.Parts[rank].Lease != p.Lease.Terms.ID {
			out.assembled = false
		}
		out.renting = out.renting || (p.State == api.JobRenting && p.Lease != nil)
		switch {
		case p.terminal():
			out.ended++
			// A part withdrawn was stopped by the user, or because
			// another part failed: it is no cause of its own.
			if p.Outcome != ledger.OutcomeCompleted && p.Outcome != ledger.OutcomeWithdrawn && p.endedBefore(out.failed) {
				out.failed = &p
			}
		case p.Lease != nil:
			out.leased++
			if !p.Withdrawn {
				out.running = append(out.running, t)
			}
			if rent := p.stepAt(api.StepRent); out.oldest.IsZero() || rent.Before(out.oldest) {
				out.oldest = rent
			}
		default:
			out.running = append(out.running, t)
		}
	}
	return out
}

// check ends, once a part of the gang has ended any way but completed, the
// parts still running (each with its grace to checkpoint), and gives the
// gang up when its parts have not all been leased and started within
// gangAssembleWithin; a gang whose every part has ended goes on by itself
// where it declared resume: auto. It reports whether the gang is over.
func (r *gangRun) check(ctx context.Context, now time.Time) (over bool) {
	g := r.g.jobs.get(r.id)
	if g == nil {
		return true
	}
	var rec Record
	g.view(func(x *Record) {
		if !x.GangOver {
			rec = x.copy()
		}
	})
	if rec.ID == "" {
		return true
	}
	p := r.read(&rec)
	n, within := r.n, r.g.cfg.gangAssembleWithin()
	switch {
	case r.busy():
		// Being assembled: its own steps decide.
	case p.failed != nil && len(p.running) > 0:
		r.endParts(ctx, p.failed, p.running)
	case p.failed != nil && p.ended == n:
		return r.ended(ctx, g, *p.failed)
	case p.failed == nil && p.ended == n:
		return r.over(g) // completed, or withdrawn
	case p.failed == nil && p.leased > 0 && !p.assembled && !p.oldest.IsZero() && now.Sub(p.oldest) > within:
		r.giveUp(ctx, fmt.Sprintf("%d of its %d parts were leased within %s", p.leased, n, within), -1)
	case p.failed == nil && p.leased == n && !p.assembled:
		// Every part held, the assembly not yet done (or lost to a
		// restart): try again.
		r.tasks.Go(func() { r.assemble(r.ctx) })
	case p.failed == nil && p.assembled && p.renting && r.startDue(now, gangStartAgain):
		// A part not started yet: its start may not have been
		// delivered, or a restart came between the lease and it.
		if ps, ok := r.leasedParts(); ok {
			lease := *rec.GangLease
			r.started(now)
			r.tasks.Go(func() { r.sendStart(r.ctx, lease, ps) })
		}
	}
	return false
}

// endParts ends the parts of a gang whose part failed that have not
// ended: a leased one is stopped by its provider, with its grace to write
// a last checkpoint, which is pulled; a queued one ends at once. The calls
// to the providers go on the run's tasks, so that its loop goes on
// meanwhile; a part told once is not told again (its record says it was
// withdrawn).
func (r *gangRun) endParts(ctx context.Context, failed *Record, running []*jobTracker) {
	r.g.log.Info("a gang part ended: ending the gang", "gang", r.id, "part", failed.ID, "outcome", failed.Outcome, "why", failed.Reason)
	for _, t := range running {
		r.tasks.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, r.g.cfg.gangCallTimeout())
			defer cancel()
			if _, err := t.withdraw(wctx, false); err != nil && !errors.Is(err, ErrConflict) {
				r.g.log.Warn("end a gang's part", "part", t.id, "err", err)
			}
		})
	}
}

// ended goes on with a gang whose parts have all ended, failed as the
// part failed did, the whole gang again, each part from its own last
// checkpoint (gangContinues). The decision is saved before the next
// attempt is submitted, and a decision a restart cut short is carried out
// at the next look. It reports whether the gang is over: it does not go
// on, or went on before.
func (r *gangRun) ended(ctx context.Context, g *jobTracker, failed Record) (over bool) {
	err := g.update(func(rec *Record) error {
		if rec.Next != "" || rec.Withdrawn || rec.ResumeFailed != "" {
			return errSkip
		}
		if rec.Resumed {
			return nil // decided before a restart; not yet submitted
		}
		switch failed.gangContinues(rec) {
		case continueRetry:
			rec.RetryNext = true
		case continuePreempted:
			rec.PreemptNext = true
		case continueResume:
		default:
			return errSkip
		}
		rec.Resumed = true
		return nil
	})
	if err == errSkip {
		return r.over(g)
	}
	if err != nil {
		return false
	}
	r.g.resuming.Lock()
	defer r.g.resuming.Unlock()
	if g.snapshot().Next != "" {
		return false // the look before carried it out meanwhile
	}
	if _, err := r.g.resumeWhole(ctx, g, false); err != nil {
		if ctx.Err() != nil {
			// Cut by this node's own stop: the claim stays on disk,
			// and the next start's run of the gang makes it.
			r.g.log.Info("gang resume cut by the stop; the next start makes it", "gang", g.id, "err", err)
			return false
		}
		r.g.log.Warn("resume gang", "gang", g.id, "err", err)
		g.change(func(rec *Record) error {
			rec.ResumeFailed = err.Error()
			return nil
		})
	}
	return false
}

// over notes that the gang attempt has ended for good (completed,
// withdrawn, failed with nothing left to go on with, or gone on as its
// next attempt): its run ends. A resumption by hand still finds it.
func (r *gangRun) over(g *jobTracker) bool {
	g.change(func(rec *Record) error {
		rec.GangOver = true
		return nil
	})
	return true
}
