package node

import (
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/node/compute"
	"github.com/e31network/e31/node/diskroom"
	"github.com/e31network/e31/node/epoch"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/reach"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// networkQueries answer the API's questions about the network as this
// node sees it (apiserver.Network): who it is, its peers, the providers
// in view and the recent Match results. Every field is set by wireLoops
// and never changed after; each part it reads locks itself.
type networkQueries struct {
	cfg      Config
	self     peer.ID
	shard    p2p.Shard
	started  time.Time
	host     host.Host
	punches  *reach.Punches
	compute  *compute.Machine
	disk     *diskroom.Room
	provider *provider.Provider
	offers   *view.Offers
	market   *view.Market
	matches  *epoch.History
	// addrs are the node's addresses (Node.Addrs).
	addrs func() []string
	// reach is how peers reach the node now (reach.Teller.Status).
	reach func() reach.Status
}

// ID describes this node (GET /v1/id).
func (q *networkQueries) ID() api.ID {
	out := api.ID{
		PeerID:  q.self.String(),
		Network: q.cfg.Network,
		Shard:   q.shard.String(),
		Addrs:   q.addrs(),
		GPUs:    []api.GPU{},
		Started: q.started.UTC(),
		Version: Version,
	}
	for _, g := range q.provider.GPUs() {
		out.GPUs = append(out.GPUs, api.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryBytes: g.MemoryBytes, Free: g.Free})
	}
	if q.compute.Runner != nil {
		out.Runtime = q.compute.Runtime
	}
	if d := q.provider.DrainStatus(); d.Mode != "" {
		out.Drain = &d
	}
	if q.compute.Offers() {
		st := q.disk.Status()
		out.Disk = &api.Disk{Size: st.Size, Free: st.Free, Reserve: st.Reserve, Promised: st.Promised, Lendable: st.Lendable,
			MaxJobDisk: st.MaxJobDisk, Cap: st.Cap, NoDisk: st.NoDisk, Why: st.Why, Jobs: st.Jobs}
		out.NoCPUJobs = q.cfg.NoCPUJobs
	}
	if r := q.reach(); r.State != reach.StateOff {
		out.Reachability = &api.Reachability{State: r.State, Relays: r.Relays, Why: r.Why, Fix: r.Fix, Line: r.Line()}
	}
	if q.cfg.Hours != nil {
		out.Hours = q.cfg.Hours.String()
		var until int64
		out.Closed, until = q.provider.Window(time.Now())
		out.OpenUntil = msTime(until)
	}
	return out
}

// Peers lists the connected peers (GET /v1/peers).
func (q *networkQueries) Peers() []api.Peer {
	out := []api.Peer{}
	for _, p := range q.host.Network().Peers() {
		path, why := q.punches.Path(q.host, p)
		ap := api.Peer{PeerID: p.String(), Path: path.String(), PathReason: why}
		for _, c := range q.host.Network().ConnsToPeer(p) {
			ap.Addrs = append(ap.Addrs, c.RemoteMultiaddr().String())
		}
		out = append(out, ap)
	}
	// Submitters the provider struck off, connected or not, while their
	// strike is in force.
	now := time.Now()
	for _, st := range q.provider.Strikes() {
		if !now.Before(st.Until) {
			continue
		}
		s := &api.Strike{Count: st.Count, Until: st.Until.UTC(), Why: st.Why}
		if i := slices.IndexFunc(out, func(p api.Peer) bool { return p.PeerID == st.Submitter }); i >= 0 {
			out[i].Struck = s
		} else {
			out = append(out, api.Peer{PeerID: st.Submitter, Addrs: []string{}, Path: p2p.PathNone.String(), Struck: s})
		}
	}
	slices.SortFunc(out, func(a, b api.Peer) int { return strings.Compare(a.PeerID, b.PeerID) })
	return out
}

// Nodes lists the providers in view (GET /v1/nodes).
func (q *networkQueries) Nodes() []api.Node {
	out := []api.Node{}
	offers := q.offers.Snapshot()
	leased := q.market.Leased(offers)
	for _, e := range offers {
		out = append(out, q.apiNode(e, leased[e.Offer.Provider]))
	}
	return out
}

// apiNode is a provider's entry in the view as the API gives it, its GPUs
// in leased counted held whatever the offer says.
func (q *networkQueries) apiNode(e view.OfferEntry, leased map[string]bool) api.Node {
	an := api.Node{
		PeerID:      e.Offer.Provider,
		GPUs:        []api.GPU{},
		CPUs:        e.Offer.CPUs,
		MemoryBytes: e.Offer.MemoryBytes,
		LastSeen:    e.LastSeen.UTC(),
		SignedAt:    time.UnixMilli(e.SignedAt).UTC(),
		Self:        e.Offer.Provider == q.self.String(),
		Reach:       e.Reach,
		Draining:    e.Offer.Draining,
		Closed:      e.Offer.Closed,
		OpenUntil:   msTime(e.Offer.OpenUntil),
		MaxJobDisk:  e.Offer.MaxJobDisk,
		NoDisk:      e.Offer.NoDisk,
		NoCPUJobs:   e.Offer.NoCPUJobs,
		Price:       e.Offer.Price,
		Currency:    e.Currency,
	}
	for _, g := range e.Offer.GPUs {
		an.GPUs = append(an.GPUs, api.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryBytes: g.MemoryBytes, Free: g.Free && !leased[g.UUID]})
	}
	for _, d := range e.Offer.Holdings.Roots {
		an.Held = append(an.Held, api.HeldRoot{Root: d.Root, Size: d.Size})
	}
	an.HeldFiltered = len(e.Offer.Holdings.Bloom) > 0
	return an
}

var _ apiserver.LostNodes = (*networkQueries)(nil)

// LostNodes lists the providers that left the view lately for missed
// heartbeats (GET /v1/nodes?lost=1), as their last offer stood.
func (q *networkQueries) LostNodes() []api.Node {
	out := []api.Node{}
	for _, l := range q.offers.Lost(time.Now()) {
		an := q.apiNode(l.OfferEntry, nil)
		at := l.LostAt.UTC()
		an.LostAt = &at
		out = append(out, an)
	}
	return out
}

// Matches returns the recent Match results, oldest first.
func (q *networkQueries) Matches() []api.Match { return q.matches.All() }

// msTime is a time in Unix ms, as offers carry it, for the API: nil for 0.
func msTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}
