package node

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/epoch"
	"github.com/e31network/e31/node/metrics"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/submitter"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// wireRoles builds the provider and the submitter and the stream handlers
// that reach them.
func (n *Node) wireRoles() {
	calls := caller{n}
	// How this node is connected to a peer, and, when only through a
	// relay, what the last hole punch with it said.
	path := func(p peer.ID) (p2p.Path, string) { return n.punches.Path(n.host, p) }
	n.provider = provider.New(provider.Config{
		Price:           n.cfg.Prices.For(machineGPUs(n.compute)),
		DataDir:         n.cfg.DataDir,
		Hours:           n.providerHours(),
		ProposalTTL:     n.cfg.ProposalTTL,
		ReceiptInterval: n.cfg.ReceiptInterval,
		Grace:           n.cfg.Grace,
		GangStartWithin: n.cfg.GangStartWithin,
		OutputTimeout:   n.cfg.OutputTimeout,
		Retention:       n.cfg.Retention,
		EventTimeout:    n.cfg.EventTimeout,
		ReceiptTimeout:  n.cfg.ReceiptTimeout,
		ImagePull:       n.cfg.ImagePull,
		RequireImage:    n.cfg.RequireImage,
		MaxJobDisk:      n.cfg.MaxJobDisk,
		NoCPUJobs:       n.cfg.NoCPUJobs,
		SingleSource:    n.cfg.SingleSource,
		Prestage:        !n.cfg.NoPrestage,
		Limits:          content.Limits{MaxBytes: n.cfg.MaxInputBytes, MaxEntries: n.cfg.MaxEntries, MaxDepth: n.cfg.MaxDepth},
	}, provider.Deps{
		Key: n.key, Self: n.self, GPUs: n.compute.GPUs, Store: n.store, Fetcher: n.exchange, Ledger: n.ledger,
		Calls: calls, Gossip: n.gossip, Jobs: n.market, Access: n.access, Records: n.state, AddrBook: n.peers,
		Metrics: n.metrics.Provider, Log: n.log, OfferChanged: n.signalOfferChanged, Rematch: n.signalWork, HeldElsewhere: n.heldElsewhere, Path: path,
		Runner: n.compute.Runner, Images: n.providerImages(), Misbehave: n.cfg.Misbehave,
		Disks: n.compute.Disks(), Room: n.disk, SeeGPUs: n.compute.SeeGPUs(), ProbeGPUs: n.compute.ProbeGPUs(), OpenGang: n.openGang(),
	})
	n.submitter = submitter.New(submitter.Config{
		ProposalTTL:       n.cfg.ProposalTTL,
		Heartbeat:         n.cfg.Heartbeat,
		OutputTimeout:     n.cfg.OutputTimeout,
		ProviderLostAfter: n.cfg.ProviderLostAfter,
		MaxInputBytes:     n.cfg.MaxInputBytes,
		MaxOutputBytes:    n.cfg.MaxOutputBytes,
		RequeueEvery:      requeueEvery * n.cfg.Heartbeat,
		NoLocality:        n.cfg.NoLocality,
		LocalityWait:      n.cfg.LocalityWait,
		// A provider proposes in the epoch Match assigns it a job; a few
		// epochs more cover a view that lags, and a proposal's wait.
		AvoidAfter: n.cfg.ProposalTTL + 3*n.cfg.Epoch,
		AvoidFor:   n.cfg.AvoidFor,
		// An honest provider offers a receipt one interval into the lease,
		// staging or not, and another every interval after.
		RunWithin:   2*n.cfg.ReceiptInterval + n.cfg.ProposalTTL,
		ReceiptsDue: 2*n.cfg.ReceiptInterval + n.cfg.ReceiptTimeout,
		MoveAfter:   n.cfg.MoveAfter,
	}, submitter.Deps{
		Key: n.key, Self: n.self, Store: n.raw.submitterStore(), Fetcher: n.exchange, Ledger: n.ledger, Calls: calls, Path: path,
		Gossip: n.gossip, Offers: n.offers, Leases: n.market, Access: n.access, Records: n.state,
		Metrics: n.metrics.Submitter, Log: n.log, Addrs: n.Addrs, Images: n.raw.submitterImages(), Reach: n.peers.Reach,
		Placement: n.placement(), TaskNotQueued: n.taskNotQueued, Markets: n.markets(),
	})
	n.handlers[wire.ProtoLease] = n.submitter.HandleProposal
	n.handlers[wire.ProtoEvent] = n.submitter.HandleEvent
	n.handlers[wire.ProtoProbe] = submitter.JudgeProbes(n.submitter).Handle
	n.handlers[wire.ProtoOutput] = n.submitter.HandleOutput
	n.handlers[wire.ProtoReceipt] = n.submitter.HandleReceipt
	n.handlers[wire.ProtoLogs] = n.provider.HandleLogs
	n.handlers[wire.ProtoStage] = n.submitter.HandleStage
	n.handlers[wire.ProtoRelay] = n.provider.HandleRelay
	n.handlers[wire.ProtoGang] = n.provider.HandleGang
	n.handlers[wire.ProtoVerdict] = provider.NewVerdictInbox(n.self, n.ledger, n.log).Handle
	n.handlers[wire.ProtoWithdraw] = func(_ context.Context, from peer.ID, raw json.RawMessage) (any, error) {
		var req wire.WithdrawRequest
		if err := p2p.DecodeStrict(raw, &req); err != nil {
			return nil, err
		}
		n.provider.Withdraw(req.Job, from)
		return struct{}{}, nil
	}
}

// placement judges, for the submitter, proposals that no epoch's pass of
// this node gave their provider: a pass on the view as it stands, as the
// provider's own pass between epochs made. Without the fast path no
// provider makes such passes, and only epoch passes count.
func (n *Node) placement() submitter.Placement {
	if n.cfg.NoFastPath {
		return nil
	}
	return &epoch.Judge{Clock: n.clock, Market: n.market, Log: n.log, Panicked: n.metrics.Panicked}
}

// requeueEvery is how many heartbeats pass between re-announcements of
// queued jobs; prune drops an open job not re-announced for three times
// that.
const requeueEvery = 3

// handlerTimeouts bound how long each direct-stream request may take.
func (n *Node) handlerTimeout(proto protocol.ID) time.Duration {
	switch proto {
	case wire.ProtoLease:
		return n.cfg.ProposalTTL
	case wire.ProtoOutput:
		return n.cfg.OutputTimeout
	}
	return streamTimeout
}

// streamTimeout bounds a step event, a receipt or a withdrawal request: each
// answers from memory and the ledger, in well under a second.
const streamTimeout = 30 * time.Second

// providerHours is the provider's hours: none (nil) unless set, never a
// typed nil.
func (n *Node) providerHours() provider.Hours {
	if n.cfg.Hours == nil {
		return nil
	}
	return n.cfg.Hours
}

// providerImages is the provider's image dependency: the library where
// image jobs run, none elsewhere.
func (n *Node) providerImages() provider.Images {
	if !n.imagesRun {
		return nil
	}
	return n.images
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
	kind := metrics.ToOther
	if _, ok := n.offers.Get(to.String()); ok {
		kind = metrics.ToProvider
	}
	n.metrics.Served(kind, bytes)
	n.submitter.Served(to, bytes)
}
