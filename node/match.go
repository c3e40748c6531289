package node

import (
	"fmt"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/epoch"
	"github.com/e31network/e31/node/offer"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/reach"
	"github.com/e31network/e31/node/view"
	"github.com/libp2p/go-libp2p/core/peer"
)

// newClock numbers the epochs of cfg, an adaptive delay read from offers.
func newClock(cfg Config, offers *view.Offers) epoch.Clock {
	return epoch.Clock{Length: cfg.Epoch, Fixed: cfg.EpochDelay, Rule: view.DefaultDelayRule(cfg.Epoch), Offers: offers}
}

// wireLoops builds the loops that feed the roles, on the roles wireRoles
// built: the epoch's Match, the pass between epochs, both carrying out
// what Match decides through matchActions, the offer's publisher and the
// gossip's feed; and the answers to the API's questions about the
// network.
func (n *Node) wireLoops() {
	self := n.self.String()
	act := matchActions{n}
	n.epochs = &epoch.Loop{Clock: n.clock, Market: n.market, Self: self, Actions: act, Prune: n.prune,
		Log: n.log, Panicked: n.metrics.Panicked}
	n.fast = &epoch.FastPath{Clock: n.clock, Market: n.market, Self: self, Actions: act,
		Full: func() bool { c := n.provider.Counts(); return c.Held >= c.GPUs },
		Log:  n.log, Panicked: n.metrics.Panicked}
	n.offer = &offer.Publisher{Self: self, CPUs: n.cfg.CPUs, MemoryBytes: n.cfg.MemoryBytes,
		RequireImage: n.cfg.RequireImage, MaxJobDisk: n.cfg.MaxJobDisk, Heartbeat: n.cfg.Heartbeat,
		Prices: n.cfg.Prices, Currency: n.cfg.Currency,
		Provider: n.provider, Reach: func() (string, bool) { return reach.Offered(n.host, n.natOn) },
		Store: n.store, Gossip: n.gossip, Delays: n.delays, Addrs: n.Addrs, Log: n.log}
	n.feed = &gossipFeed{log: n.log, self: n.self, started: n.started, shard: n.shard, heartbeat: n.cfg.Heartbeat,
		offers: n.offers, market: n.market, delays: n.delays, peers: n.peers, provider: n.provider,
		submitter: n.submitter, units: n.units, signalWork: n.signalWork}
	if n.follows != nil {
		n.follows.feed, n.follows.open, n.follows.waits = n.feed, n.submitter.Markets, n.submitter.NoteFollowedWaits
	}
	n.net = &networkQueries{cfg: n.cfg, self: n.self, shard: n.shard, started: n.started, host: n.host,
		punches: n.punches, compute: n.compute, disk: n.disk, provider: n.provider, offers: n.offers,
		market: n.market, matches: &n.matches, addrs: n.Addrs, reach: n.reach.Status}
}

// matchActions carry out a Match result on this node's roles and its
// history (epoch.Actions, in the order epoch.Carry states).
type matchActions struct{ n *Node }

func (a matchActions) RecordWaits(res market.Result)        { a.n.submitter.RecordWaits(res) }
func (a matchActions) RecordReservations(res market.Result) { a.n.submitter.RecordReservations(res) }
func (a matchActions) RecordMatch(m api.Match)              { a.n.matches.Add(m) }

func (a matchActions) Propose(as market.Assignment, epoch uint64, viewHash string) {
	a.n.provider.Propose(as, epoch, viewHash)
}

// Prestage hands the provider the jobs Match reserved it for, with their
// submitters: it may stage their inputs before the lease.
func (a matchActions) Prestage(reserved []market.Reservation) {
	var jobs []provider.Reserved
	for _, r := range reserved {
		if sub, ok := a.n.market.SubmitterOf(r.Job); ok {
			jobs = append(jobs, provider.Reserved{Job: r.Job, Submitter: sub})
		}
	}
	a.n.provider.Prestage(jobs)
}

// signalWork says that a job was declared or requeued, or that GPUs came
// free: a provider tries to lease at once rather than at the next epoch.
func (n *Node) signalWork() { n.fast.Signal() }

// signalOfferChanged says the provider's GPUs changed: the offer is looked
// at again, and a pass between epochs tried, since GPUs may have come free.
func (n *Node) signalOfferChanged() {
	n.offer.Changed()
	n.signalWork()
}

// prune forgets what no longer matters, at the start of each epoch's pass:
// closed jobs and released leases after an hour, open jobs not re-announced
// for ten heartbeats (a submitter re-announces every requeueEvery),
// withdrawals after an hour.
func (n *Node) prune() {
	now := time.Now()
	n.market.Prune(now, time.Hour, max(10*n.cfg.Heartbeat, 3*requeueEvery*n.cfg.Heartbeat))
	n.provider.Prune(now, time.Hour)
	n.logEvictions()
}

// logEvictions names, once a pass, the submitters whose jobs the view's
// bounds evicted since the last: under a flood a job is evicted for every
// one declared, so a line per job would be the flood again, in the log.
func (n *Node) logEvictions() {
	e := n.market.TakeEvictions()
	if e.Jobs() == 0 && e.Refused == 0 {
		return
	}
	const named = 10
	subs := make([]string, 0, min(len(e.Submitters), named))
	for _, s := range e.Submitters[:min(len(e.Submitters), named)] {
		subs = append(subs, fmt.Sprintf("%s:%d", s.Submitter, s.Jobs))
	}
	n.log.Warn("view full: jobs evicted, declarations refused", "evicted", e.Jobs(), "refused", e.Refused,
		"submitters", len(e.Submitters), "most", subs)
}

// viewBounds is the view's bounds of cfg for a node that is self, whose
// offers view dates the providers: one that has offered for a while is no
// new identity when it first submits.
func viewBounds(b view.Bounds, self peer.ID, offers *view.Offers) view.Bounds {
	b.Self = self
	b.SeenSince = func(id peer.ID) (time.Time, bool) { return offers.FirstSeen(id.String()) }
	return b
}
