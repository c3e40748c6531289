package view

import (
	"maps"
	"time"
	"unique"

	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Prune forgets jobs closed, and leases released, more than keep ago,
// leases too old to count towards use, and open jobs whose submitter has
// not re-announced them for stale: a submitter that left for good does not
// keep providers proposing to it.
func (v *Market) Prune(now time.Time, keep, stale time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	peakBefore := len(v.jobs)
	for id, j := range v.jobs {
		if j.closed.IsZero() && now.Sub(j.refreshed) > stale {
			v.open.drop(j)
			v.removeJobLocked(id, j, now)
		}
	}
	for id, m := range v.closed {
		if now.Sub(m.at.Arrived) > keep {
			delete(v.closed, id)
		}
	}
	for id, j := range v.jobs {
		switch {
		case j.closed.IsZero():
		case now.Sub(j.closed.Arrived) > keep:
			v.removeJobLocked(id, j, now)
		case !j.declined && now.Sub(j.closed.Arrived) > closedBodyKeep:
			// Leased or withdrawn for good, and past every epoch's cutoff
			// that could still count it open: only a mark is kept, a
			// tenth of the job's size, so that the view grows with the
			// queue and not with the history. A late copy of the
			// declaration finds the mark and stays closed (AddJob).
			v.removeJobLocked(id, j, now)
			v.closed[id] = closedMark{at: j.closed, by: peer.ID(intern(string(j.Submitter))), declared: true}
		}
	}
	v.hold.retier(now)
	v.hold.forget(now, keep)
	v.jobsPeak = max(v.jobsPeak, peakBefore)
	if n := len(v.jobs); v.jobsPeak > shrinkAbove && n < v.jobsPeak/4 {
		v.jobs, v.jobsPeak = maps.Clone(v.jobs), n
	}
	v.slimmedNewest = time.Time{}
	for id, kl := range v.leases {
		switch {
		case kl.released.IsZero():
		case now.Sub(kl.released.Arrived) > max(usageWindow, keep):
			delete(v.leases, id)
			delete(v.recent, id)
			if bs := v.bySubmitter[kl.lease.Terms.Submitter]; bs != nil {
				delete(bs, id)
				if len(bs) == 0 {
					delete(v.bySubmitter, kl.lease.Terms.Submitter)
				}
			}
			continue
		case kl.early == nil && now.Sub(kl.released.Arrived) > closedBodyKeep && now.Sub(kl.seen.Arrived) > closedBodyKeep:
			// Released and announced, both past every epoch's cutoff
			// that could still count it live or leave it out (a release
			// can arrive long before its lease's announcement): what
			// recent use and LeaseParties read is kept for the usage
			// window, the rest (signatures, devices, the claim) dropped,
			// so that hours of history cost a fraction of the lease's
			// size, and a pass nothing.
			// The parties' IDs are the same few strings over and over,
			// each decoded apart: one copy of each is kept.
			if kl.lease.ProviderSig != nil {
				t := kl.lease.Terms
				kl.lease = wire.SignedLease{Terms: wire.LeaseTerms{ID: t.ID, Provider: intern(t.Provider), Submitter: intern(t.Submitter), Limit: t.Limit, Proposed: t.Proposed}}
			}
			delete(v.recent, id)
		}
		if _, ok := v.recent[id]; ok {
			continue
		}
		for _, t := range [...]time.Time{signedOf(kl.seen), signedOf(kl.released)} {
			if t.After(v.slimmedNewest) {
				v.slimmedNewest = t
			}
		}
	}
}

// shrinkAbove is the size below which a map is never made anew: copying it
// would save too little to matter.
const shrinkAbove = 1024

// intern returns the one copy of s that long-kept marks share; it is
// dropped when no mark holds it any more.
func intern(s string) string { return unique.Make(s).Value() }
