package scale

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/e31network/e31/market"
)

// simMarket is one market of a simulated design: a hash shard, a class's
// subshard or the whole network. Each round it runs the real market.Match
// on a View of its offers, open jobs and live leases, assembled as a node
// assembles it (node/view): every device offered free, the live leases
// holding theirs; a job's SubmittedAt the round it entered this market;
// each submitter's use of this market decayed with an hour's half-life.
// It is used by one goroutine.
type simMarket struct {
	name string
	// digest names the market (Class, Index, Count) and, once published,
	// holds what it last said of itself.
	digest market.Digest
	// offers, by provider ID, and offerOf are fixed once the market is
	// built.
	offers  []market.Offer
	offerOf map[string]int
	// used is the GPUs leased on each offer.
	used   []int
	leases []simLease
	open   []openJob
	use    map[string]usage
	// never caches market.NeverHeld's answer per request.
	never map[market.Request]bool
}

type simLease struct {
	lease market.Lease
	offer int
	end   int64 // ms since the start: the job's run, not its limit
}

// openJob is a job declared in the market and not yet leased.
type openJob struct {
	idx      int // in the design's jobs
	job      market.Job
	declared int64
}

// usage is a submitter's decayed GPU use, as of at.
type usage struct{ ms, at int64 }

// usageHalfLife is the half-life of a submitter's use, node/view's.
const usageHalfLife = 3600_000

func newSimMarket(name string, offers []market.Offer) *simMarket {
	slices.SortFunc(offers, func(a, b market.Offer) int { return cmp.Compare(a.Provider, b.Provider) })
	m := &simMarket{
		name: name, offers: offers, offerOf: make(map[string]int, len(offers)), used: make([]int, len(offers)),
		use: map[string]usage{}, never: map[market.Request]bool{},
	}
	for i, o := range offers {
		m.offerOf[o.Provider] = i
	}
	return m
}

// neverHeld reports whether no offer of the market could ever hold r.
func (m *simMarket) neverHeld(r market.Request) bool {
	n, ok := m.never[r]
	if !ok {
		n = market.NeverHeld(r, m.offers) != ""
		m.never[r] = n
	}
	return n
}

// release ends the leases whose jobs have run their time by now.
func (m *simMarket) release(now int64) {
	m.leases = slices.DeleteFunc(m.leases, func(l simLease) bool {
		if l.end > now {
			return false
		}
		m.used[l.offer] -= len(l.lease.GPUs)
		return true
	})
}

// declare opens job idx in the market at now.
func (m *simMarket) declare(idx int, j market.Job, now int64) {
	j.SubmittedAt = now
	m.open = append(m.open, openJob{idx: idx, job: j, declared: now})
}

// withdraw takes the open jobs marked in drop (by position in open) out
// of the market: jobs that move elsewhere.
func (m *simMarket) withdraw(drop []bool) {
	k := 0
	m.open = slices.DeleteFunc(m.open, func(openJob) bool { k++; return drop[k-1] })
}

// placement is a job leased by a round's Match.
type placement struct {
	idx      int
	provider *market.Offer
}

// match runs one round: Match on the market's view, each assignment
// carried out as a lease that holds its GPUs for run(idx).
func (m *simMarket) match(epoch uint64, now int64, run func(idx int) int64) ([]placement, error) {
	if len(m.open) == 0 {
		return nil, nil
	}
	v := market.View{Epoch: epoch, Now: now, Offers: m.offers, Jobs: make([]market.Job, len(m.open))}
	byID := make(map[string]int, len(m.open))
	for i, o := range m.open {
		v.Jobs[i] = o.job
		byID[o.job.ID] = i
	}
	v.Leases = make([]market.Lease, len(m.leases))
	for i, l := range m.leases {
		v.Leases[i] = l.lease
	}
	seen := map[string]bool{}
	for _, o := range m.open {
		if s := o.job.Submitter; !seen[s] {
			seen[s] = true
			if u := m.use[s]; u.ms > 0 {
				v.Usage = append(v.Usage, market.Usage{Submitter: s, GPUMillis: market.Decay(u.ms, now-u.at, usageHalfLife)})
			}
		}
	}
	res := market.Match(v, market.Options{})
	var placed []placement
	taken := make([]bool, len(m.open))
	for _, a := range res.Assignments {
		oi, ok := byID[a.Job]
		pi, okp := m.offerOf[a.Provider]
		if !ok || !okp || taken[oi] {
			return nil, fmt.Errorf("market %s: Match assigned %s to %s, which its view does not hold open", m.name, a.Job, a.Provider)
		}
		taken[oi] = true
		o := m.open[oi]
		r := o.job.Request
		m.leases = append(m.leases, simLease{
			lease: market.Lease{
				ID: "l-" + o.job.ID, Job: o.job.ID, Provider: a.Provider, Submitter: o.job.Submitter,
				GPUs: a.GPUs, CPUs: r.CPUs, MemoryBytes: uint64(r.Memory), Start: now, Limit: r.Limit,
			},
			offer: pi,
			end:   now + run(o.idx),
		})
		m.used[pi] += len(a.GPUs)
		u := m.use[o.job.Submitter]
		m.use[o.job.Submitter] = usage{ms: market.Decay(u.ms, now-u.at, usageHalfLife) + market.Charge(len(a.GPUs), r.Limit), at: now}
		placed = append(placed, placement{idx: o.idx, provider: &m.offers[pi]})
	}
	k := 0
	m.open = slices.DeleteFunc(m.open, func(openJob) bool { k++; return taken[k-1] })
	return placed, nil
}

// publish makes the market's digest as of now, as the member that
// publishes it would: its providers, their boxes by GPUs free, its queue
// and the inputs its providers hold.
func (m *simMarket) publish(now int64) {
	d := market.Digest{Class: m.digest.Class, Index: m.digest.Index, Count: m.digest.Count, Providers: len(m.offers)}
	held := map[string]*market.HeldRoot{}
	for i, o := range m.offers {
		free := min(len(o.GPUs)-m.used[i], market.MaxDigestBuckets-1)
		for len(d.FreeBoxes) <= free {
			d.FreeBoxes = append(d.FreeBoxes, 0)
		}
		d.FreeBoxes[free]++
		for _, r := range o.Holdings.Roots {
			h := held[r.Root]
			if h == nil {
				h = &market.HeldRoot{Root: r.Root, Bytes: r.Size}
				held[r.Root] = h
			}
			h.Holders++
		}
	}
	oldest := now
	for _, o := range m.open {
		d.Queued++
		d.QueuedGPUs += o.job.Request.GPUs
		oldest = min(oldest, o.job.SubmittedAt)
	}
	d.OldestWait = market.Duration(now - oldest)
	for _, h := range held {
		d.Held = append(d.Held, *h)
	}
	slices.SortFunc(d.Held, func(a, b market.HeldRoot) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Root, b.Root)
	})
	d.Held = d.Held[:min(len(d.Held), market.MaxDigestHeld)]
	m.digest = d
}
