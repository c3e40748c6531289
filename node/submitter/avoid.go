package submitter

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Providers that fail a job. Three bounds, each checked on the provider
// watch's tick:
//
//   - A provider that this node's own Match assigns a queued job to in two
//     passes or more, and in at least half the passes since the first,
//     and that has not proposed for it AvoidAfter after the first, is
//     avoided for the job: it squats on its offer. An honest provider
//     proposes in the pass that assigns it the job; two passes keep one
//     view that differed from the provider's from counting, and the half
//     keeps a busy one out: on a loaded network this node's view can show
//     a provider free for a pass now and then, between one of its leases
//     ending and the next being announced, while the provider, which
//     knows its own GPUs, has already given them to another job. A
//     squatter's offer stays free, and Match keeps assigning it the job.
//   - This node's own provider is never avoided: it is not squatting on
//     itself, and peers refuse an avoid list naming its signer. A lease of
//     its own that fails still goes back to the queue.
//   - A lease announced by its provider that reaches neither its run nor a
//     receipt within RunWithin is released by this node, signed, as never
//     run: nothing was held for the job, so nothing is owed, and the job
//     goes back to the queue avoiding the provider. An honest provider
//     offers its first receipt one receipt interval after the lease,
//     staging or not. (A lease never announced goes back to the queue
//     without avoiding anyone, requeueUnconfirmed: its countersignature may
//     have been lost. A provider that falls silent before the run is given
//     up the same way, once lost.)
//   - A lease that reached its run and then goes ReceiptsDue without a
//     receipt to countersign is ended on this side: the provider withholds
//     its receipts. This side's one-sided record holds only what was
//     countersigned. A job whose output already came back is complete;
//     one without goes back to the queue, avoiding the provider.
//
// Every avoided provider is named in the job's signed re-announcement
// (wire.RequeueAvoiding), which every peer puts in its view, so every
// peer's Match skips the provider for the job (market, "Avoided
// providers").

// assignment is what this node's Match said of a queued job and one
// provider.
type assignment struct {
	first    time.Time // when Match first assigned the job to the provider
	passes   int       // how many passes did
	from     int       // the job's pass count (job.passes) at the first
	proposed bool      // the provider has proposed for the job
	// staging is when the provider last asked to stage the job's inputs
	// before the lease: until wire.StageBeforeLeaseMax after, not
	// proposing yet is staging, not squatting.
	staging time.Time
}

// noteAssignments records, for this node's queued jobs, the provider Match
// assigned each to. The caller holds s.mu.
func (s *Submitter) noteAssignments(res market.Result, now time.Time) {
	s.pass++
	count := func(id string) *job {
		j, ok := s.jobs[id]
		if !ok || j.rec.State != api.JobQueued {
			return nil
		}
		if j.lastPass != s.pass {
			j.lastPass = s.pass
			j.passes++
		}
		return j
	}
	for _, w := range res.Waiting {
		count(w.Job)
	}
	for _, a := range res.Assignments {
		if j := count(a.Job); j != nil && a.Provider != s.d.Self.String() { // never avoided; see above
			j.assignmentOf(a.Provider, now).passes++
		}
	}
}

// squatting reports whether a provider that has not proposed was assigned
// the job often enough to be squatting on it: in two passes or more, and
// in at least half of the job's passes since the first.
func (as *assignment) squatting(j *job) bool {
	return as.passes >= 2 && 2*as.passes >= j.passes-as.from
}

// assignmentOf returns what is known of provider's hold on j, recording it
// as first seen at first if nothing is. The caller holds s.mu.
func (j *job) assignmentOf(provider string, first time.Time) *assignment {
	if j.assigned == nil {
		j.assigned = make(map[string]*assignment)
	}
	as := j.assigned[provider]
	if as == nil {
		as = &assignment{first: first, from: j.passes - 1}
		j.assigned[provider] = as
	}
	return as
}

// noteProposal records that a provider proposed for a job: whatever comes
// of the proposal, the provider does not squat on it.
func (s *Submitter) noteProposal(j *job, from peer.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j.assignmentOf(from.String(), time.Time{}).proposed = true
}

// noteStagingLocked records that a provider asked to stage a queued job's
// inputs before proposing its lease. The caller holds s.mu.
func (s *Submitter) noteStagingLocked(j *job, from peer.ID, now time.Time) {
	j.assignmentOf(from.String(), now).staging = now
}

// failure is a provider failing one of this node's jobs.
type failure struct {
	j        *job
	provider string
	lease    string // "" for a provider that never proposed
	withheld bool   // the lease ran, but its receipts are withheld
	reason   string
}

// checkFailures finds the providers failing this node's jobs and acts.
func (s *Submitter) checkFailures(ctx context.Context, now time.Time) {
	var fs []failure
	s.mu.Lock()
	for _, j := range s.jobs {
		r := j.rec
		if r.State != api.JobQueued {
			j.assigned, j.passes = nil, 0 // a later stay in the queue starts afresh
		}
		switch {
		case s.cfg.AvoidAfter > 0 && r.State == api.JobQueued && j.assigned != nil:
			for _, p := range slices.Sorted(maps.Keys(j.assigned)) {
				as := j.assigned[p]
				if as.proposed || !as.squatting(j) || now.Sub(as.first) <= s.cfg.AvoidAfter || slices.Contains(r.Avoid, p) ||
					(!as.staging.IsZero() && now.Sub(as.staging) <= wire.StageBeforeLeaseMax) {
					continue
				}
				fs = append(fs, failure{j: j, provider: p,
					reason: fmt.Sprintf("provider %s was assigned the job in %d of %d passes and did not propose within %s", p, as.passes, j.passes-as.from, s.cfg.AvoidAfter)})
				delete(j.assigned, p)
			}
		case r.Lease == nil || r.terminal() || r.Withdrawn:
		case s.cfg.RunWithin > 0 && r.State == api.JobRenting && r.LastReceipt.IsZero() &&
			now.Sub(r.stepAt(api.StepRent)) > s.cfg.RunWithin:
			fs = append(fs, failure{j: j, provider: r.Lease.Terms.Provider, lease: r.Lease.Terms.ID,
				reason: fmt.Sprintf("provider %s signed a lease and neither started the run nor offered a receipt within %s", r.Lease.Terms.Provider, s.cfg.RunWithin)})
		case s.cfg.ReceiptsDue > 0 && !r.stepAt(api.StepRun).IsZero() &&
			now.Sub(latest(r.LastReceipt, r.stepAt(api.StepRun))) > s.cfg.ReceiptsDue:
			fs = append(fs, failure{j: j, provider: r.Lease.Terms.Provider, lease: r.Lease.Terms.ID, withheld: true,
				reason: fmt.Sprintf("provider %s offered no receipt for %s while the job ran", r.Lease.Terms.Provider, s.cfg.ReceiptsDue)})
		}
	}
	s.mu.Unlock()
	for _, f := range fs {
		switch {
		case f.lease == "":
			s.avoid(ctx, f.j, f.provider, "", f.reason)
		case f.withheld:
			s.endWithheld(ctx, f, now)
		default:
			// A lease the network never heard of is requeueUnconfirmed's:
			// its countersignature may have been lost on the way, an honest
			// fault, and the job goes back without avoiding anyone.
			if _, _, ok := s.d.Leases.LeaseParties(f.lease); ok {
				s.giveUpLease(ctx, f, now)
			}
		}
	}
}

// avoid adds provider to a queued job's avoid list, with reason as what the
// job waits on, and re-announces the job at once. lease, when set, must
// still be the job's lease: the job then goes back to the queue.
func (s *Submitter) avoid(ctx context.Context, j *job, provider, lease, reason string) bool {
	var env []byte
	var avoid []string
	err := s.update(j, func(r *Record) error {
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
		if provider != s.d.Self.String() {
			if !slices.Contains(r.Avoid, provider) {
				r.Avoid = append(r.Avoid, provider)
			}
			r.Wait += ", avoiding it"
		}
		env, avoid = r.Envelope, slices.Clone(r.Avoid)
		return nil
	})
	if err == errSkip {
		return false
	}
	if err != nil {
		s.log.Warn("avoid provider: record not saved", "job", j.id, "provider", provider, "err", err)
	}
	if provider == s.d.Self.String() {
		s.log.Warn("this node's own provider failed the job: back in the queue", "job", j.id, "reason", reason)
	} else {
		s.log.Warn("provider failed the job: avoiding it", "job", j.id, "provider", provider, "reason", reason)
	}
	s.announceAvoiding(ctx, env, avoid)
	return true
}

// announceAvoiding re-announces one queued job with its avoid list. Should
// peers refuse the list, the job is announced without it: a job not
// re-announced leaves every view, and would wait for nothing.
func (s *Submitter) announceAvoiding(ctx context.Context, env []byte, avoid []string) {
	// A record saved by a version that could name this node keeps its
	// name; peers refuse a list naming the signer.
	avoid = slices.DeleteFunc(avoid, func(p string) bool { return p == s.d.Self.String() })
	_, err := s.d.Gossip.Publish(ctx, p2p.TopicJobs, wire.KindRequeue, wire.RequeueAvoiding(env, avoid))
	if err == nil || ctx.Err() != nil {
		return
	}
	s.log.Warn("re-announce job with its avoid list: announcing it without", "err", err)
	if _, err := s.d.Gossip.Publish(ctx, p2p.TopicJobs, wire.KindRequeue, wire.RequeueBody{Declarations: [][]byte{env}}); err != nil && ctx.Err() == nil {
		s.log.Warn("re-announce job", "err", err)
	}
}

// giveUpLease releases a lease that never reached its run, as never run,
// and puts the job back in the queue avoiding its provider. This side's
// one-sided record holds what was countersigned (nothing, since no receipt
// came), with the lease as evidence.
func (s *Submitter) giveUpLease(ctx context.Context, f failure, now time.Time) {
	s.mu.Lock()
	r := f.j.rec
	if r.Lease == nil || r.Lease.Terms.ID != f.lease || r.terminal() {
		s.mu.Unlock()
		return
	}
	lease := *r.Lease
	rent := r.stepAt(api.StepRent)
	s.mu.Unlock()
	t := lease.Terms
	es, err := s.d.Ledger.ByLease(ctx, t.ID)
	if err != nil {
		s.log.Warn("receipts of a lease never run", "lease", t.ID, "err", err)
	}
	s.recordOneSided(ctx, lease, es, rent, rent, f.reason)
	var heldMs int64
	if len(es) > 0 {
		heldMs = es[len(es)-1].Receipt.Held().Milliseconds()
	}
	// Released first, so that peers hold the job open to the announcement
	// that follows (view.Market.ReleaseLease).
	body := wire.ReleaseBody{Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, HeldMs: heldMs, At: now.UnixMilli(), Requeued: true}
	if _, err := s.d.Gossip.Publish(ctx, p2p.TopicJobs, wire.KindRelease, body); err != nil {
		s.log.Warn("announce release of a lease never run", "lease", t.ID, "err", err)
	}
	s.avoid(ctx, f.j, t.Provider, t.ID, f.reason)
}

// endWithheld ends, on this side, a lease whose provider withholds its
// receipts. This side's record holds only what it countersigned. A job
// whose output came back is complete; one without goes back to the queue
// avoiding the provider.
func (s *Submitter) endWithheld(ctx context.Context, f failure, now time.Time) {
	s.mu.Lock()
	r := f.j.rec
	if r.Lease == nil || r.Lease.Terms.ID != f.lease || r.terminal() {
		s.mu.Unlock()
		return
	}
	lease, output := *r.Lease, r.Output
	from := r.stepAt(api.StepRent)
	s.mu.Unlock()
	if output == "" {
		s.giveUpLease(ctx, f, now)
		return
	}
	t := lease.Terms
	es, err := s.d.Ledger.ByLease(ctx, t.ID)
	if err != nil {
		s.log.Warn("receipts of a lease whose receipts are withheld", "lease", t.ID, "err", err)
	}
	// Until the start: the one-sided record claims no time beyond the last
	// receipt both signed (recordOneSided takes that one's end).
	s.recordOneSided(ctx, lease, es, from, from, f.reason)
	err = s.update(f.j, func(r *Record) error {
		if r.terminal() || r.Lease == nil || r.Lease.Terms.ID != t.ID {
			return errSkip
		}
		r.State = api.JobReleased
		r.Outcome, r.Attribution = ledger.OutcomeCompleted, ledger.AttributionProvider
		r.Reason = f.reason + "; the output came back, and only countersigned time is on record"
		r.step(api.StepRelease, now)
		return nil
	})
	if err == errSkip {
		return
	}
	s.log.Warn("provider withholds receipts: lease ended on this side", "job", t.Job, "lease", t.ID, "provider", t.Provider)
	var heldMs int64
	if len(es) > 0 {
		heldMs = es[len(es)-1].Receipt.Held().Milliseconds()
	}
	body := wire.ReleaseBody{Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionProvider, HeldMs: heldMs, At: now.UnixMilli()}
	if _, err := s.d.Gossip.Publish(ctx, p2p.TopicJobs, wire.KindRelease, body); err != nil {
		s.log.Warn("announce release of a lease with withheld receipts", "lease", t.ID, "err", err)
	}
}
