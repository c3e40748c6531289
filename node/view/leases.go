package view

import (
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// LeaseOfferMargin is how much later than a lease's proposal an offer must
// be signed for its free GPUs to end the lease: by then the provider has
// recorded the lease (or dropped the proposal), so its offer tells the truth.
// It must be longer than a proposal may wait for its answer: a node refuses
// a proposal TTL that is not (see node.Config). It is a constant, not a
// setting, because every peer must cut its view the same way.
const LeaseOfferMargin = 15 * time.Second

// knownLease is an announced lease, live until released.
type knownLease struct {
	lease    wire.SignedLease
	seen     Stamp
	released Stamp // zero while live
	heldMs   int64 // from the release: the GPU time actually held
	// early is a release that arrived before the lease's announcement; it
	// counts only if it names the same parties as the lease.
	early *wire.ReleaseBody
	// requeued is set when the submitter's release put the job back in
	// the queue: the job opens again at its next announcement, even if
	// this lease's own announcement closes it after the release.
	requeued bool
	// gpus is how many GPUs the lease held; lease.Terms.GPUs is dropped
	// with the signatures once the lease is long released (see Prune).
	gpus int
}

// LeaseParties returns the provider and submitter of a known lease.
func (v *Market) LeaseParties(id string) (provider, submitter string, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	kl, ok := v.leases[id]
	if !ok || kl.early != nil {
		return "", "", false
	}
	return kl.lease.Terms.Provider, kl.lease.Terms.Submitter, true
}

// AddLease records an announced lease, stamped at, and closes its job; it
// reports whether the lease is new.
func (v *Market) AddLease(l wire.SignedLease, at Stamp) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	kl, ok := v.leases[l.Terms.ID]
	if ok && kl.early == nil {
		return false
	}
	if ok && (kl.early.Provider != l.Terms.Provider || kl.early.Submitter != l.Terms.Submitter) {
		ok = false // a release by strangers: ignore it
	}
	if ok {
		kl.lease, kl.seen, kl.early, kl.gpus = l, at, nil, len(l.Terms.GPUs)
	} else {
		kl = &knownLease{lease: l, seen: at, gpus: len(l.Terms.GPUs)}
		v.leases[l.Terms.ID] = kl
		v.recent[l.Terms.ID] = kl
	}
	bs := v.bySubmitter[l.Terms.Submitter]
	if bs == nil {
		bs = make(map[string]*knownLease)
		v.bySubmitter[l.Terms.Submitter] = bs
	}
	bs[l.Terms.ID] = kl
	if sub, err := peer.Decode(l.Terms.Submitter); err == nil {
		v.closeJobLocked(l.Terms.Job, sub, at)
		if kl.requeued {
			v.requeueLocked(l.Terms.Job, sub)
		}
	}
	return true
}

// Leased returns, for each provider with an offer in offers, the GPUs that
// a lease this view knows, not released and not ended by that offer
// (offerEnds), holds: the devices its offer may still show free, since a
// provider does not re-announce its offer for every lease (see
// node.publishOffers).
func (v *Market) Leased(offers []OfferEntry) map[string]map[string]bool {
	byProvider := make(map[string]*OfferEntry, len(offers))
	for i := range offers {
		byProvider[offers[i].Offer.Provider] = &offers[i]
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	held := map[string]map[string]bool{}
	for _, kl := range v.recent {
		t := &kl.lease.Terms
		o, ok := byProvider[t.Provider]
		if !ok || !kl.released.IsZero() || offerEnds(o.SignedAt, o.Offer.GPUs, t) {
			continue
		}
		if held[t.Provider] == nil {
			held[t.Provider] = map[string]bool{}
		}
		for _, u := range t.GPUs {
			held[t.Provider][u] = true
		}
	}
	return held
}

// offerEnds reports whether a provider's offer of gpus, signed at signedAt
// (ms), ends its lease t: it was signed LeaseOfferMargin after the lease's
// proposal and shows every GPU of the lease free. A provider's offer is
// the last word on its own GPUs, even where the release was lost.
func offerEnds(signedAt int64, gpus []market.GPU, t *wire.LeaseTerms) bool {
	if signedAt <= t.Proposed+LeaseOfferMargin.Milliseconds() {
		return false
	}
	for _, u := range t.GPUs {
		if !slices.ContainsFunc(gpus, func(g market.GPU) bool { return g.UUID == u && g.Free }) {
			return false
		}
	}
	return true
}

// ReleaseLease records a release. Only a party to the lease can release
// it: validateRelease checked the signer against the known lease, or, for a
// lease not yet announced, against the parties the release names, which
// addLease then compares with the lease's own.
func (v *Market) ReleaseLease(r wire.ReleaseBody, by peer.ID, at Stamp) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if by.String() != r.Provider {
		// Only the provider's word sets the refund: a submitter ending a
		// lease (provider lost) is charged for all the time since it began.
		r.HeldMs = max(r.HeldMs, r.At-leaseStart(v.leases[r.Lease], r.At))
	}
	kl, ok := v.leases[r.Lease]
	if !ok {
		// Released before its announcement arrived: remember the end so
		// that the announcement, when it comes, is born released.
		kl = &knownLease{seen: at, early: &r}
		v.leases[r.Lease] = kl
		v.recent[r.Lease] = kl
	}
	if kl.released.IsZero() {
		kl.released = at
		kl.heldMs = max(r.HeldMs, 0)
	}
	if r.Requeued && by.String() == r.Submitter {
		kl.requeued = true
		v.requeueLocked(r.Job, by)
	}
}

// requeueLocked marks a job its submitter put back in the queue: its next
// announcement opens it again, as after a declined proposal. The caller
// holds v.mu.
func (v *Market) requeueLocked(job string, by peer.ID) {
	if j, ok := v.jobs[job]; ok && j.Submitter == by && !j.closed.IsZero() {
		j.declined = true
	} else if m, ok := v.closed[job]; ok && m.by == by {
		// Pruned to a mark while leased: without the mark, the next
		// announcement adds the job afresh, open.
		delete(v.closed, job)
	}
}

// leaseStart is when a known lease was signed, or at if it is unknown.
func leaseStart(kl *knownLease, at int64) int64 {
	if kl == nil || kl.lease.Terms.ID == "" {
		return at
	}
	return kl.lease.Terms.Proposed
}
