package node

import (
	"context"
	"time"

	"github.com/e31network/e31/node/metrics"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// receiveJobs applies every accepted message of the jobs topic to the view,
// and to this node's own leases where they are concerned.
func (f *gossipFeed) receiveJobs(ctx context.Context, sub *p2p.Subscription) {
	for {
		s, err := sub.Next(ctx)
		if err != nil {
			return
		}
		f.receiveJobMessage(s)
	}
}

// receiveJobMessage applies one accepted jobs message. A panic fails this
// message only (recoverPanic): the loop goes on with the next.
func (f *gossipFeed) receiveJobMessage(s p2p.Signed) {
	defer f.units.recoverPanic(metrics.PanicGossipHandle, "topic", p2p.TopicJobs, "kind", s.Message.Kind, "signer", s.Signer)
	now := time.Now()
	f.observeDelay(s, now)
	f.applyJobMessage(s, now)
}

// observeDelay records how long gossip took to bring a message from
// another peer. This node's own messages come back without crossing the
// network and would only pull the figure down. Messages signed before the
// node had been up for joinHistory are left out: gossipsub offers a
// newcomer the messages of its last three heartbeats (IHAVE/IWANT), whose
// age measures when the newcomer joined, not gossip's delay; a few of them
// in a window of 256 would set its announced p99, and so every peer's
// delay, to the ceiling until fresher samples pushed them out.
func (f *gossipFeed) observeDelay(s p2p.Signed, now time.Time) {
	if s.Signer == f.self || s.Time().Before(f.started.Add(joinHistory)) {
		return
	}
	f.delays.Observe(s.Time(), now)
}

// joinHistory covers gossipsub's history window (3 heartbeats of 1s) and
// the time to reach the bootstrap peers and form a mesh.
const joinHistory = 5 * time.Second

// applyJobMessage applies a jobs message that arrived at now. The view
// stamps each event with its signing and arrival times (view.Stamp), so that
// an epoch's cut, removals included, falls on signing times, which every
// peer sees alike.
func (f *gossipFeed) applyJobMessage(s p2p.Signed, now time.Time) {
	at := view.Stamp{Signed: s.Time(), Arrived: now}
	switch s.Message.Kind {
	case wire.KindDeclaration:
		var b wire.DeclarationBody
		if s.Decode(&b) != nil {
			return
		}
		id := wire.JobID(s)
		if f.market.AddJob(&view.OpenJob{ID: id, Submitter: s.Signer, Body: b, Seen: now, Signed: s.Time(), Hash: s.Hash(), Size: len(s.Raw)}) {
			f.log.Debug("job declared", "job", id, "submitter", s.Signer)
			f.peers.AddAddrs(s.Signer, b.Addrs)
			f.signalWork()
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
			known, opened := f.market.Reannounced(raw, s.Signer, now)
			if opened {
				f.signalWork()
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
			if f.market.AddJob(&view.OpenJob{ID: wire.JobID(d), Submitter: d.Signer, Body: b, Seen: now, Signed: s.Time(), Hash: d.Hash(), Size: len(raw)}) {
				f.signalWork()
			}
		}
		for _, a := range wire.AcceptedAvoid(s) {
			until := make([]time.Time, len(a.Providers))
			for k := range until {
				until[k] = a.UntilOf(k, s.Time())
			}
			f.market.AddAvoid(a.Job, s.Signer, a.Providers, until, at)
			f.signalWork()
		}
	case wire.KindWithdrawal:
		var b wire.WithdrawalBody
		if s.Decode(&b) != nil {
			return
		}
		if sub, ok := f.market.SubmitterOf(b.Job); ok && sub != s.Signer {
			return // counted as forged by the validator
		}
		f.market.CloseJob(b.Job, s.Signer, at)
		f.provider.Withdraw(b.Job, s.Signer)
	case wire.KindLease:
		var l wire.SignedLease
		if s.Decode(&l) != nil {
			return
		}
		if f.market.AddLease(l, at) {
			f.log.Debug("lease announced", "lease", l.Terms.ID, "job", l.Terms.Job, "provider", l.Terms.Provider)
			// A pass that gave a job to these GPUs, on a view without
			// the lease, is now wrong: pass again (epoch.FastPath).
			f.signalWork()
		}
	case wire.KindRelease:
		var r wire.ReleaseBody
		if s.Decode(&r) != nil {
			return
		}
		f.applyRelease(r, s.Signer, at)
	case wire.KindTaskBatch:
		// The validator checked every lease and release in it already.
		var b wire.TaskBatchBody
		if s.Decode(&b) != nil {
			return
		}
		for _, l := range b.Leases {
			f.market.AddLease(l, at)
		}
		for _, r := range b.Releases {
			f.applyRelease(r, s.Signer, at)
		}
		f.log.Debug("task batch", "leases", len(b.Leases), "releases", len(b.Releases))
		f.signalWork()
	}
}

// applyRelease applies a release signed by by, stamped at.
func (f *gossipFeed) applyRelease(r wire.ReleaseBody, by peer.ID, at view.Stamp) {
	f.market.ReleaseLease(r, by, at)
	if r.Requeued && by.String() == r.Submitter {
		f.provider.StopLease(r.Lease, by)
	}
	f.log.Debug("lease released", "lease", r.Lease, "outcome", r.Outcome)
	f.signalWork()
}
