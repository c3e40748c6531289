package node

import (
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ID describes this node (GET /v1/id).
func (n *Node) ID() api.ID {
	out := api.ID{
		PeerID:  n.self.String(),
		Network: n.cfg.Network,
		Shard:   n.shard.String(),
		Addrs:   n.Addrs(),
		GPUs:    []api.GPU{},
		Started: n.started.UTC(),
		Version: Version,
	}
	for _, g := range n.provider.GPUs() {
		out.GPUs = append(out.GPUs, api.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryBytes: g.MemoryBytes, Free: g.Free})
	}
	if n.compute.Runner != nil {
		out.Runtime = n.compute.Runtime
	}
	if d := n.provider.DrainStatus(); d.Mode != "" {
		out.Drain = &d
	}
	if n.compute.Offers() {
		st := n.disk.Status()
		out.Disk = &api.Disk{Size: st.Size, Free: st.Free, Reserve: st.Reserve, Promised: st.Promised, Lendable: st.Lendable,
			MaxJobDisk: st.MaxJobDisk, Cap: st.Cap, NoDisk: st.NoDisk, Why: st.Why, Jobs: st.Jobs}
		out.NoCPUJobs = n.cfg.NoCPUJobs
	}
	if n.cfg.Hours != nil {
		out.Hours = n.cfg.Hours.String()
		var until int64
		out.Closed, until = n.provider.Window(time.Now())
		out.OpenUntil = msTime(until)
	}
	return out
}

// Path says how this node is connected to p, and, when only through a
// relay, what the last hole punch with p said.
func (n *Node) Path(p peer.ID) (p2p.Path, string) { return n.punches.Path(n.host, p) }

// Peers lists the connected peers (GET /v1/peers).
func (n *Node) Peers() []api.Peer {
	out := []api.Peer{}
	for _, p := range n.host.Network().Peers() {
		path, why := n.Path(p)
		ap := api.Peer{PeerID: p.String(), Path: path.String(), PathReason: why}
		for _, c := range n.host.Network().ConnsToPeer(p) {
			ap.Addrs = append(ap.Addrs, c.RemoteMultiaddr().String())
		}
		out = append(out, ap)
	}
	// Submitters the provider struck off, connected or not, while their
	// strike is in force.
	now := time.Now()
	for _, st := range n.provider.Strikes() {
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
func (n *Node) Nodes() []api.Node {
	out := []api.Node{}
	offers := n.offers.Snapshot()
	leased := n.market.Leased(offers)
	for _, e := range offers {
		an := api.Node{
			PeerID:      e.Offer.Provider,
			GPUs:        []api.GPU{},
			CPUs:        e.Offer.CPUs,
			MemoryBytes: e.Offer.MemoryBytes,
			LastSeen:    e.LastSeen.UTC(),
			SignedAt:    time.UnixMilli(e.SignedAt).UTC(),
			Self:        e.Offer.Provider == n.self.String(),
			Reach:       e.Reach,
			Draining:    e.Offer.Draining,
			Closed:      e.Offer.Closed,
			OpenUntil:   msTime(e.Offer.OpenUntil),
			MaxJobDisk:  e.Offer.MaxJobDisk,
			NoDisk:      e.Offer.NoDisk,
			NoCPUJobs:   e.Offer.NoCPUJobs,
		}
		for _, g := range e.Offer.GPUs {
			an.GPUs = append(an.GPUs, api.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryBytes: g.MemoryBytes, Free: g.Free && !leased[e.Offer.Provider][g.UUID]})
		}
		for _, d := range e.Offer.Holdings.Roots {
			an.Held = append(an.Held, api.HeldRoot{Root: d.Root, Size: d.Size})
		}
		an.HeldFiltered = len(e.Offer.Holdings.Bloom) > 0
		out = append(out, an)
	}
	return out
}

// msTime is a time in Unix ms, as offers carry it, for the API: nil for 0.
func msTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}
