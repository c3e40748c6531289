package node

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/e31network/e31/node/metrics"
	"github.com/e31network/e31/node/reach"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// receiveOffers applies every accepted offer to the view.
func (n *Node) receiveOffers(ctx context.Context, sub *p2p.Subscription) {
	saved := reach.Saved{}
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
func (n *Node) applyOffer(ctx context.Context, s p2p.Signed, saved reach.Saved) {
	defer n.recoverPanic(metrics.PanicGossipHandle, "topic", p2p.TopicOffers, "signer", s.Signer)
	b, err := wire.DecodeOffer(s)
	if err != nil {
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
		n.peers.Learn(ctx, s.Signer, b.Addrs)
		if s.Signer != n.self {
			// A provider that left the view for missed heartbeats and
			// came back, as a stall of this node makes dozens do at
			// once, is written again only with new addresses or once
			// the record ages; and the write is not this loop's to
			// wait for: a store stalled by compaction would hold up
			// every offer behind it, and more providers would miss
			// their heartbeats.
			if saved.Due(s.Signer, b.Addrs, now) {
				signer, addrs := s.Signer, b.Addrs
				n.goTask("remember peer", signer, func() { n.peers.Remember(signer, addrs) })
			}
			n.submitter.Joined(now)
		}
	}
}

// recoverPanic, deferred, stops a panic in one unit of the node's own
// work on what peers sent (a gossip message, a short task; node/epoch
// does the same for an epoch's pass), so that the unit fails and the loop goes on with the next, as
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
	n.metrics.Panicked(where)
}

// goTask runs fn as one of the node's short tasks, named task, about peer
// p: in the loops' group, which shutdown waits for, a panic recovered as
// metrics.PanicTask so that it fails this task only.
func (n *Node) goTask(task string, p peer.ID, fn func()) {
	n.loops.Go(func() {
		defer n.recoverPanic(metrics.PanicTask, "task", task, "peer", p)
		fn()
	})
}

// expireOffers drops providers that missed their heartbeats.
func (n *Node) expireOffers(ctx context.Context) {
	t := time.NewTicker(max(n.cfg.Heartbeat/2, 50*time.Millisecond))
	defer t.Stop()
	crowded := false
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, p := range n.offers.Expire(now) {
				n.log.Info("provider left the view", "provider", p, "reason", "missed heartbeats")
			}
			crowded = n.warnCrowded(crowded)
		}
	}
}

// crowdedShard is the number of providers in this node's market past which
// it says that the network has outgrown its shards: every peer of the
// shard pays for each of them.
const crowdedShard = 4 * p2p.ShardProviders

// warnCrowded logs, once each time the view grows past crowdedShard, how
// many shards a network this size should have; it returns whether the view
// is past it.
func (n *Node) warnCrowded(was bool) bool {
	held := n.offers.Len()
	now := held > crowdedShard
	if now && !was {
		n.log.Warn("this node's market holds more providers than a shard is sized for: every peer pays for each; the network should split into more shards",
			"providers", held, "shard", n.shard.String(), "suggested_shards", p2p.SuggestShards(held*max(n.shard.Count, 1)))
	}
	return now
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
	defer n.recoverPanic(metrics.PanicGossipHandle, "topic", p2p.TopicJobs, "kind", s.Message.Kind, "signer", s.Signer)
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
		if n.market.AddJob(&view.OpenJob{ID: id, Submitter: s.Signer, Body: b, Seen: now, Signed: s.Time(), Hash: s.Hash(), Size: len(s.Raw)}) {
			n.log.Debug("job declared", "job", id, "submitter", s.Signer)
			n.peers.AddAddrs(s.Signer, b.Addrs)
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
			if n.market.AddJob(&view.OpenJob{ID: wire.JobID(d), Submitter: d.Signer, Body: b, Seen: now, Signed: s.Time(), Hash: d.Hash(), Size: len(raw)}) {
				n.signalWork()
			}
		}
		for _, a := range wire.AcceptedAvoid(s) {
			until := make([]time.Time, len(a.Providers))
			for k := range until {
				until[k] = a.UntilOf(k, s.Time())
			}
			n.market.AddAvoid(a.Job, s.Signer, a.Providers, until, at)
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
			// the lease, is now wrong: pass again (epoch.FastPath).
			n.signalWork()
		}
	case wire.KindRelease:
		var r wire.ReleaseBody
		if s.Decode(&r) != nil {
			return
		}
		n.applyRelease(r, s.Signer, at)
	case wire.KindTaskBatch:
		// The validator checked every lease and release in it already.
		var b wire.TaskBatchBody
		if s.Decode(&b) != nil {
			return
		}
		for _, l := range b.Leases {
			n.market.AddLease(l, at)
		}
		for _, r := range b.Releases {
			n.applyRelease(r, s.Signer, at)
		}
		n.log.Debug("task batch", "leases", len(b.Leases), "releases", len(b.Releases))
		n.signalWork()
	}
}

// applyRelease applies a release signed by by, stamped at.
func (n *Node) applyRelease(r wire.ReleaseBody, by peer.ID, at view.Stamp) {
	n.market.ReleaseLease(r, by, at)
	if r.Requeued && by.String() == r.Submitter {
		n.provider.StopLease(r.Lease, by)
	}
	n.log.Debug("lease released", "lease", r.Lease, "outcome", r.Outcome)
	n.signalWork()
}
