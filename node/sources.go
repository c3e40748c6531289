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

// heldElsewhere reports whether another provider's offer, as this node
// sees it now, lists every one of roots among its holdings.
func (n *Node) heldElsewhere(roots []string) bool {
	now := time.Now()
	self := n.self.String()
	for _, o := range n.offers.At(now, now) {
		if o.Provider != self && !slices.ContainsFunc(roots, func(r string) bool { return !o.Holdings.Lists(r) }) {
			return true
		}
	}
	return false
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
