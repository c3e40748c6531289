package view

import (
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
)

// usageHalfLife is how fast a submitter's recent use fades from its share.
const usageHalfLife = time.Hour

// usageWindow is how far back leases count towards recent use: past eight
// half-lives a lease weighs under 0.4% of its charge. The cut is made
// against the epoch's time, so every peer drops the same leases.
const usageWindow = 8 * usageHalfLife

// Snapshot builds Match's view for the epoch starting at start, cut at
// cutoff: every message counts, addition or removal alike, by its Stamp
// (signed by the cutoff, arrived by the start). A job leased, or a lease
// released, after the cutoff still counts as open or live, so that every
// peer whose gossip is faster than the epoch delay decides on the same
// facts. Acting on a stale assignment is caught before it costs anything:
// a provider proposes only for jobs open now, on devices it does not hold.
//
// A provider's offer is the last word on its own GPUs: a lease whose GPUs
// an offer signed after the lease shows free again has ended, even if its
// release announcement was lost.
func (v *Market) Snapshot(epoch uint64, start, cutoff time.Time, offers []SignedOffer) market.View {
	return v.snapshot(cutoff, start, offers, nil, func(time.Time) (uint64, time.Time) { return epoch, start })
}

// Current is the view as it stands at now, with everything that has
// arrived, for a pass between epochs (market/doc.go, "Straight to rent").
// Every peer holding the same messages builds the same view, whatever the
// instant it runs the pass at: the view's Now is the newest signing time of
// what it holds (a job, an offer, a lease), its epoch epochOf(that Now), so
// Match's seed, and with it every tie, is the same on every provider. It
// leaves no trace: a job's SubmittedAt is fixed by the first epoch whose
// view holds it; a job no epoch has held yet takes, for this pass only, the
// SubmittedAt that epoch will give it by its signing time,
// firstEpoch(signed).
func (v *Market) Current(now time.Time, offers []SignedOffer, epochOf func(time.Time) uint64, firstEpoch func(Stamp) time.Time) market.View {
	return v.snapshot(now, now, offers, firstEpoch, func(newest time.Time) (uint64, time.Time) {
		if newest.IsZero() || newest.After(now) {
			newest = now
		}
		return epochOf(newest), newest
	})
}

// signedOf is when a message was signed, or, for what carries no signing
// time, when it arrived.
func signedOf(s Stamp) time.Time {
	if s.Signed.IsZero() {
		return s.Arrived
	}
	return s.Signed
}

// snapshot builds a view for Match from the messages signed by cutoff that
// had arrived by arrivedBy; instant, given the newest signing time among
// them (offers included), says the view's epoch and Now. firstEpoch nil
// fixes a job's SubmittedAt at Now.
func (v *Market) snapshot(cutoff, arrivedBy time.Time, offers []SignedOffer, firstEpoch func(Stamp) time.Time, instant func(newest time.Time) (uint64, time.Time)) market.View {
	v.mu.Lock()
	defer v.mu.Unlock()
	at := func(s Stamp) bool { return s.In(cutoff, arrivedBy) }
	var newest time.Time
	later := func(t time.Time) {
		if t.After(newest) {
			newest = t
		}
	}
	byProvider := make(map[string]SignedOffer, len(offers))
	for _, o := range offers {
		byProvider[o.Provider] = o
		later(time.UnixMilli(o.SignedAt))
	}
	jobs := make([]*OpenJob, 0, len(v.jobs))
	for _, j := range v.jobs {
		if st := (Stamp{j.Signed, j.Seen}); at(st) && !at(j.closed) {
			jobs = append(jobs, j)
			later(signedOf(st))
		}
	}
	// Only leases not yet slimmed can count live; a slimmed one counts
	// towards use (below) and, through slimmedNewest, towards Now.
	leases := make([]*knownLease, 0, len(v.recent))
	for _, kl := range v.recent {
		if kl.lease.Terms.ID != "" && at(kl.seen) {
			leases = append(leases, kl)
			later(signedOf(kl.seen))
			if at(kl.released) {
				later(signedOf(kl.released))
			}
		}
	}
	later(v.slimmedNewest)

	epoch, start := instant(newest)
	now := start.UnixMilli()
	mv := market.View{Epoch: epoch, Now: now}
	for _, o := range offers {
		mv.Offers = append(mv.Offers, o.Offer)
	}
	endedByOffer := func(t *wire.LeaseTerms) bool {
		o, ok := byProvider[t.Provider]
		return ok && offerEnds(o.SignedAt, o.GPUs, t)
	}
	live := func(kl *knownLease) bool { return !at(kl.released) && !endedByOffer(&kl.lease.Terms) }
	for _, kl := range leases {
		if live(kl) {
			mv.Leases = append(mv.Leases, kl.lease.Market())
		}
	}
	// An array's cap on tasks leased at once, against the leases live in
	// this view.
	jobs = v.arrays.capTasks(jobs, mv.Leases, mv.Offers)
	mv.Jobs = make([]market.Job, 0, len(jobs))
	for _, j := range jobs {
		submittedAt := j.submittedAt
		switch {
		case submittedAt != 0:
		case firstEpoch == nil:
			j.submittedAt, submittedAt = now, now
		default:
			// By signing time alone: arrival differs from peer to peer.
			signed := signedOf(Stamp{j.Signed, j.Seen})
			submittedAt = firstEpoch(Stamp{signed, signed}).UnixMilli()
		}
		mj := market.Job{ID: j.ID, Submitter: j.submitter, SubmittedAt: submittedAt, Request: j.Body.Declaration.Request, Image: j.Body.Declaration.Work.Image != "",
			Data: j.Body.Declaration.Reads()}
		if cp := j.Body.Declaration.Output.Checkpoints; cp != nil {
			mj.Checkpoint = cp.Every // a job that checkpoints may be cut at a window's close
		}
		for _, a := range j.avoid {
			// From the view's Now, the same on every peer: an avoid lifts
			// in the same epoch everywhere.
			if at(a.at) && now < a.until.UnixMilli() {
				mj.Avoid = append(mj.Avoid, a.provider)
			}
		}
		mv.Jobs = append(mv.Jobs, mj)
	}
	// Use counts only for the submitters of jobs in the view: Match reads
	// nothing else of it. A node keeps an hour of leases, so decaying every
	// one of them, for every submitter, on every pass would cost a pass
	// more with each job the network has run, however few are queued.
	usage := map[string]int64{}
	for i := range mv.Jobs {
		usage[mv.Jobs[i].Submitter] = 0
	}
	for s := range usage {
		var u int64
		for _, kl := range v.bySubmitter[s] {
			t := &kl.lease.Terms
			if t.ID == "" || !at(kl.seen) || now-t.Proposed > usageWindow.Milliseconds() {
				continue
			}
			// Use is charged at the declared limit when the lease is
			// signed, and the unused part refunded when it is released.
			charge := market.Charge(kl.gpus, t.Limit)
			if !live(kl) {
				charge = min(charge, int64(kl.gpus)*kl.heldMs)
			}
			u += market.Decay(charge, now-t.Proposed, usageHalfLife.Milliseconds())
		}
		usage[s] = u
	}
	for s, u := range usage {
		if u > 0 {
			mv.Usage = append(mv.Usage, market.Usage{Submitter: s, GPUMillis: u})
		}
	}
	// Unsorted: Match sorts pointers to the jobs for itself, where sorting
	// the jobs themselves here cost more than the rest of a pass between
	// epochs over a deep queue.
	return mv
}
