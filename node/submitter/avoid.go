package submitter

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
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
//
// An avoid is a penalty, not a sentence. Before a provider that has not
// proposed is avoided, this node tries to reach it (Deps.Reach): one that
// cannot reach this node, behind a NAT with no relay yet, is not squatting,
// and the job waits for it rather than avoiding it; one reached gets
// another AvoidAfter to propose over the connection this node opened. An
// avoid lifts after AvoidFor, twice as long with each avoid of the same
// provider for the job, up to wire.MaxAvoidFor: the re-announcement says
// when, and every peer's Match places the job there again from then on.
// A job whose every candidate is avoided so waits for the first avoid to
// lift, never for good.

// DefaultAvoidFor is how long a provider's first avoid for a job lasts
// when Config.AvoidFor is zero.
const DefaultAvoidFor = 5 * time.Minute

// reachTimeout bounds this node's try to reach a provider that has not
// proposed.
const reachTimeout = 10 * time.Second

// avoidFor is how long the n-th avoid (from 1) of one provider lasts.
func (c *Config) avoidFor(n int) time.Duration {
	d := c.AvoidFor
	if d <= 0 {
		d = DefaultAvoidFor
	}
	for ; n > 1 && d < wire.MaxAvoidFor; n-- {
		d *= 2
	}
	return min(d, wire.MaxAvoidFor)
}

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
	// last is the Submitter's pass that last assigned the job to the
	// provider, 0 if none did: a proposal within assignedFor passes of it
	// was Match's choice (claims.go).
	last uint64
}

// RecordWaits keeps, for this node's queued jobs, the reason Match gave,
// and notes the provider Match assigned each to.
func (s *Submitter) RecordWaits(res market.Result) {
	type news struct {
		waits, assigned []string
		matched         bool
	}
	mine := s.jobs.live()
	byJob := make(map[*jobTracker]*news)
	of := func(id string) *news {
		j, ok := mine[id]
		if !ok {
			return nil
		}
		n := byJob[j]
		if n == nil {
			n = &news{}
			byJob[j] = n
		}
		return n
	}
	for _, w := range res.Waiting {
		if n := of(w.Job); n != nil {
			n.waits = append(n.waits, w.Reason)
		}
	}
	for _, a := range res.Assignments {
		if n := of(a.Job); n != nil {
			n.waits = append(n.waits, matchedWait(a.Provider))
			n.matched = true
			if a.Provider != s.d.Self.String() { // never avoided; see above
				n.assigned = append(n.assigned, a.Provider)
			}
		}
	}
	s.mu.Lock()
	s.pass++
	pass := s.pass
	s.mu.Unlock()
	now := time.Now()
	lost := 0
	for j, n := range byJob {
		if (failureWatch{j}).notePass(pass, n.waits, n.assigned, n.matched, now) {
			lost++
		}
	}
	if lost > 0 && s.d.Metrics.RoundsLost != nil {
		s.d.Metrics.RoundsLost.Add(float64(lost))
	}
}

// matchedWait is what a queued job waits on once Match assigned it to
// provider.
func matchedWait(provider string) string {
	return "matched to provider " + provider + "; waiting for its proposal"
}

// notePass records what one of this node's Match passes said of the job
// while it is queued: each reason it gave for the wait, in turn (a new one
// is a change a follower hears of), the providers it assigned the job to,
// and whether it assigned it at all (matched). It reports whether the
// previous pass had assigned the job too: that round was lost.
func (j failureWatch) notePass(pass uint64, waits, assigned []string, matched bool, now time.Time) (lost bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rec.State != api.JobQueued {
		return false
	}
	lost = j.matchedPass != 0 && j.matchedPass+1 == pass
	if matched {
		j.matchedPass = pass
	}
	j.setWaitsLocked(waits)
	if j.lastPass != pass {
		j.lastPass = pass
		j.passes++
	}
	for _, p := range assigned {
		as := j.assignmentOf(p, now)
		as.passes++
		as.last = pass
	}
	return lost
}

// squatting reports whether a provider that has not proposed was assigned
// the job often enough to be squatting on it: in two passes or more, and
// in at least half of the job's passes since the first.
func (as *assignment) squatting(j *jobTracker) bool {
	return as.passes >= 2 && 2*as.passes >= j.passes-as.from
}

// assignmentOf returns what is known of provider's hold on j, recording it
// as first seen at first if nothing is. The caller holds j.mu.
func (j failureWatch) assignmentOf(provider string, first time.Time) *assignment {
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

// noteProposal records that a provider proposed for the job: whatever
// comes of the proposal, the provider does not squat on it.
func (j failureWatch) noteProposal(from peer.ID) {
	j.mu.Lock()
	defer j.mu.Unlock()
	as := j.assignmentOf(from.String(), time.Time{})
	as.proposed = true
	delete(j.notes, from.String())
}

// noteStaging records that a provider asked to stage the queued job's
// inputs before proposing its lease. The caller holds j.mu.
func (j failureWatch) noteStaging(from peer.ID, now time.Time) {
	j.assignmentOf(from.String(), now).staging = now
}

// failure is a provider failing one of this node's jobs.
type failure struct {
	j        *jobTracker
	provider string
	lease    string // "" for a provider that never proposed
	withheld bool   // the lease ran, but its receipts are withheld
	reason   string
}

// checkFailures finds the providers failing this node's jobs and acts.
func (s *Submitter) checkFailures(ctx context.Context, now time.Time) {
	var fs []failure
	for _, j := range s.jobs.live() {
		(failureWatch{j}).liftAvoids(ctx, now)
		fs = append(fs, (failureWatch{j}).failures(now)...)
	}
	for _, f := range fs {
		switch {
		case f.lease == "":
			if s.notSquatting(ctx, f) {
				continue
			}
			(failureWatch{f.j}).avoid(ctx, f.provider, "", f.reason)
		case f.withheld:
			(failureWatch{f.j}).endWithheld(ctx, f.lease, f.reason, now)
		default:
			// A lease the network never heard of is requeueUnconfirmed's:
			// its countersignature may have been lost on the way, an honest
			// fault, and the job goes back without avoiding anyone.
			if _, _, ok := s.d.Leases.LeaseParties(f.lease); ok {
				(failureWatch{f.j}).giveUpLease(ctx, f.lease, f.reason, now)
			}
		}
	}
}

// notSquatting tries to reach a provider that Match keeps assigning a job
// and that has not proposed, and reports whether that clears it: it
// cannot be reached from here either, so it may not reach this node (the
// job waits for it), or it is reached for the first time (it gets another
// AvoidAfter to propose over the connection). A provider reached before
// that still does not propose squats.
func (s *Submitter) notSquatting(ctx context.Context, f failure) bool {
	if s.d.Reach == nil {
		return false
	}
	p, err := peer.Decode(f.provider)
	if err != nil {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, reachTimeout)
	err = s.d.Reach(rctx, p)
	cancel()
	if ctx.Err() != nil {
		return true
	}
	if err != nil {
		(failureWatch{f.j}).waitFor(f.provider, fmt.Sprintf("matched to provider %s, which has not proposed, and which this node cannot reach either (%v): "+
			"not avoided; waiting for a path between them", f.provider, err))
		s.log.Info("provider not proposing is unreachable: not avoided", "job", f.j.id, "provider", f.provider, "err", err)
		return true
	}
	if (failureWatch{f.j}).reachedFirst(f.provider) {
		(failureWatch{f.j}).waitFor(f.provider, fmt.Sprintf("matched to provider %s, which had not proposed; reached it, waiting for its proposal", f.provider))
		s.log.Info("reached a provider that had not proposed: waiting for its proposal", "job", f.j.id, "provider", f.provider)
		return true
	}
	return false
}

// waitFor sets what a queued job waits on, matched to provider: in place
// of matchedWait in each later pass too, until the provider proposes.
func (j failureWatch) waitFor(provider, why string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.notes == nil {
		j.notes = map[string]string{}
	}
	j.notes[provider] = why
	if j.rec.State == api.JobQueued && j.rec.Wait != why {
		j.rec.Wait = why
		j.bump()
	}
}

// reachedFirst records that this node reached provider for the job, and
// reports whether it is the first time.
func (j failureWatch) reachedFirst(provider string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.reached[provider] {
		return false
	}
	if j.reached == nil {
		j.reached = map[string]bool{}
	}
	j.reached[provider] = true
	return true
}

// failures finds the providers failing the job now, for checkFailures to
// act on, forgetting those that squat on it as it names them.
func (j failureWatch) failures(now time.Time) []failure {
	j.mu.Lock()
	defer j.mu.Unlock()
	var fs []failure
	r := j.rec
	if r.State != api.JobQueued {
		j.assigned, j.passes = nil, 0 // a later stay in the queue starts afresh
	}
	switch {
	case j.cfg.AvoidAfter > 0 && r.State == api.JobQueued && j.assigned != nil:
		for _, p := range slices.Sorted(maps.Keys(j.assigned)) {
			as := j.assigned[p]
			if as.proposed || !as.squatting(j.jobTracker) || now.Sub(as.first) <= j.cfg.AvoidAfter || slices.Contains(r.Avoid, p) ||
				(!as.staging.IsZero() && now.Sub(as.staging) <= wire.StageBeforeLeaseMax) {
				continue
			}
			fs = append(fs, failure{j: j.jobTracker, provider: p,
				reason: fmt.Sprintf("provider %s was assigned the job in %d of %d passes and did not propose within %s", p, as.passes, j.passes-as.from, j.cfg.AvoidAfter)})
			delete(j.assigned, p)
		}
	case r.Lease == nil || r.terminal() || r.Withdrawn:
	case j.cfg.RunWithin > 0 && r.State == api.JobRenting && r.LastReceipt.IsZero() &&
		now.Sub(r.stepAt(api.StepRent)) > j.cfg.RunWithin:
		fs = append(fs, failure{j: j.jobTracker, provider: r.Lease.Terms.Provider, lease: r.Lease.Terms.ID,
			reason: fmt.Sprintf("provider %s signed a lease and neither started the run nor offered a receipt within %s", r.Lease.Terms.Provider, j.cfg.RunWithin)})
	case j.cfg.ReceiptsDue > 0 && !r.stepAt(api.StepRun).IsZero() &&
		now.Sub(latest(r.LastReceipt, r.stepAt(api.StepRun))) > j.cfg.ReceiptsDue:
		fs = append(fs, failure{j: j.jobTracker, provider: r.Lease.Terms.Provider, lease: r.Lease.Terms.ID, withheld: true,
			reason: fmt.Sprintf("provider %s offered no receipt for %s while the job ran", r.Lease.Terms.Provider, j.cfg.ReceiptsDue)})
	}
	return fs
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// clone is a copy of the avoids that shares nothing with a.
func (a RecordAvoid) clone() RecordAvoid {
	return RecordAvoid{Avoid: slices.Clone(a.Avoid), AvoidUntil: maps.Clone(a.AvoidUntil), Avoided: maps.Clone(a.Avoided)}
}
