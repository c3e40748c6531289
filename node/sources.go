package node

import (
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/provider"
	"github.com/libp2p/go-libp2p/core/peer"
)

// reservedHere returns the jobs that an epoch's Match reserved this node
// for, with their submitters: the provider may stage their inputs before
// the lease.
func (n *Node) reservedHere(res market.Result) []provider.Reserved {
	var out []provider.Reserved
	for _, r := range res.Reservations {
		if r.Provider != n.self.String() {
			continue
		}
		if sub, ok := n.market.SubmitterOf(r.Job); ok {
			out = append(out, provider.Reserved{Job: r.Job, Submitter: sub})
		}
	}
	return out
}

// matchedNow reports whether Match, on this node's view as it stands now,
// gives job to prov or reserves prov for it: only that provider may stage a
// queued job's inputs before the lease. A provider stages a job it was
// given between epochs before it proposes, so the epoch's record of
// reservations alone would refuse it.
func (n *Node) matchedNow(job string, prov peer.ID) bool {
	now := time.Now()
	v := n.market.Current(now, n.offers.At(now, now), func(t time.Time) uint64 { e, _ := n.epochOf(t); return e }, n.firstEpoch)
	res := market.Match(v, market.Options{})
	p := prov.String()
	return slices.ContainsFunc(res.Assignments, func(a market.Assignment) bool { return a.Job == job && a.Provider == p }) ||
		slices.ContainsFunc(res.Reservations, func(r market.Reservation) bool { return r.Job == job && r.Provider == p })
}

// countServed counts the bytes this node served over the bulk protocol, by
// the kind of peer they went to: a provider (a peer with an offer in the
// view, fetching inputs) or any other peer (a submitter fetching output).
func (n *Node) countServed(to peer.ID, bytes int64) {
	kind := "other"
	if _, ok := n.offers.Get(to.String()); ok {
		kind = "provider"
	}
	n.metrics.served.WithLabelValues(kind).Add(float64(bytes))
}
