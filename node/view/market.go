package view

import (
	"crypto/sha256"
	"maps"
	"slices"
	"sync"
	"time"
	"unique"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// usageHalfLife is how fast a submitter's recent use fades from its share.
const usageHalfLife = time.Hour

// LeaseOfferMargin is how much later than a lease's proposal an offer must
// be signed for its free GPUs to end the lease: by then the provider has
// recorded the lease (or dropped the proposal), so its offer tells the truth.
// It must be longer than a proposal may wait for its answer: a node refuses
// a proposal TTL that is not (see node.Config). It is a constant, not a
// setting, because every peer must cut its view the same way.
const LeaseOfferMargin = 15 * time.Second

// usageWindow is how far back leases count towards recent use: past eight
// half-lives a lease weighs under 0.4% of its charge. The cut is made
// against the epoch's time, so every peer drops the same leases.
const usageWindow = 8 * usageHalfLife

// OpenJob is a declared job, open until leased or withdrawn.
type OpenJob struct {
	ID        string
	Submitter peer.ID
	Body      wire.DeclarationBody
	Seen      time.Time // when this node received it
	// Signed is when the announcement that opened it was signed; an
	// epoch's cut takes it with Seen (see Stamp). Zero: Seen.
	Signed time.Time
	// Hash is the SHA-256 of the signed declaration: a requeue that carries
	// these bytes again need not have them verified again. Zero: unknown.
	Hash      [32]byte
	refreshed time.Time // when it was last announced (declared or requeued)
	closed    Stamp     // the lease or withdrawal that closed it; zero while open
	// declined marks a job closed on its submitter's refusal of a proposal
	// rather than by a signed lease or withdrawal: a re-announcement after
	// the refusal (the submitter put the job back in the queue) opens it
	// again.
	declined bool
	// submittedAt is the start of the epoch in which the job entered this
	// node's view (see market.Job.SubmittedAt).
	submittedAt int64
	// avoid lists the providers its submitter named for it, each stamped
	// with the announcement that named it first (market.Job.Avoid).
	avoid []avoidMark
	// submitter is Submitter as text, encoded once when the job is added:
	// base58 costs microseconds, and every pass over a deep queue would
	// pay it for every job.
	submitter string
}

// avoidMark is a provider a job avoids, since the announcement at.
type avoidMark struct {
	provider string
	at       Stamp
}

// knownLease is an announced lease, live until released.
type knownLease struct {
	lease    wire.SignedLease
	seen     Stamp
	released Stamp // zero while live
	heldMs   int64 // from the release: the GPU time actually held
	// early is a release that arrived before the lease's announcement; it
	// counts only if it names the same parties as the lease.
	early *wire.ReleaseBody
	// gpus is how many GPUs the lease held; lease.Terms.GPUs is dropped
	// with the signatures once the lease is long released (see Prune).
	gpus int
}

// Market is what this node knows of the jobs topic: jobs and leases,
// each with when it arrived and when it ended, so that the view of an epoch
// can be taken as it stood at the epoch's cutoff. Together with the offer
// view it is the input of Match.
type Market struct {
	mu     sync.Mutex // guards everything below
	jobs   map[string]*OpenJob
	leases map[string]*knownLease
	// closed remembers jobs that were leased or withdrawn before (or
	// without) their declaration arriving, and by whom (the submitter
	// named by the lease, or the withdrawal's signer), so that a late copy
	// of the declaration does not open them, unless the closer was not its
	// submitter; and jobs long closed, in place of their entry in jobs.
	closed map[string]closedMark
	// open counts each submitter's open jobs, to bound them.
	open map[peer.ID]int
	// jobsPeak is the most entries jobs has held since it was last made
	// anew: a Go map keeps the room it grew to, so once a burst's jobs are
	// pruned to marks, Prune copies what is left into a new one.
	jobsPeak int
	// recent holds the leases that Prune has not slimmed: those not
	// released, or released or announced less than closedBodyKeep ago,
	// which are all that any epoch's view can still count live. A pass
	// between epochs reads these rather than every lease of the usage
	// window (a busy network's hours of history).
	recent map[string]*knownLease
	// bySubmitter holds every announced lease by its submitter, for the
	// use of the submitters whose jobs are in a view.
	bySubmitter map[string]map[string]*knownLease
	// slimmedNewest is the newest signing time among the slimmed leases,
	// as of the last Prune: their part in a view's Now.
	slimmedNewest time.Time
}

// closedBodyKeep is how long a job leased or withdrawn keeps its
// declaration in the view, and a released lease its devices and its place
// among the leases a pass reads (Market.recent): longer than any epoch's
// cutoff lags behind the messages that arrived before it (the epoch delay,
// at most half of MaxEpoch, plus the signing clock's allowed skew, 30s).
const closedBodyKeep = time.Minute

// MaxEpoch is the longest epoch a view supports (see closedBodyKeep).
const MaxEpoch = time.Minute

// maxOpenJobsPerSubmitter bounds what one peer can make every view hold
// and every epoch's Match walk.
const maxOpenJobsPerSubmitter = 10_000

type closedMark struct {
	at Stamp
	by peer.ID
	// declared: by is the job's declarer, from a declaration this node
	// verified, not only the closer's word (see Prune).
	declared bool
}

// NewMarket returns an empty view.
func NewMarket() *Market {
	return &Market{
		jobs:   make(map[string]*OpenJob),
		leases: make(map[string]*knownLease),
		closed: make(map[string]closedMark),
		open:   make(map[peer.ID]int),

		recent:      make(map[string]*knownLease),
		bySubmitter: make(map[string]map[string]*knownLease),
	}
}

// AddJob records a declared job; it reports whether the job is new and
// open. A job already known is only marked re-announced.
func (v *Market) AddJob(j *OpenJob) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.jobs[j.ID]; ok {
		return v.refreshLocked(old, j.Seen)
	}
	j.refreshed = j.Seen
	j.submitter = j.Submitter.String()
	if m, ok := v.closed[j.ID]; ok && m.by == j.Submitter {
		j.closed = m.at
	}
	if j.closed.IsZero() {
		if v.open[j.Submitter] >= maxOpenJobsPerSubmitter {
			return false
		}
		v.open[j.Submitter]++
	}
	v.jobs[j.ID] = j
	return j.closed.IsZero()
}

// KnownDeclaration reports whether raw is, byte for byte, the signed
// declaration of a job in the view, declared by signer: bytes this node
// verified when they first arrived.
func (v *Market) KnownDeclaration(raw []byte, signer peer.ID) bool {
	h := sha256.Sum256(raw)
	v.mu.Lock()
	defer v.mu.Unlock()
	j, ok := v.jobs[wire.JobIDOf(h)]
	return ok && j.Hash == h && j.Submitter == signer
}

// Reannounced marks as re-announced at now the job whose signed
// declaration is raw, byte for byte, declared by signer, as AddJob would
// with that declaration decoded; known is false when the view does not
// hold those bytes from that signer, and the caller must decode and add
// them. A requeue repeats every queued job every few seconds: this keeps
// the cost of each to a hash and a lookup, not a decode.
func (v *Market) Reannounced(raw []byte, signer peer.ID, now time.Time) (known, opened bool) {
	h := sha256.Sum256(raw)
	v.mu.Lock()
	defer v.mu.Unlock()
	old, ok := v.jobs[wire.JobIDOf(h)]
	if !ok || old.Hash != h || old.Submitter != signer {
		return false, false
	}
	return true, v.refreshLocked(old, now)
}

// refreshLocked marks a job held re-announced at seen, and opens it
// again if its submitter had declined it before; it reports whether it
// opened it. The caller holds v.mu.
func (v *Market) refreshLocked(old *OpenJob, seen time.Time) bool {
	old.refreshed = seen
	if old.declined && seen.After(old.closed.Arrived) {
		old.closed, old.declined = Stamp{}, false
		v.open[old.Submitter]++
		return true
	}
	return false
}

// OpenCount is how many jobs are open now.
func (v *Market) OpenCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, c := range v.open {
		n += c
	}
	return n
}

// Job returns a job that is open now.
func (v *Market) Job(id string) (*OpenJob, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	j, ok := v.jobs[id]
	if !ok || !j.closed.IsZero() {
		return nil, false
	}
	return j, true
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

// SubmitterOf returns the submitter of a job whose declaration arrived.
func (v *Market) SubmitterOf(id string) (peer.ID, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if j, ok := v.jobs[id]; ok {
		return j.Submitter, true
	}
	if m, ok := v.closed[id]; ok && m.declared {
		return m.by, true
	}
	return "", false
}

// Decline closes a job whose submitter refused a proposal for it because it
// is no longer queued; unlike CloseJob, a later re-announcement of the job
// opens it again.
func (v *Market) Decline(id string, by peer.ID, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if j, ok := v.jobs[id]; ok && j.Submitter == by && j.closed.IsZero() {
		j.closed, j.declined = Local(now), true
		v.dropOpen(j.Submitter)
	}
}

// CloseJob closes a job on the word of by, who must be its submitter; at
// stamps the withdrawal.
func (v *Market) CloseJob(id string, by peer.ID, at Stamp) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closeJobLocked(id, by, at)
}

func (v *Market) closeJobLocked(id string, by peer.ID, at Stamp) {
	if j, ok := v.jobs[id]; ok {
		if j.Submitter == by && j.closed.IsZero() {
			j.closed = at
			v.dropOpen(j.Submitter)
		}
		return
	}
	if _, ok := v.closed[id]; !ok {
		v.closed[id] = closedMark{at: at, by: by}
	}
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
		// The job's next announcement opens it again, as after a declined
		// proposal.
		if j, ok := v.jobs[r.Job]; ok && j.Submitter == by && !j.closed.IsZero() {
			j.declined = true
		} else if m, ok := v.closed[r.Job]; ok && m.by == by {
			// Pruned to a mark while leased: without the mark, the next
			// announcement adds the job afresh, open.
			delete(v.closed, r.Job)
		}
	}
}

// AddAvoid records that the submitter by names providers for its job id to
// avoid, in the announcement stamped at. Lists only grow: a provider named
// once stays named while the job is in the view, whatever order the
// announcements arrive in.
func (v *Market) AddAvoid(id string, by peer.ID, providers []string, at Stamp) {
	v.mu.Lock()
	defer v.mu.Unlock()
	j, ok := v.jobs[id]
	if !ok || j.Submitter != by {
		return
	}
	for _, p := range providers {
		i := slices.IndexFunc(j.avoid, func(m avoidMark) bool { return m.provider == p })
		switch {
		case i < 0:
			if len(j.avoid) < 4*wire.MaxAvoid {
				j.avoid = append(j.avoid, avoidMark{provider: p, at: at})
			}
		case signedOf(at).Before(signedOf(j.avoid[i].at)):
			j.avoid[i].at = at
		}
	}
}

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
		for _, a := range j.avoid {
			if at(a.at) {
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
	live := func(kl *knownLease) bool { return !at(kl.released) && !endedByOffer(&kl.lease.Terms) }
	for _, kl := range leases {
		if live(kl) {
			mv.Leases = append(mv.Leases, kl.lease.Market())
		}
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
			delete(v.jobs, id)
			v.dropOpen(j.Submitter)
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
			delete(v.jobs, id)
		case !j.declined && now.Sub(j.closed.Arrived) > closedBodyKeep:
			// Leased or withdrawn for good, and past every epoch's cutoff
			// that could still count it open: only a mark is kept, a
			// tenth of the job's size, so that the view grows with the
			// queue and not with the history. A late copy of the
			// declaration finds the mark and stays closed (AddJob).
			delete(v.jobs, id)
			v.closed[id] = closedMark{at: j.closed, by: peer.ID(intern(string(j.Submitter))), declared: true}
		}
	}
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

// leaseStart is when a known lease was signed, or at if it is unknown.
func leaseStart(kl *knownLease, at int64) int64 {
	if kl == nil || kl.lease.Terms.ID == "" {
		return at
	}
	return kl.lease.Terms.Proposed
}

// dropOpen counts one open job of a submitter fewer. The caller holds v.mu.
func (v *Market) dropOpen(p peer.ID) {
	if v.open[p]--; v.open[p] <= 0 {
		delete(v.open, p)
	}
}
