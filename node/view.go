package node

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/libp2p/go-libp2p/core/peer"
)

// usageHalfLife is how fast a submitter's recent use fades from its share.
const usageHalfLife = time.Hour

// openJob is a declared job not yet leased, withdrawn or expired.
type openJob struct {
	id        string
	submitter peer.ID
	body      declarationBody
	raw       []byte    // the signed envelope, evidence of the declaration
	seen      time.Time // when this node received it
	// submittedAt is the start of the epoch in which the job entered this
	// node's view (see market.Job.SubmittedAt).
	submittedAt int64
}

// liveLease is an announced lease not yet released.
type liveLease struct {
	lease SignedLease
	seen  time.Time
}

type usageEntry struct {
	millis int64
	asOf   int64 // ms
}

// marketView is what this node knows of the jobs topic: open jobs, live
// leases and each submitter's recent use. Together with the offer view it is
// the input of Match.
type marketView struct {
	mu     sync.Mutex // guards everything below
	jobs   map[string]*openJob
	leases map[string]*liveLease
	// closed remembers jobs that were leased or withdrawn, so that a late
	// copy of their declaration does not reopen them.
	closed map[string]time.Time
	usage  map[string]usageEntry
}

func newMarketView() *marketView {
	return &marketView{
		jobs:   make(map[string]*openJob),
		leases: make(map[string]*liveLease),
		closed: make(map[string]time.Time),
		usage:  make(map[string]usageEntry),
	}
}

func (v *marketView) addJob(j *openJob) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.closed[j.id]; ok {
		return false
	}
	if _, ok := v.jobs[j.id]; ok {
		return false
	}
	v.jobs[j.id] = j
	return true
}

func (v *marketView) job(id string) (*openJob, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	j, ok := v.jobs[id]
	return j, ok
}

// submitterOf returns the submitter of a job known open.
func (v *marketView) submitterOf(id string) (peer.ID, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if j, ok := v.jobs[id]; ok {
		return j.submitter, true
	}
	return "", false
}

func (v *marketView) closeJob(id string, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.jobs, id)
	v.closed[id] = now
}

func (v *marketView) addLease(l SignedLease, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.leases[l.Terms.ID]; ok {
		return false
	}
	if _, ok := v.closed["lease:"+l.Terms.ID]; ok {
		return false // released before its announcement arrived
	}
	v.leases[l.Terms.ID] = &liveLease{lease: l, seen: now}
	delete(v.jobs, l.Terms.Job)
	v.closed[l.Terms.Job] = now
	u := v.usage[l.Terms.Submitter]
	u.millis = market.Decay(u.millis, l.Terms.Proposed-u.asOf, usageHalfLife.Milliseconds()) + market.Charge(len(l.Terms.GPUs), l.Terms.Limit)
	u.asOf = l.Terms.Proposed
	v.usage[l.Terms.Submitter] = u
	return true
}

func (v *marketView) releaseLease(r releaseBody, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closed["lease:"+r.Lease] = now
	ll, ok := v.leases[r.Lease]
	if !ok {
		return
	}
	delete(v.leases, r.Lease)
	// Refund the unused part of the charge, decayed as the charge was.
	t := ll.lease.Terms
	unused := market.Charge(len(t.GPUs), t.Limit) - int64(len(t.GPUs))*max(r.HeldMs, 0)
	if unused <= 0 {
		return
	}
	u := v.usage[t.Submitter]
	u.millis = market.Decay(u.millis, r.At-u.asOf, usageHalfLife.Milliseconds())
	u.millis = max(u.millis-market.Decay(unused, r.At-t.Proposed, usageHalfLife.Milliseconds()), 0)
	u.asOf = max(u.asOf, r.At)
	v.usage[t.Submitter] = u
}

// heldGPUs returns the UUIDs of a provider's GPUs in live leases.
func (v *marketView) heldGPUs(provider string) map[string]string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]string{}
	for _, l := range v.leases {
		if l.lease.Terms.Provider == provider {
			for _, g := range l.lease.Terms.GPUs {
				out[g] = l.lease.Terms.ID
			}
		}
	}
	return out
}

// snapshot builds Match's view for the epoch starting at start: only what
// arrived before cutoff, so that every peer, whatever its gossip delay, holds
// the same facts.
func (v *marketView) snapshot(epoch uint64, start, cutoff time.Time, offers []offerEntry) market.View {
	v.mu.Lock()
	defer v.mu.Unlock()
	mv := market.View{Epoch: epoch, Now: start.UnixMilli()}
	for _, j := range v.jobs {
		if j.seen.After(cutoff) {
			continue
		}
		if j.submittedAt == 0 {
			j.submittedAt = start.UnixMilli()
		}
		mv.Jobs = append(mv.Jobs, market.Job{ID: j.id, Submitter: j.submitter.String(), SubmittedAt: j.submittedAt, Request: j.body.Declaration.Request})
	}
	for _, l := range v.leases {
		mv.Leases = append(mv.Leases, l.lease.market())
	}
	for _, o := range offers {
		mv.Offers = append(mv.Offers, o.offer)
	}
	for s, u := range v.usage {
		mv.Usage = append(mv.Usage, market.Usage{Submitter: s, GPUMillis: market.Decay(u.millis, start.UnixMilli()-u.asOf, usageHalfLife.Milliseconds())})
	}
	// Match sorts for itself; sorting here keeps logs and hashes readable.
	slices.SortFunc(mv.Jobs, func(a, b market.Job) int { return strings.Compare(a.ID, b.ID) })
	return mv
}

// prune forgets closed jobs older than keep.
func (v *marketView) prune(now time.Time, keep time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, t := range v.closed {
		if now.Sub(t) > keep {
			delete(v.closed, id)
		}
	}
}
