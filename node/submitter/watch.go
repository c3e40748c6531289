package submitter

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
)

// watchProviders ends, as provider-lost, the leases of this node's jobs
// whose provider has gone silent: no offer heartbeat and no message for
// ProviderLostAfter. The record of held time is the last receipt both
// signed; the job keeps the last checkpoint it pulled, and a declaration
// that asks for it is resumed from there at once.
func (s *Submitter) watchProviders(ctx context.Context) {
	task.Every(ctx, min(s.cfg.ProviderLostAfter/4, time.Second), func(now time.Time) {
		s.mu.Lock()
		joined := s.joined
		s.mu.Unlock()
		// This node's leased jobs whose provider has not been heard
		// from for ProviderLostAfter; each of the others notes when
		// it was. A node that has heard no provider since it started
		// is the one cut off, not the providers.
		var lost []*jobTracker
		if !joined.IsZero() {
			for _, j := range s.jobs.live() {
				if (lossWatch{j}).silent(now, joined) {
					lost = append(lost, j)
				}
			}
		}
		for _, j := range lost {
			if (lossWatch{j}).providerLost(ctx, now) {
				s.autoResume(ctx, j.id)
			}
		}
		for _, j := range s.jobs.live() {
			j.requeueUnconfirmed(now)
		}
		s.checkFailures(ctx, now)
	})
}

// releaseOnThisSide is the release this node announces for a lease it
// ended without its provider's final receipt: the held time the network
// charges is that of the last receipt both signed, es's last.
func releaseOnThisSide(t wire.LeaseTerms, es []ledger.Entry, e ledger.Ending, now time.Time) wire.ReleaseBody {
	var heldMs int64
	if len(es) > 0 {
		heldMs = es[len(es)-1].Receipt.Held().Milliseconds()
	}
	return wire.ReleaseBody{Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: e.Outcome, Attribution: e.Attribution, HeldMs: heldMs, At: now.UnixMilli()}
}

// silent reports whether the provider of the job's lease has not been
// heard from for ProviderLostAfter, counting from joined at the earliest,
// and otherwise notes when it last was.
func (j lossWatch) silent(now, joined time.Time) bool {
	j.mu.Lock()
	if j.rec.Lease == nil || j.rec.terminal() {
		j.mu.Unlock()
		return false
	}
	provider := j.rec.Lease.Terms.Provider
	// After a restart, silence counts from when this node rejoined.
	last := latest(j.lastContact, joined)
	j.mu.Unlock()
	if e, ok := j.d.Offers.Get(provider); ok && e.LastSeen.After(last) {
		last = e.LastSeen
	}
	// A connection proves nothing: a QUIC connection to a killed peer
	// looks alive until it idles out. Only a heartbeat or a message does.
	// The terms name the provider as its ID's text (HandleProposal
	// checked it), so the text compares as the ID would.
	if provider == j.d.Self.String() {
		last = now
	}
	if now.Sub(last) > j.cfg.ProviderLostAfter {
		return true
	}
	j.mu.Lock()
	if last.After(j.lastContact) {
		j.lastContact = last
	}
	j.mu.Unlock()
	return false
}

// providerLost ends the job's lease on the submitter's side, and reports
// whether the job is then to be resumed (autoResume).
func (j lossWatch) providerLost(ctx context.Context, now time.Time) (resume bool) {
	id := j.id
	j.mu.Lock()
	r := j.rec
	if r.terminal() || r.Lease == nil {
		j.mu.Unlock()
		return false
	}
	t, lease := r.Lease.Terms, *r.Lease
	lastHeard, rent := j.lastContact, r.stepAt(api.StepRent)
	unstarted := r.State == api.JobRenting && r.LastReceipt.IsZero()
	j.mu.Unlock()
	if unstarted {
		// Nothing was held for the job: it goes back to the queue rather
		// than ending with its provider.
		(failureWatch{j.jobTracker}).giveUpLease(ctx, t.ID, fmt.Sprintf("provider %s went silent before the run started", t.Provider), now)
		return false
	}
	silent := now.Sub(lastHeard).Round(time.Second)
	lost := ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider,
		Reason: fmt.Sprintf("provider %s silent for %s", t.Provider, silent)}

	// This side's own record of the lease comes first, so that a job shown
	// released always has its record: held from the lease's start until the
	// provider was last heard from, signed by this node alone with the
	// lease as evidence. The provider's final receipt supersedes it if the
	// provider comes back.
	es, err := j.d.Ledger.ByLease(ctx, t.ID)
	if err != nil {
		j.log.Warn("receipts of a lost lease", "lease", t.ID, "err", err)
	}
	j.recordOneSided(ctx, lease, es, rent, lastHeard, lost)

	err = j.update(func(r *Record) error {
		if r.terminal() || r.Lease == nil || r.Lease.Terms.ID != t.ID {
			return errSkip // the provider's final receipt came first
		}
		r.State = api.JobReleased
		r.setEnding(lost)
		r.step(api.StepRelease, now)
		return nil
	})
	if err == errSkip {
		return false
	}
	j.log.Warn("provider lost", "job", id, "lease", t.ID, "provider", t.Provider, "silent", silent)

	// Everyone's view frees the lease, as it would on the provider's own
	// release; the held time the network charges is the last countersigned
	// receipt.
	if err := j.publishJob(ctx, marketOf(j.jobTracker), wire.KindRelease, releaseOnThisSide(t, es, lost, now)); err != nil {
		j.log.Warn("announce provider-lost release", "lease", t.ID, "err", err)
	}
	return true
}

// errSkip tells update that there is nothing to change.
var errSkip = fmt.Errorf("nothing to change")

// requeueUnconfirmed puts back in the queue a job whose lease this node
// countersigned but that its provider never announced: the countersignature
// was lost on the way, or the provider crashed before it recorded the lease.
// The provider never held the GPUs for it, so nothing is owed.
func (j *jobTracker) requeueUnconfirmed(now time.Time) {
	wait := 2*j.cfg.ProposalTTL + 3*j.cfg.Heartbeat
	j.mu.Lock()
	r := j.rec
	if r.State != api.JobRenting || r.Lease == nil || r.Withdrawn || r.Confirmed ||
		now.Sub(r.stepAt(api.StepRent)) < wait || !r.LastReceipt.IsZero() {
		j.mu.Unlock()
		return
	}
	lease := r.Lease.Terms.ID
	// A task's lease is announced by this node, not its provider, which
	// confirms it with an event instead (Confirmed).
	task := r.Array != ""
	j.mu.Unlock()
	if _, _, ok := j.d.Leases.LeaseParties(lease); ok && !task {
		return
	}
	var terms wire.LeaseTerms
	err := j.update(func(r *Record) error {
		if r.State != api.JobRenting || r.Lease == nil || r.Lease.Terms.ID != lease || !r.LastReceipt.IsZero() || r.Confirmed {
			return errSkip
		}
		terms = r.Lease.Terms
		r.State = api.JobQueued
		r.Lease = nil
		r.Steps = slices.DeleteFunc(r.Steps, func(st api.Step) bool { return st.Step != api.StepSubmit })
		return nil
	})
	if err != errSkip {
		j.log.Warn("lease never announced by its provider: back in the queue", "job", j.id, "lease", lease)
	}
	if err == nil && task {
		// Every view holds the lease this node announced: its release
		// frees the GPUs and opens the task again.
		j.batch.release(j.keyOf(marketOf(j)), wire.ReleaseBody{Lease: terms.ID, Job: terms.Job, Provider: terms.Provider, Submitter: terms.Submitter, GPUs: terms.GPUs,
			Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, At: now.UnixMilli(), Requeued: true})
	}
}

// requeueLoop re-announces this node's queued jobs every RequeueEvery.
func (s *Submitter) requeueLoop(ctx context.Context) {
	task.Every(ctx, s.cfg.RequeueEvery, func(time.Time) {
		// Re-announce the queued jobs now, each on its market's jobs
		// topic.
		envs := map[marketKey][][]byte{}
		// The tasks of an array share its one declaration, announced
		// once for them all.
		announced := map[string]bool{}
		for id, j := range s.jobs.live() {
			env, avoid, queued := j.announcement()
			array, _, _ := market.SplitTaskID(id)
			switch {
			case !queued:
			case len(avoid) > 0:
				// Rare, and each carries its own list: announced apart.
				announceAvoiding(ctx, &s.parts, marketOf(j), id, env, avoid)
			case array != "" && announced[array]:
			default:
				if array != "" {
					announced[array] = true
				}
				k := s.keyOf(marketOf(j))
				envs[k] = append(envs[k], env)
			}
		}
		for k, envs := range envs {
			batches, tooLarge := wire.RequeueBatches(envs)
			if len(tooLarge) > 0 {
				// Refused at submit since; only a job queued by an older
				// version can be here.
				s.log.Warn("queued declarations too large to re-announce", "count", len(tooLarge))
			}
			for _, b := range batches {
				if err := s.publishJob(ctx, k.market(), wire.KindRequeue, wire.RequeueBody{Declarations: b}); err != nil && ctx.Err() == nil {
					s.log.Warn("re-announce queued jobs", "market", k.String(), "err", err)
				}
			}
		}
	})
}

// announcement is what re-announces the job while it is queued: its signed
// declaration and its avoid list.
func (j *jobTracker) announcement() (env []byte, avoid []wire.Avoided, queued bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rec.State != api.JobQueued || j.rec.placeholder() || j.rec.isArray() || j.rec.MovedTo != nil {
		return nil, nil, false // a held job is not announced; an array is, by its tasks
	}
	if len(j.rec.Avoid) > 0 {
		avoid = j.rec.avoiding(time.Now(), j.cfg.avoidFor(1))
	}
	return j.rec.Envelope, avoid, true
}
