package node

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

func (n *Node) signalOfferChanged() {
	select {
	case n.offerChanged <- struct{}{}:
	default:
	}
	n.signalWork() // GPUs may have come free
}

// ownOffer is the offer this node publishes, and how peers reach it.
func (n *Node) ownOffer() (market.Offer, string) {
	reach, unreachable := n.reach()
	o := market.Offer{Provider: n.self.String(), CPUs: n.cfg.CPUs, MemoryBytes: n.cfg.MemoryBytes, GPUs: n.provider.GPUs(),
		Images: n.provider.Images(), RequireImage: n.cfg.RequireImage, Unreachable: unreachable,
		MaxJobDisk: n.cfg.MaxJobDisk}
	return o, reach
}

// publishOffers publishes the node's offer at start, whenever it changes and
// every heartbeat. A node with no GPUs, or no runtime to run jobs in, offers
// nothing.
//
// A change that only takes GPUs, for a lease, is not published: the lease's
// own announcement tells every peer that those GPUs are held, and its
// release that they are free again (view.Market marks them leased in
// between). So a lease and its release cost the network two messages, not
// four. A GPU that the last published offer showed held and that is now
// free is published at once, or peers would keep it out of Match until the
// next heartbeat.
func (n *Node) publishOffers(ctx context.Context) {
	if len(n.gpus) == 0 || n.runner == nil {
		return
	}
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	// What the store holds changes without the GPUs changing (staging done,
	// retention), so it is looked at more often than the heartbeat and a
	// change is published at once.
	check := time.NewTicker(min(n.cfg.Heartbeat, holdingsCheckEvery))
	defer check.Stop()
	held := newHeldContent(n.store)
	var holdings market.Holdings
	refresh := func() (changed bool) {
		h, err := held.summary(ctx)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("offer holdings", "err", err)
			}
			return false
		}
		changed = !h.Equal(holdings)
		holdings = h
		return changed
	}
	refresh()
	var published market.Offer
	for {
		offer, reach := n.ownOffer()
		offer.Holdings = holdings
		published = offer
		body := wire.OfferBody{
			Offer:       offer,
			Reach:       reach,
			Addrs:       n.Addrs(),
			HeartbeatMs: n.cfg.Heartbeat.Milliseconds(),
			GossipP99Ms: n.delays.Announced(),
		}
		if n.provider.Silent() {
			// Misbehaving on purpose (Config.Misbehave): nothing more is sent.
		} else if _, err := n.gossip.Publish(ctx, p2p.TopicOffers, wire.KindOffer, body); err != nil && ctx.Err() == nil {
			n.log.Warn("publish offer", "err", err)
		}
		for publish := false; !publish; {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				refresh()
				publish = true
			case <-n.offerChanged:
				changed := refresh()
				offer, _ := n.ownOffer()
				publish = changed || !onlyTaken(published, offer)
			case <-check.C:
				publish = refresh()
			}
		}
	}
}

// onlyTaken reports whether now differs from published in nothing but GPUs
// that were free and are now held; holdings are compared by the caller.
func onlyTaken(published, now market.Offer) bool {
	if len(published.GPUs) != len(now.GPUs) {
		return false
	}
	for i, g := range now.GPUs {
		p := published.GPUs[i]
		if g.Free && !p.Free {
			return false
		}
		p.Free = g.Free
		if p != g {
			return false
		}
	}
	published.GPUs, now.GPUs = nil, nil
	published.Holdings, now.Holdings = market.Holdings{}, market.Holdings{}
	return reflect.DeepEqual(published, now)
}

// receiveOffers applies every accepted offer to the view.
func (n *Node) receiveOffers(ctx context.Context, sub *p2p.Subscription) {
	saved := savedPeers{}
	for {
		s, err := sub.Next(ctx)
		if err != nil {
			return
		}
		n.applyOffer(ctx, s, saved)
	}
}

// applyOffer applies one accepted offer to the view. A panic fails this
// offer only (recoverPanic): the loop goes on with the next.
func (n *Node) applyOffer(ctx context.Context, s p2p.Signed, saved savedPeers) {
	defer n.recoverPanic(panicGossipHandle, "topic", p2p.TopicOffers, "signer", s.Signer)
	var b wire.OfferBody
	if err := s.Decode(&b); err != nil {
		return // the validator already checked it; cannot happen
	}
	now := time.Now()
	n.observeDelay(s, now)
	// A changed offer may change who a pass between epochs assigns a
	// waiting job to: the provider that holds devices it has not yet
	// announced knows it cannot take the job before its peers do.
	n.signalWork()
	if isNew := n.offers.Apply(b, s.Message.Time, now); isNew {
		n.log.Info("provider joined the view", "provider", b.Offer.Provider, "gpus", len(b.Offer.GPUs))
		n.learnAddrs(ctx, s.Signer, b.Addrs)
		if s.Signer != n.self {
			// A provider that left the view for missed heartbeats and
			// came back, as a stall of this node makes dozens do at
			// once, is written again only with new addresses or once
			// the record ages; and the write is not this loop's to
			// wait for: a store stalled by compaction would hold up
			// every offer behind it, and more providers would miss
			// their heartbeats.
			if saved.due(s.Signer, b.Addrs, now) {
				signer, addrs := s.Signer, b.Addrs
				n.loops.Go(func() {
					defer n.recoverPanic(panicTask, "task", "remember peer", "peer", signer)
					n.rememberPeer(signer, addrs)
				})
			}
			n.submitter.Joined(now)
		}
	}
}

// Where the node recovers a panic in its own work: label values of
// e31_panics_total beside those of the packages it wires (p2p, content,
// apiserver).
const (
	// panicGossipHandle: applying one accepted gossip message; the
	// message is dropped.
	panicGossipHandle = "gossip-handle"
	// panicMatch: one epoch's Match and what this node does with its
	// result; the epoch is lost.
	panicMatch = "match"
	// panicTask: one of the node's short tasks (a dial, a peer record).
	panicTask = "task"
	// panicLease: the provider's lease goroutine (provider.Metrics.Panics).
	panicLease = "lease"
)

// recoverPanic, deferred, stops a panic in one unit of the node's own
// work on what peers sent (a gossip message, an epoch's pass, a short
// task), so that the unit fails and the loop goes on with the next, as
// net/http does with a request: the panic is logged at error level with
// its stack and counted under where. It must itself be the deferred call:
// recover stops a panic only there. A safety net for bugs, never a way to
// refuse a message: the tests fail on any "panic recovered" in a log.
func (n *Node) recoverPanic(where string, attrs ...any) {
	v := recover()
	if v == nil {
		return
	}
	attrs = append([]any{"where", where, "panic", fmt.Sprint(v)}, attrs...)
	n.log.Error("panic recovered", append(attrs, "stack", string(debug.Stack()))...)
	n.metrics.panicked(where)
}

// learnAddrs keeps a provider's addresses so that a direct stream can reach
// it, and connects to it so that gossip does not hang on the bootstrap peers
// alone.
func (n *Node) learnAddrs(ctx context.Context, p peer.ID, addrs []string) {
	if p == n.self {
		return
	}
	info, ok := addrInfo(p, addrs)
	if !ok {
		return
	}
	n.host.Peerstore().AddAddrs(p, info.Addrs, peerAddrTTL)
	if len(n.host.Network().Peers()) >= maxDialedPeers {
		return
	}
	n.loops.Go(func() {
		defer n.recoverPanic(panicTask, "task", "connect", "peer", p)
		cctx, cancel := context.WithTimeout(ctx, n.cfg.ConnectTimeout)
		defer cancel()
		if err := n.host.Connect(cctx, info); err != nil && ctx.Err() == nil {
			n.log.Debug("connect to provider", "peer", p, "err", err)
		}
	})
}

// learnAddrsOnly records a peer's addresses without dialling it.
func (n *Node) learnAddrsOnly(p peer.ID, addrs []string) {
	if p == n.self {
		return
	}
	if info, ok := addrInfo(p, addrs); ok {
		n.host.Peerstore().AddAddrs(p, info.Addrs, peerAddrTTL)
	}
}

// peerAddrTTL is how long learned addresses are kept.
const peerAddrTTL = time.Hour

// addrInfo parses the /p2p/ multiaddrs a peer published about itself,
// keeping only those that name it.
func addrInfo(p peer.ID, addrs []string) (peer.AddrInfo, bool) {
	info := peer.AddrInfo{ID: p}
	for _, a := range addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			continue
		}
		if ai, err := peer.AddrInfoFromP2pAddr(m); err == nil && ai.ID == p {
			info.Addrs = append(info.Addrs, ai.Addrs...)
		}
	}
	return info, len(info.Addrs) > 0
}

// maxDialedPeers caps the connections a node opens on its own to providers it
// learns of; beyond it gossip's mesh is already well connected.
const maxDialedPeers = 32

// expireOffers drops providers that missed their heartbeats.
func (n *Node) expireOffers(ctx context.Context) {
	t := time.NewTicker(max(n.cfg.Heartbeat/2, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, p := range n.offers.Expire(now) {
				n.log.Info("provider left the view", "provider", p, "reason", "missed heartbeats")
			}
		}
	}
}

// receiveJobs applies every accepted message of the jobs topic to the view,
// and to this node's own leases where they are concerned.
func (n *Node) receiveJobs(ctx context.Context, sub *p2p.Subscription) {
	for {
		s, err := sub.Next(ctx)
		if err != nil {
			return
		}
		n.receiveJobMessage(s)
	}
}

// receiveJobMessage applies one accepted jobs message. A panic fails this
// message only (recoverPanic): the loop goes on with the next.
func (n *Node) receiveJobMessage(s p2p.Signed) {
	defer n.recoverPanic(panicGossipHandle, "topic", p2p.TopicJobs, "kind", s.Message.Kind, "signer", s.Signer)
	now := time.Now()
	n.observeDelay(s, now)
	n.applyJobMessage(s, now)
}

// observeDelay records how long gossip took to bring a message from
// another peer. This node's own messages come back without crossing the
// network and would only pull the figure down. Messages signed before the
// node had been up for joinHistory are left out: gossipsub offers a
// newcomer the messages of its last three heartbeats (IHAVE/IWANT), whose
// age measures when the newcomer joined, not gossip's delay; a few of them
// in a window of 256 would set its announced p99, and so every peer's
// delay, to the ceiling until fresher samples pushed them out.
func (n *Node) observeDelay(s p2p.Signed, now time.Time) {
	if s.Signer == n.self || s.Time().Before(n.started.Add(joinHistory)) {
		return
	}
	n.delays.Observe(s.Time(), now)
}

// joinHistory covers gossipsub's history window (3 heartbeats of 1s) and
// the time to reach the bootstrap peers and form a mesh.
const joinHistory = 5 * time.Second

// applyJobMessage applies a jobs message that arrived at now. The view
// stamps each event with its signing and arrival times (view.Stamp), so that
// an epoch's cut, removals included, falls on signing times, which every
// peer sees alike.
func (n *Node) applyJobMessage(s p2p.Signed, now time.Time) {
	at := view.Stamp{Signed: s.Time(), Arrived: now}
	switch s.Message.Kind {
	case wire.KindDeclaration:
		var b wire.DeclarationBody
		if s.Decode(&b) != nil {
			return
		}
		id := wire.JobID(s)
		if n.market.AddJob(&view.OpenJob{ID: id, Submitter: s.Signer, Body: b, Seen: now, Signed: s.Time(), Hash: s.Hash()}) {
			n.log.Debug("job declared", "job", id, "submitter", s.Signer)
			n.learnAddrsOnly(s.Signer, b.Addrs)
			n.signalWork()
		}
	case wire.KindRequeue:
		// The validator checked every declaration in it already.
		var rb wire.RequeueBody
		if s.Decode(&rb) != nil {
			return
		}
		for _, raw := range rb.Declarations {
			// Most of a requeue is jobs the view holds: those cost a
			// hash, not a decode.
			known, opened := n.market.Reannounced(raw, s.Signer, now)
			if opened {
				n.signalWork()
			}
			if known {
				continue
			}
			d, err := p2p.Reopen(raw) // verified by the validator
			if err != nil {
				continue
			}
			var b wire.DeclarationBody
			if d.Decode(&b) != nil {
				continue
			}
			if n.market.AddJob(&view.OpenJob{ID: wire.JobID(d), Submitter: d.Signer, Body: b, Seen: now, Signed: s.Time(), Hash: d.Hash()}) {
				n.signalWork()
			}
		}
		for _, a := range wire.AcceptedAvoid(s) {
			n.market.AddAvoid(a.Job, s.Signer, a.Providers, at)
			n.signalWork()
		}
	case wire.KindWithdrawal:
		var b wire.WithdrawalBody
		if s.Decode(&b) != nil {
			return
		}
		if sub, ok := n.market.SubmitterOf(b.Job); ok && sub != s.Signer {
			return // counted as forged by the validator
		}
		n.market.CloseJob(b.Job, s.Signer, at)
		n.provider.Withdraw(b.Job, s.Signer)
	case wire.KindLease:
		var l wire.SignedLease
		if s.Decode(&l) != nil {
			return
		}
		if n.market.AddLease(l, at) {
			n.log.Debug("lease announced", "lease", l.Terms.ID, "job", l.Terms.Job, "provider", l.Terms.Provider)
			// A pass that gave a job to these GPUs, on a view without
			// the lease, is now wrong: pass again (fastPass).
			n.signalWork()
		}
	case wire.KindRelease:
		var r wire.ReleaseBody
		if s.Decode(&r) != nil {
			return
		}
		n.market.ReleaseLease(r, s.Signer, at)
		if r.Requeued && s.Signer.String() == r.Submitter {
			n.provider.StopLease(r.Lease, s.Signer)
		}
		n.log.Debug("lease released", "lease", r.Lease, "outcome", r.Outcome)
		n.signalWork()
	}
}

// epochOf returns the epoch number of t and its start.
func (n *Node) epochOf(t time.Time) (uint64, time.Time) {
	e := n.cfg.Epoch.Milliseconds()
	num := t.UnixMilli() / e
	return uint64(num), time.UnixMilli(num * e)
}

// matchLoop runs Match once an epoch, on the view frozen at the epoch's
// start minus the epoch delay, and acts on what concerns this node: as a
// provider it proposes the leases Match assigned to it; as a submitter it
// records why its jobs wait.
func (n *Node) matchLoop(ctx context.Context) {
	atCeiling := false // the last epoch's adaptive delay was at its ceiling
	for {
		_, start := n.epochOf(time.Now())
		next := start.Add(n.cfg.Epoch)
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		epoch, start := n.epochOf(next)
		delay := n.epochDelay(start)
		if adaptive := n.cfg.EpochDelay == 0; adaptive && (delay >= n.delayRule.Ceiling()) != atCeiling {
			atCeiling = !atCeiling
			if atCeiling {
				n.log.Warn("epoch delay at its ceiling, half the epoch: the gossip delay some provider announces needs more, so views may differ and rounds be lost; a longer --epoch helps", "delay", delay)
			} else {
				n.log.Info("epoch delay below its ceiling again", "delay", delay)
			}
		}
		n.matchEpoch(epoch, start, delay)
	}
}

// matchEpoch runs one epoch's Match and acts on it. The view it matches is
// made of what peers sent, so a panic fails this epoch only
// (recoverPanic): the loop goes on with the next.
func (n *Node) matchEpoch(epoch uint64, start time.Time, delay time.Duration) {
	defer n.recoverPanic(panicMatch, "epoch", epoch)
	cutoff := start.Add(-delay)
	n.prune()
	v := n.market.Snapshot(epoch, start, cutoff, n.offers.At(cutoff, start))
	if len(v.Jobs) == 0 {
		return
	}
	res := market.Match(v, market.Options{})
	n.submitter.RecordWaits(res)
	n.submitter.RecordReservations(res)
	n.provider.Prestage(n.reservedHere(res))
	n.recordMatch(api.Match{Epoch: epoch, ViewHash: res.ViewHash, Jobs: len(v.Jobs), DelayMs: delay.Milliseconds(), Assignments: res.Assignments})
	for _, a := range res.Assignments {
		if a.Provider == n.self.String() {
			n.provider.Propose(a, epoch, res.ViewHash)
		}
	}
}

// epochDelay is the delay of the epoch starting at start: the configured
// one, or the one every peer derives from the offers at the epoch's
// announcement cut.
func (n *Node) epochDelay(start time.Time) time.Duration {
	if n.cfg.EpochDelay > 0 {
		return n.cfg.EpochDelay
	}
	return n.delayRule.Delay(n.offers.At(n.delayRule.AnnouncementCut(start), start))
}

// prune forgets what no longer matters: closed jobs and released leases
// after an hour, open jobs not re-announced for ten heartbeats (a submitter
// re-announces every requeueEvery), withdrawals after an hour.
func (n *Node) prune() {
	now := time.Now()
	n.market.Prune(now, time.Hour, max(10*n.cfg.Heartbeat, 3*requeueEvery*n.cfg.Heartbeat))
	n.provider.Prune(now, time.Hour)
}

// matchHistory is how many recent Match results the node keeps for
// inspection (GET /v1/matches).
const matchHistory = 64

func (n *Node) recordMatch(m api.Match) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.matches = append(n.matches, m)
	if len(n.matches) > matchHistory {
		n.matches = n.matches[len(n.matches)-matchHistory:]
	}
}

// Matches returns the recent Match results, oldest first.
func (n *Node) Matches() []api.Match {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.matches)
}
